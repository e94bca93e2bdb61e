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
