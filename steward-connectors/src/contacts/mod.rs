//! Address books: `.vcf` files of many cards and vdir collections (one card per `.vcf` item,
//! what khard and vdirsyncer keep), read with calcard into [`Contact`]s — names, addresses
//! normalized, phones in E.164 — and merged email-first ([`steward_core::contacts::merge`]).

pub mod phone;
pub mod vcard;

use std::path::{Path, PathBuf};

use serde::Serialize;
use steward_core::contacts::Contact;

pub use vcard::{CardError, VcfError, VcfRead, read_vcf};

/// Most address books read from one vdir root.
/// Fixed (not a setting).
pub const MAX_BOOKS: usize = 1_000;
/// Most cards read from one address book.
/// Fixed (not a setting).
pub const MAX_BOOK_ITEMS: usize = 200_000;

/// A card or file that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BookError {
    /// The file.
    pub path: PathBuf,
    /// The card's UID, when the error is one card's.
    pub uid: Option<String>,
    /// A stable code.
    pub code: &'static str,
    /// What was wrong.
    pub message: String,
}

/// What an address book source held, cards not yet merged.
#[derive(Debug, Clone, Default)]
pub struct BooksRead {
    /// Every card, in source order.
    pub cards: Vec<Contact>,
    /// What could not be read.
    pub errors: Vec<BookError>,
}

fn add_file(out: &mut BooksRead, path: &Path, source: &str, region: Option<phone::Region>) {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            out.errors.push(BookError {
                path: path.to_owned(),
                uid: None,
                code: "CONTACTS_SOURCE_UNREADABLE",
                message: e.to_string(),
            });
            return;
        }
    };
    match read_vcf(&String::from_utf8_lossy(&bytes), source, region) {
        Ok(read) => {
            out.cards.extend(read.contacts);
            out.errors.extend(read.errors.into_iter().map(|e| BookError {
                path: path.to_owned(),
                uid: e.uid,
                code: e.code,
                message: e.message,
            }));
        }
        Err(e) => out.errors.push(BookError {
            path: path.to_owned(),
            uid: None,
            code: steward_core::StewardError::code(&e),
            message: e.to_string(),
        }),
    }
}

/// One `.vcf` file of any number of cards; `region` reads phones written without a country
/// code.
pub fn read_vcf_file(path: &Path, region: Option<phone::Region>) -> BooksRead {
    let mut out = BooksRead::default();
    let source = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    add_file(&mut out, path, &source, region);
    out
}

/// Every address book under the vdir `root` (a root that itself holds `.vcf` items is read as
/// one); `.tmp` and extensionless files are not items. The source of each card is its book's
/// directory name.
pub fn read_vdir(root: &Path, region: Option<phone::Region>) -> Result<BooksRead, std::io::Error> {
    let vcf = |p: &Path| p.extension().is_some_and(|x| x.eq_ignore_ascii_case("vcf"));
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    if std::fs::read_dir(root)?.filter_map(Result::ok).any(|e| vcf(&e.path())) {
        dirs = vec![root.to_path_buf()];
    }
    dirs.truncate(MAX_BOOKS);
    let mut out = BooksRead::default();
    for dir in dirs {
        let source = dir.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let mut items: Vec<PathBuf> = match std::fs::read_dir(&dir) {
            Ok(it) => it
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_file() && vcf(p))
                .collect(),
            Err(e) => {
                out.errors.push(BookError {
                    path: dir.clone(),
                    uid: None,
                    code: "CONTACTS_SOURCE_UNREADABLE",
                    message: e.to_string(),
                });
                continue;
            }
        };
        items.sort();
        if items.len() > MAX_BOOK_ITEMS {
            out.errors.push(BookError {
                path: dir.clone(),
                uid: None,
                code: "CONTACTS_TOO_MANY_ITEMS",
                message: format!("only the first {MAX_BOOK_ITEMS} items are read"),
            });
            items.truncate(MAX_BOOK_ITEMS);
        }
        for item in &items {
            add_file(&mut out, item, &source, region);
        }
    }
    Ok(out)
}
