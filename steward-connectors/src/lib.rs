//! # steward-connectors
//!
//! Real sources and sinks behind the traits `steward-core` defines. Today: mail stores on disk
//! ([`mail::MaildirSource`], [`mail::MboxSource`], [`mail::EmlxSource`]) implementing
//! [`steward_core::mirror::MailSource`], a file-system watcher that triggers reconciles, and a
//! deterministic demo mailbox generator; watch sources ([`watches`]).
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod calendar;
pub mod contacts;
pub mod home;
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
    /// The file.
    pub path: std::path::PathBuf,
    /// The entry's UID, when the error is one entry's.
    pub uid: Option<String>,
    /// A stable code.
    pub code: &'static str,
    /// What was wrong.
    pub message: String,
}
