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

use std::path::PathBuf;

use serde_json::json;

use crate::dav::{DavAccount, DavClient};
use steward_core::{
    Steward, StewardError,
    runner::{PimSource, PimSummary},
};

/// Most per-item errors a sync's detail lists.
/// Fixed (not a setting).
const MAX_LISTED_ERRORS: usize = 20;

/// What a calendar source is, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CalendarKind {
    /// A vdir root.
    Vdir(PathBuf),
    /// One `.ics` file.
    Ics(PathBuf),
    /// A CalDAV account.
    CalDav(DavAccount),
}

/// A configured calendar source.
#[derive(Debug, Clone)]
pub struct CalendarSourceConfig {
    /// How status calls it.
    pub name: String,
    /// Its account in `calendar.db`.
    pub account: String,
    /// What and where it is.
    pub kind: CalendarKind,
}

fn fail(e: &impl StewardError) -> (String, String) {
    (e.code().to_owned(), e.to_string())
}

impl PimSource for CalendarSourceConfig {
    fn name(&self) -> &str {
        &self.name
    }

    fn sync(&self, steward: &Steward) -> Result<PimSummary, (String, String)> {
        let store = steward.calendar_store().map_err(|e| fail(&e))?;
        let zone = steward.calendar_settings().zone;
        let (report, errors) = match &self.kind {
            CalendarKind::Vdir(path) => {
                crate::calendar::sync::sync_vdir(store, &self.account, path, zone)
            }
            CalendarKind::Ics(path) => {
                crate::calendar::sync::sync_ics_file(store, &self.account, path, zone)
            }
            CalendarKind::CalDav(dav) => {
                let client = DavClient::new(dav).map_err(|e| fail(&e))?;
                crate::calendar::sync::sync_caldav(store, &self.account, &client, zone)
            }
        }
        .map_err(|e| fail(&e))?;
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

/// What an address book source is, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BookKind {
    /// A vdir root.
    Vdir(PathBuf),
    /// One `.vcf` file.
    Vcf(PathBuf),
    /// A CardDAV account.
    CardDav(DavAccount),
}

/// A configured address book source.
#[derive(Debug, Clone)]
pub struct BookSourceConfig {
    /// How status calls it.
    pub name: String,
    /// Its account in `contacts.db`.
    pub account: String,
    /// What and where it is.
    pub kind: BookKind,
    /// The region for phones without a country code.
    pub region: Option<crate::contacts::phone::Region>,
}

impl PimSource for BookSourceConfig {
    fn name(&self) -> &str {
        &self.name
    }

    fn sync(&self, steward: &Steward) -> Result<PimSummary, (String, String)> {
        let read = match &self.kind {
            BookKind::Vdir(path) => crate::contacts::read_vdir(path, self.region).map_err(|e| {
                ("CONTACTS_SOURCE_UNREADABLE".to_owned(), format!("{}: {e}", path.display()))
            })?,
            BookKind::Vcf(path) => crate::contacts::read_vcf_file(path, self.region),
            BookKind::CardDav(dav) => {
                let client = DavClient::new(dav).map_err(|e| fail(&e))?;
                let versions =
                    steward.contact_book_versions(&self.account).map_err(|e| fail(&e))?;
                crate::contacts::read_carddav(&client, self.region, &versions)
            }
        };
        // Nothing read whole: stored cards stay; the run says why.
        let unchanged = read.unchanged.clone();
        let (account_read, errors) = read.into_account_read().map_err(|e| fail(&e))?;
        let report = steward.index_contacts(&self.account, account_read).map_err(|e| fail(&e))?;
        Ok(PimSummary {
            changed: report.added + report.changed + report.removed,
            errors: errors.len(),
            detail: json!({
                "report": report,
                "unchanged": unchanged,
                "errors": errors.iter().take(MAX_LISTED_ERRORS).collect::<Vec<_>>(),
            }),
        })
    }
}
