//! The calendars and address books the runner's `pim-sync` job keeps current, from
//! `config.toml`:
//!
//! ```toml
//! [[calendar.sources]]
//! kind = "vdir"              # vdir (a folder of calendars) or ics (one file)
//! path = "~/.calendars"
//! account = "personal"       # optional: "local"
//!
//! [contacts]
//! region = "IT"              # optional: phones written without a country code
//!
//! [[contacts.sources]]
//! kind = "vdir"              # vdir (a folder of address books) or vcf (one file)
//! path = "~/.contacts"
//! account = "personal"       # optional: "local"
//! ```

use std::path::PathBuf;

use serde_json::json;
use steward_core::{
    Steward, StewardError,
    runner::{PimSource, PimSummary},
};

/// Most per-item errors a sync's detail lists.
/// Fixed (not a setting).
const MAX_LISTED_ERRORS: usize = 20;

/// What a calendar source is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CalendarKind {
    /// A vdir root.
    Vdir,
    /// One `.ics` file.
    Ics,
}

/// A configured calendar source.
#[derive(Debug, Clone)]
pub struct CalendarSourceConfig {
    /// How status calls it.
    pub name: String,
    /// Its account in `calendar.db`.
    pub account: String,
    /// Where it is.
    pub path: PathBuf,
    /// What it is.
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
        let (report, errors) = match self.kind {
            CalendarKind::Vdir => {
                crate::calendar::sync::sync_vdir(store, &self.account, &self.path, zone)
            }
            CalendarKind::Ics => {
                crate::calendar::sync::sync_ics_file(store, &self.account, &self.path, zone)
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

/// What an address book source is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BookKind {
    /// A vdir root.
    Vdir,
    /// One `.vcf` file.
    Vcf,
}

/// A configured address book source.
#[derive(Debug, Clone)]
pub struct BookSourceConfig {
    /// How status calls it.
    pub name: String,
    /// Its account in `contacts.db`.
    pub account: String,
    /// Where it is.
    pub path: PathBuf,
    /// What it is.
    pub kind: BookKind,
    /// The region for phones without a country code.
    pub region: Option<crate::contacts::phone::Region>,
}

impl PimSource for BookSourceConfig {
    fn name(&self) -> &str {
        &self.name
    }

    fn sync(&self, steward: &Steward) -> Result<PimSummary, (String, String)> {
        let read = match self.kind {
            BookKind::Vdir => crate::contacts::read_vdir(&self.path, self.region).map_err(|e| {
                ("CONTACTS_SOURCE_UNREADABLE".to_owned(), format!("{}: {e}", self.path.display()))
            })?,
            BookKind::Vcf => crate::contacts::read_vcf_file(&self.path, self.region),
        };
        // Nothing read whole: stored cards stay; the run says why.
        let (account_read, errors) = read.into_account_read().map_err(|e| fail(&e))?;
        let report = steward.index_contacts(&self.account, account_read).map_err(|e| fail(&e))?;
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
