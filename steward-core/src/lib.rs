//! # steward-core
//!
//! The product: typed APIs over a person's local stores. Frontends (the `steward` command, the
//! HTTP server, the Swift and Python bindings) only translate types and errors.
//!
//! Open a [`Steward`] with [`Steward::builder`], then sync a [`mirror::MailSource`] (from
//! `steward-connectors`) into its [`mirror::Mirror`].
//!
//! Every error implements [`StewardError`]: a stable `code()` and a coarse [`ErrorKind`]. Every
//! bound is a named constant in [`limits`], gathered in [`Limits`] and passed at open time.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod access;
pub mod agent;
pub mod approval;
pub mod attachments;
pub mod audit;
mod authority;
pub mod backup;
pub mod calendar;
pub mod contacts;
pub mod docs;
pub mod embed;
pub mod error;
pub mod eval;
pub mod files;
pub mod index;
pub mod journal;
mod jsonl;
pub mod limits;
pub mod llm;
pub mod memory;
pub mod mirror;
pub mod net;
pub mod outbox;
pub mod paths;
pub mod policy;
pub mod protocol;
pub mod replay;
pub mod runner;
pub mod search;
pub mod shell;
pub mod state;
pub mod status;
mod steward;
pub mod store;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod time;
pub mod tools;
pub mod watch;

pub use authority::{
    POLICY_SET_TOOL, PolicyOverview, ToolCall, ToolRuleInput, ToolSummary, WATCH_GRANTS_TOOL,
    WatchProposal,
};
pub use error::{ErrorKind, StewardError};
pub use limits::Limits;
pub use steward::{
    AuditPage, ContactsQueryError, OpenError, RebuildReport, Steward, StewardBuilder, SyncError,
    default_home,
};
