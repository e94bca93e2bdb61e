//! Address books: `.vcf` files of many cards and vdir collections (one card per `.vcf` item,
//! what khard and vdirsyncer keep), read with calcard into [`Contact`]s — names, addresses
//! normalized, phones in E.164 — and merged email-first ([`steward_core::contacts::merge`]).

pub mod phone;
pub mod vcard;

use std::path::{Path, PathBuf};

use steward_core::contacts::Contact;

pub use vcard::{CardError, VcfError, VcfRead, read_vcf};

/// Most address books read from one vdir root.
/// Fixed (not a setting).
pub const MAX_BOOKS: usize = 1_000;
/// Most cards read from one address book.
/// Fixed (not a setting).
pub const MAX_BOOK_ITEMS: usize = 200_000;

pub use crate::SourceError as BookError;

/// What an address book source held, cards not yet merged.
#[derive(Debug, Clone, Default)]
pub struct BooksRead {
    /// Every card of the books read whole, in source order.
    pub cards: Vec<Contact>,
    /// The books read whole (a book with a file that could not be read is not: its stored
    /// cards stay as they were).
    pub books: Vec<String>,
    /// Every book the source lists now (a vdir root); `None` for a single file.
    pub listed: Option<Vec<String>>,
    /// What could not be read.
    pub errors: Vec<BookError>,
}

/// Nothing of an address book source could be read whole: the stored cards stay as they were.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct NothingRead {
    /// The first error's code, or `CONTACTS_NOTHING_READ`.
    pub code: &'static str,
    /// Why.
    pub message: String,
}

impl steward_core::StewardError for NothingRead {
    fn code(&self) -> &'static str {
        self.code
    }

    fn kind(&self) -> steward_core::ErrorKind {
        steward_core::ErrorKind::InvalidInput
    }
}

impl BooksRead {
    /// What the contacts store takes from this read, with the errors to report; refused when
    /// no book was read whole (an empty vdir root is read whole: it lists no book), so a
    /// source that cannot be read never reaches the store.
    pub fn into_account_read(
        self,
    ) -> Result<(steward_core::contacts::AccountRead, Vec<BookError>), NothingRead> {
        if self.books.is_empty() && self.listed.as_ref().is_none_or(|l| !l.is_empty()) {
            let e = self.errors.first();
            return Err(NothingRead {
                code: e.map_or("CONTACTS_NOTHING_READ", |e| e.code),
                message: e.map_or_else(
                    || "no address book found".to_owned(),
                    |e| format!("{}: {}", e.path.display(), e.message),
                ),
            });
        }
        let read = steward_core::contacts::AccountRead {
            cards: self.cards,
            books: self.books,
            listed: self.listed,
            errors: self.errors.len(),
        };
        Ok((read, self.errors))
    }
}

/// Reads one file's cards into `cards`; `false` when the file as a whole could not be read.
fn add_file(
    cards: &mut Vec<Contact>,
    errors: &mut Vec<BookError>,
    path: &Path,
    source: &str,
    region: Option<phone::Region>,
) -> bool {
    let fail = |code: &'static str, message: String| BookError {
        path: path.to_owned(),
        uid: None,
        code,
        message,
    };
    match std::fs::metadata(path) {
        Ok(m) if m.len() > vcard::MAX_VCF_BYTES as u64 => {
            errors
                .push(fail("VCF_TOO_LARGE", format!("larger than {} bytes", vcard::MAX_VCF_BYTES)));
            return false;
        }
        Ok(_) => {}
        Err(e) => {
            errors.push(fail("CONTACTS_SOURCE_UNREADABLE", e.to_string()));
            return false;
        }
    }
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            errors.push(fail("CONTACTS_SOURCE_UNREADABLE", e.to_string()));
            return false;
        }
    };
    match read_vcf(&String::from_utf8_lossy(&bytes), source, region) {
        Ok(read) => {
            cards.extend(read.contacts);
            errors.extend(read.errors.into_iter().map(|e| BookError {
                path: path.to_owned(),
                uid: e.uid,
                code: e.code,
                message: e.message,
            }));
            true
        }
        Err(e) => {
            errors.push(fail(steward_core::StewardError::code(&e), e.to_string()));
            false
        }
    }
}

/// One `.vcf` file of any number of cards; `region` reads phones written without a country
/// code.
pub fn read_vcf_file(path: &Path, region: Option<phone::Region>) -> BooksRead {
    let mut out = BooksRead::default();
    let source = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    if add_file(&mut out.cards, &mut out.errors, path, &source, region) {
        out.books.push(source);
    }
    out
}

/// Every address book under the vdir `root` (a root that itself holds `.vcf` items is read as
/// one); `.tmp` and extensionless files are not items. The source of each card is its book's
/// directory name.
pub fn read_vdir(root: &Path, region: Option<phone::Region>) -> Result<BooksRead, std::io::Error> {
    let vcf = |p: &Path| p.extension().is_some_and(|x| x.eq_ignore_ascii_case("vcf"));
    let dirs = crate::vdir_collections(root, "vcf", MAX_BOOKS)?;
    let mut out = BooksRead::default();
    let name =
        |d: &Path| d.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    out.listed = Some(dirs.iter().map(|d| name(d)).collect());
    for dir in dirs {
        let source = name(&dir);
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
        // A book counts as read only when every one of its files was: otherwise its stored
        // cards stay, and nothing is lost to a file that could not be read this time.
        let mut cards = Vec::new();
        let mut whole = true;
        for item in &items {
            whole &= add_file(&mut cards, &mut out.errors, item, &source, region);
        }
        if whole {
            out.cards.extend(cards);
            out.books.push(source);
        }
    }
    Ok(out)
}
