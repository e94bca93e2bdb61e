//! The calendars and address books the runner's `pim-sync` job keeps current, from
//! `config.toml`:
//!
//! ```toml
//! [[calendar.sources]]
//! kind = "vdir"              # vdir (a folder of calendars), ics (one file) or caldav
//! path = "~/.calendars"
//! account = "personal"       # optional: "local"
//!
//! [[calendar.sources]]
//! kind = "caldav"
//! url = "https://dav.example.org/"   # the server, the principal or the calendar home
//! username = "giulia"
//! password_file = "~/.config/steward/dav-password"   # mode 0600; or keyring = "service";
//! account = "work"                                   # without username: a bearer token
//!
//! [contacts]
//! region = "IT"              # optional: phones written without a country code
//!
//! [[contacts.sources]]
//! kind = "vdir"              # vdir (a folder of address books), vcf (one file) or carddav
//! path = "~/.contacts"
//! account = "personal"       # optional: "local"
//! ```

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::{
    SourceError,
    contacts::{BooksRead, NothingRead, phone::Region},
    dav::{DavAccount, DavClient},
    launcher::LauncherFeed,
};
use steward_core::{
    ErrorKind, Steward, StewardError,
    calendar::store::{CalendarReport, CalendarStoreError},
    contacts::{ContactStoreError, ContactsReport},
    runner::{PimSource, PimSummary},
};

/// Most per-item errors a sync's detail lists.
/// Fixed (not a setting).
const MAX_LISTED_ERRORS: usize = 20;

/// Where a configured calendar or address book source is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PimPlace {
    /// A vdir root (a folder of collections).
    Vdir(PathBuf),
    /// One file (`.ics` of events, `.vcf` of cards).
    File(PathBuf),
    /// A CalDAV or CardDAV account.
    Dav(DavAccount),
}

/// Where a calendar or address book source is read from now: the one entry the runner, the
/// command line, the bindings and the demo index through.
#[derive(Clone, Copy)]
pub enum PimFrom<'a> {
    /// A vdir root.
    Vdir(&'a Path),
    /// One `.ics` or `.vcf` file.
    File(&'a Path),
    /// A CalDAV or CardDAV account.
    Dav(&'a DavClient),
    /// The launcher app's own stores (EventKit, Contacts).
    Launcher(&'a dyn LauncherFeed),
}

/// Indexing into an account a configured source of another place owns: refused, since a
/// source retires what its account holds that it does not list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "account {account:?} belongs to the configured source {source_name}: index this one under another account"
)]
pub struct AccountTaken {
    /// The account.
    pub account: String,
    /// The configured source that owns it.
    pub source_name: String,
}

impl StewardError for AccountTaken {
    fn code(&self) -> &'static str {
        "PIM_ACCOUNT_TAKEN"
    }

    fn kind(&self) -> ErrorKind {
        ErrorKind::Conflict
    }
}

/// Whether `from` is the configured `place`.
fn same_place(place: &PimPlace, from: PimFrom<'_>) -> bool {
    let same_path = |a: &Path, b: &Path| {
        a == b || a.canonicalize().ok().zip(b.canonicalize().ok()).is_some_and(|(a, b)| a == b)
    };
    match (place, from) {
        (PimPlace::Vdir(a), PimFrom::Vdir(b)) | (PimPlace::File(a), PimFrom::File(b)) => {
            same_path(a, b)
        }
        (PimPlace::Dav(a), PimFrom::Dav(c)) => {
            a.url.trim().trim_end_matches('/') == c.configured_url().trim_end_matches('/')
        }
        _ => false,
    }
}

/// Refuses `account` when a source configured in `<home>/config.toml` (calendars, or address
/// books) owns it and is not `from`.
fn check_account(
    steward: &Steward,
    calendars: bool,
    account: &str,
    from: PimFrom<'_>,
) -> Result<(), AccountTaken> {
    // A config that cannot be read is reported where it is read; it owns nothing here.
    let Ok((cals, books)) = crate::home::pim_config(steward.home()) else { return Ok(()) };
    let owners: Vec<(&str, &str, &PimPlace)> = if calendars {
        cals.iter().map(|c| (c.name.as_str(), c.account.as_str(), &c.kind)).collect()
    } else {
        books.iter().map(|b| (b.name.as_str(), b.account.as_str(), &b.kind)).collect()
    };
    match owners.into_iter().find(|(_, a, p)| *a == account && !same_place(p, from)) {
        Some((name, _, _)) => {
            Err(AccountTaken { account: account.to_owned(), source_name: name.to_owned() })
        }
        None => Ok(()),
    }
}

/// Why a calendar source changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum IndexCalendarsError {
    /// The account belongs to another configured source.
    #[error(transparent)]
    Taken(#[from] AccountTaken),
    /// The calendar store refused.
    #[error(transparent)]
    Store(#[from] CalendarStoreError),
}

impl StewardError for IndexCalendarsError {
    fn code(&self) -> &'static str {
        match self {
            Self::Taken(e) => e.code(),
            Self::Store(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Taken(e) => e.kind(),
            Self::Store(e) => e.kind(),
        }
    }
}

/// Reconciles the calendars of `from` into `calendar.db` under `account`, read in the
/// person's zone; what could not be read is returned with the report and never stops the run.
/// Refused when a configured source of another place owns `account`.
pub fn index_calendars(
    steward: &Steward,
    account: &str,
    from: PimFrom<'_>,
) -> Result<(CalendarReport, Vec<SourceError>), IndexCalendarsError> {
    use crate::calendar::sync::{sync_caldav, sync_ics_file, sync_vdir};
    check_account(steward, true, account, from)?;
    let store = steward.calendar_store()?;
    let zone = steward.calendar_settings().zone;
    Ok(match from {
        PimFrom::Vdir(root) => sync_vdir(store, account, root, zone),
        PimFrom::File(file) => sync_ics_file(store, account, file, zone),
        PimFrom::Dav(client) => sync_caldav(store, account, client, zone),
        PimFrom::Launcher(feed) => {
            crate::launcher::sync_launcher_calendars(store, account, feed, zone)
        }
    }?)
}

/// What indexing an address book source did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BooksIndexed {
    /// What changed in `contacts.db`.
    pub report: ContactsReport,
    /// Books left unread because their version has not changed.
    pub unchanged: Vec<String>,
    /// What could not be read (each book with one keeps its stored cards).
    pub errors: Vec<SourceError>,
}

