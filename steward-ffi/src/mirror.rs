//! Records mirroring the core's mirror summaries.

/// What one sync did (see `steward_core::mirror::SyncSummary`).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct SyncSummary {
    /// The account synced.
    pub account: String,
    /// `backfill` or `reconcile`.
    pub mode: String,
    /// Files found.
    pub files_scanned: u64,
    /// New messages.
    pub added: u64,
    /// Messages whose content or flags changed.
    pub updated: u64,
    /// New copies of known messages.
    pub copies: u64,
    /// Paths that vanished.
    pub paths_removed: u64,
    /// Messages soft-deleted.
    pub soft_deleted: u64,
    /// Files that failed.
    pub error_count: u64,
    /// Threads of the account.
    pub threads: u64,
}

impl From<steward_core::mirror::SyncSummary> for SyncSummary {
    fn from(s: steward_core::mirror::SyncSummary) -> Self {
        Self {
            account: s.account,
            mode: match s.mode {
                steward_core::mirror::SyncMode::Backfill => "backfill",
                steward_core::mirror::SyncMode::Reconcile => "reconcile",
            }
            .to_owned(),
            files_scanned: s.files_scanned,
            added: s.added,
            updated: s.updated,
            copies: s.copies,
            paths_removed: s.paths_removed,
            soft_deleted: s.soft_deleted,
            error_count: s.error_count,
            threads: s.threads,
        }
    }
}

/// Mirror counts (see `steward_core::mirror::MirrorStats`).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MirrorStats {
    /// Live messages.
    pub messages_live: u64,
    /// Soft-deleted messages.
    pub messages_deleted: u64,
    /// Files whose last ingest failed.
    pub error_count: u64,
}

impl From<steward_core::mirror::MirrorStats> for MirrorStats {
    fn from(s: steward_core::mirror::MirrorStats) -> Self {
        Self {
            messages_live: s.messages_live,
            messages_deleted: s.messages_deleted,
            error_count: s.error_count,
        }
    }
}
