//! # steward-connectors
//!
//! Real sources and sinks behind the traits `steward-core` defines. Today: mail stores on disk
//! ([`mail::MaildirSource`], [`mail::MboxSource`], [`mail::EmlxSource`]) implementing
//! [`steward_core::mirror::MailSource`], a file-system watcher that triggers reconciles, and a
//! deterministic demo mailbox generator; watch sources ([`watches`]); the document readers
//! ([`docs::Readers`]).
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod calendar;
pub mod contacts;
pub mod dav;
pub mod docs;
pub mod files;
pub mod home;
pub mod launcher;
pub mod mail;
pub mod mcp;
pub mod pim;
#[cfg(feature = "testing")]
pub mod testing;
pub mod trains;
pub mod watches;

/// A file of a calendar or address book source that could not be read, or one entry of it
/// (an event, a card): reported, never stopping the rest.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SourceError {
    /// The file, or the item's URL (CalDAV, CardDAV).
    pub path: std::path::PathBuf,
    /// The entry's UID, when the error is one entry's.
    pub uid: Option<String>,
    /// A stable code.
    pub code: &'static str,
    /// What was wrong.
    pub message: String,
}

/// The collection directories of the vdir `root`, by name (hidden ones skipped), at most `max`:
/// a root that itself holds items (files ending in `.ext`, any case) is one collection, as
/// khal, khard and vdirsyncer read it.
pub(crate) fn vdir_collections(
    root: &std::path::Path,
    ext: &str,
    max: usize,
) -> Result<Vec<std::path::PathBuf>, std::io::Error> {
    let mut dirs: Vec<std::path::PathBuf> = std::fs::read_dir(root)?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    let item = |p: &std::path::Path| p.extension().is_some_and(|x| x.eq_ignore_ascii_case(ext));
    if std::fs::read_dir(root)?.filter_map(Result::ok).any(|e| item(&e.path())) {
        dirs = vec![root.to_path_buf()];
    }
    dirs.truncate(max);
    Ok(dirs)
}