/// Why an address book source changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum IndexBooksError {
    /// The vdir root could not be listed.
    #[error("{}: {source}", path.display())]
    Unreadable {
        /// The root.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No book could be read whole.
    #[error(transparent)]
    NothingRead(#[from] NothingRead),
    /// The contacts store refused.
    #[error(transparent)]
    Store(#[from] ContactStoreError),
    /// The account belongs to another configured source.
    #[error(transparent)]
    Taken(#[from] AccountTaken),
}

impl StewardError for IndexBooksError {
    fn code(&self) -> &'static str {
        match self {
            Self::Unreadable { .. } => "CONTACTS_SOURCE_UNREADABLE",
            Self::NothingRead(e) => e.code(),
            Self::Store(e) => e.code(),
            Self::Taken(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Unreadable { .. } => ErrorKind::NotFound,
            Self::NothingRead(e) => e.kind(),
            Self::Store(e) => e.kind(),
            Self::Taken(e) => e.kind(),
        }
    }
}

/// Indexes the address books of `from` into `contacts.db` under `account` (phones without a
/// country code read in `region`). Books whose version is unchanged are not read again; a
/// source none of whose books could be read changes nothing and says why. Refused when a
/// configured source of another place owns `account`.
pub fn index_books(
    steward: &Steward,
    account: &str,
    from: PimFrom<'_>,
    region: Option<Region>,
) -> Result<BooksIndexed, IndexBooksError> {
    check_account(steward, false, account, from)?;
    let read: BooksRead = match from {
        PimFrom::Vdir(root) => crate::contacts::read_vdir(root, region)
            .map_err(|source| IndexBooksError::Unreadable { path: root.to_owned(), source })?,
        PimFrom::File(file) => crate::contacts::read_vcf_file(file, region),
        PimFrom::Dav(client) => {
            let versions = steward.contact_book_versions(account)?;
            crate::contacts::read_carddav(client, region, &versions)
        }
        PimFrom::Launcher(feed) => {
            let versions = steward.contact_book_versions(account)?;
            crate::launcher::read_launcher_books(feed, region, &versions)
        }
    };
    let unchanged = read.unchanged.clone();
    let (account_read, errors) = read.into_account_read()?;
    let report = steward.index_contacts(account, account_read)?;
    Ok(BooksIndexed { report, unchanged, errors })
}

/// A configured calendar source.
#[derive(Debug, Clone)]
pub struct CalendarSourceConfig {
    /// How status calls it.
    pub name: String,
    /// Its account in `calendar.db`.
    pub account: String,
    /// What and where it is (a file is one `.ics`).
    pub kind: PimPlace,
}

fn fail(e: &impl StewardError) -> (String, String) {
    (e.code().to_owned(), e.to_string())
}

/// Runs `f` with where `place` is read from now (a DAV account signs in first).
fn with_place<T>(
    place: &PimPlace,
    f: impl FnOnce(PimFrom<'_>) -> Result<T, (String, String)>,
) -> Result<T, (String, String)> {
    match place {
        PimPlace::Vdir(p) => f(PimFrom::Vdir(p)),
        PimPlace::File(p) => f(PimFrom::File(p)),
        PimPlace::Dav(account) => f(PimFrom::Dav(&DavClient::new(account).map_err(|e| fail(&e))?)),
    }
}

impl PimSource for CalendarSourceConfig {
    fn name(&self) -> &str {
        &self.name
    }

    fn sync(&self, steward: &Steward) -> Result<PimSummary, (String, String)> {
        let (report, errors) = with_place(&self.kind, |from| {
            index_calendars(steward, &self.account, from).map_err(|e| fail(&e))
        })?;
        Ok(PimSummary {
            changed: report.added + report.changed + report.removed,
            errors: errors.len(),
            detail: json!({
                "report": report,
                "errors": errors.iter().take(MAX_LISTED_ERRORS).collect::<Vec<_>>(),
            }),
        })
    }
}

/// A configured address book source.
#[derive(Debug, Clone)]
pub struct BookSourceConfig {
    /// How status calls it.
    pub name: String,
    /// Its account in `contacts.db`.
    pub account: String,
    /// What and where it is (a file is one `.vcf` of many cards).
    pub kind: PimPlace,
    /// The region for phones without a country code.
    pub region: Option<Region>,
}

impl PimSource for BookSourceConfig {
    fn name(&self) -> &str {
        &self.name
    }

    fn sync(&self, steward: &Steward) -> Result<PimSummary, (String, String)> {
        // Nothing read whole: stored cards stay; the run says why.
        let done = with_place(&self.kind, |from| {
            index_books(steward, &self.account, from, self.region).map_err(|e| fail(&e))
        })?;
        let r = &done.report;
        Ok(PimSummary {
            changed: r.added + r.changed + r.removed,
            errors: done.errors.len(),
            detail: json!({
                "report": r,
                "unchanged": done.unchanged,
                "errors": done.errors.iter().take(MAX_LISTED_ERRORS).collect::<Vec<_>>(),
            }),
        })
    }
}
