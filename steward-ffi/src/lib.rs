//! # steward-ffi
//!
//! UniFFI (proc-macro) bindings over `steward-core` for the macOS launcher. Every item here is a
//! thin wrapper: an object holds the core type in `inner`, methods are one call plus a
//! conversion, and errors cross as one enum carrying `{ kind, code, message }`, mapped in one
//! place ([`FfiError`]).

uniffi::setup_scaffolding!();

mod authority;
mod background;
mod backup;
mod chat;
mod docs;
mod error;
mod live;
mod memory;
mod mirror;
mod pim;
mod runtime;
mod search;
mod states;
mod steward;
mod system;
mod watches;

pub use authority::{ApprovalCard, AuditEntry, Human, OperationDetail, OperationSummary};
pub use background::{BackgroundRunner, JobOutcome, JobRun, JobState};
pub use backup::{
    BackupOmitted, BackupStore, BackupSummary, RestoreSummary, backup_restore, backup_verify,
};
pub use chat::{
    ChatAgent, ChatInfo, MAX_TURN_WAIT_SECS, TurnEventInfo, TurnHandle, TurnListener, TurnOutcome,
};
pub use error::FfiError;
pub use live::{LiveEvent, LiveListener, LiveSnapshot, TaskHandle};
pub use memory::{
    MemoryForgetReceipt, MemoryForgotten, MemoryFound, MemoryKept, MemoryNote, MemoryProposal,
    MemorySourceRef,
};
pub use mirror::{EmbedReport, MirrorStats, SyncSummary};
pub use pim::{
    AgendaOccurrence, CalendarIndexReport, ContactsIndexReport, EventFound, FreeBusyReport,
    LauncherPim, Person, PimCollection, PimItem, PimProblem, PimTag, RecipientCandidate,
    RecipientResolution, TimeSpan,
};
pub use runtime::MAX_BLOCKING_CALLS;
pub use search::{SearchHit, SearchQuery, SearchResults};
pub use states::{
    ApprovalLevel, ApprovalState, DeliveryResult, OperationState, WatchEventStatus, WatchStatus,
};
pub use steward::{Steward, StewardBuilder, SyncListener};
pub use system::{AgentUsage, StatusItem, SystemStatus, UsageGroup, UsageReport};
pub use watches::{PollSummary, WatchEventInfo, WatchInfo, WatchProposalInfo};

/// The version of the Steward library.
#[uniffi::export]
pub fn steward_version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}
