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
    /// The version of each book read whole, when the source has one (see
    /// [`steward_core::contacts::AccountRead::versions`]).
    pub versions: std::collections::BTreeMap<String, String>,
    /// Books left unread because their version has not changed (their stored cards stay).
    pub unchanged: Vec<String>,
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
    /// no book was read whole or found unchanged (an empty vdir root is read whole: it lists
    /// no book), so a source that cannot be read never reaches the store.
    pub fn into_account_read(
        self,
    ) -> Result<(steward_core::contacts::AccountRead, Vec<BookError>), NothingRead> {
        if self.books.is_empty()
            && self.unchanged.is_empty()
            && self.listed.as_ref().is_none_or(|l| !l.is_empty())
        {
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
            versions: self.versions,
        };
        Ok((read, self.errors))
    }
}

/// What of the file or item `path` could not be read as a whole.
fn problem(path: &Path, code: &'static str, message: String) -> BookError {
    BookError { path: path.to_owned(), uid: None, code, message }
}

/// Reads one file's cards into `cards`; `false` when the file as a whole could not be read.
fn add_file(
    cards: &mut Vec<Contact>,
    errors: &mut Vec<BookError>,
    path: &Path,
    source: &str,
    region: Option<phone::Region>,
) -> bool {
    let fail = |code: &'static str, message: String| problem(path, code, message);
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
    add_text(cards, errors, path, &String::from_utf8_lossy(&bytes), source, region)
}

/// Reads one text's cards into `cards` (errors against `path`, a file, a URL, an item the
/// launcher handed over); `false` when the text as a whole could not be read (or is larger
/// than [`vcard::MAX_VCF_BYTES`]).
pub(crate) fn add_text(
    cards: &mut Vec<Contact>,
    errors: &mut Vec<BookError>,
    path: &Path,
    text: &str,
    source: &str,
    region: Option<phone::Region>,
) -> bool {
    let fail = |code: &'static str, message: String| problem(path, code, message);
    if text.len() > vcard::MAX_VCF_BYTES {
        errors.push(fail("VCF_TOO_LARGE", format!("larger than {} bytes", vcard::MAX_VCF_BYTES)));
        return false;
    }
    match read_vcf(text, source, region) {
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

/// A book's version from its listing: a digest of every item's name and ETag, so any added,
/// changed or removed card changes it.
pub(crate) fn listing_version(items: &[(String, String)]) -> String {
    use sha2::Digest as _;
    let mut sorted: Vec<&(String, String)> = items.iter().collect();
    sorted.sort();
    let mut h = sha2::Sha256::new();
    for (name, etag) in sorted {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(etag.as_bytes());
        h.update([0]);
    }
    h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// Every address book of the CardDAV account behind `client`. Each book is listed (names and
/// ETags); a book whose listing has the version `versions` records for it is left unread (its
/// stored cards stay), any other is downloaded whole and read. A book with an item that cannot
/// be downloaded or read is not read whole, so its stored cards stay as they were.
pub fn read_carddav(
    client: &crate::dav::DavClient,
    region: Option<phone::Region>,
    versions: &std::collections::BTreeMap<String, String>,
) -> BooksRead {
    use crate::dav::DavKind;
    let mut out = BooksRead::default();
    let fail = |href: &str, e: &crate::dav::DavError| BookError {
        path: client.url_of(href).into(),
        uid: None,
        code: steward_core::StewardError::code(e),
        message: e.to_string(),
    };
    let books = match client.discover(DavKind::AddressBooks) {
        Ok(b) => b,
        Err(e) => {
            out.errors.push(fail("/", &e));
            return out;
        }
    };
    // A server that shows no address book, or more than are read, is not taken as the whole
    // account: no stored book is dropped for it.
    if books.is_empty() {
        out.errors.push(BookError {
            path: client.url_of("/").into(),
            uid: None,
            code: "DAV_NO_COLLECTIONS",
            message: "the server listed no address book".to_owned(),
        });
        return out;
    }
    if books.len() < crate::dav::MAX_DAV_COLLECTIONS {
        out.listed = Some(books.iter().map(|b| b.id.clone()).collect());
    }
    for book in books {
        let listing = match client.list(&book, None) {
            Ok(l) if l.partial => {
                out.errors.push(BookError {
                    path: client.url_of(&book.href).into(),
                    uid: None,
                    code: "DAV_PARTIAL_LISTING",
                    message: "some cards could not be listed: the book is left as stored"
                        .to_owned(),
                });
                continue;
            }
            Ok(l) => l,
            Err(e) => {
                out.errors.push(fail(&book.href, &e));
                continue;
            }
        };
        let version = listing_version(&listing.items);
        if versions.get(&book.id) == Some(&version) {
            out.unchanged.push(book.id);
            continue;
        }
        let names: Vec<String> = listing.items.into_iter().map(|(n, _)| n).collect();
        let got = match client.fetch(DavKind::AddressBooks, &book, &names) {
            Ok(g) => g,
            Err(e) => {
                out.errors.push(fail(&book.href, &e));
                continue;
            }
        };
        let mut whole = got.len() == names.len();
        let mut cards = Vec::new();
        for r in got {
            match r {
                Ok(f) => {
                    let href = format!("{}{}", book.href, f.name);
                    let path = PathBuf::from(client.url_of(&href));
                    whole &=
                        add_text(&mut cards, &mut out.errors, &path, &f.data, &book.id, region);
                }
                Err((name, e)) => {
                    out.errors.push(fail(&format!("{}{name}", book.href), &e));
                    whole = false;
                }
            }
        }
        if whole {
            out.cards.extend(cards);
            out.versions.insert(book.id.clone(), version);
            out.books.push(book.id);
        }
    }
    out
}
