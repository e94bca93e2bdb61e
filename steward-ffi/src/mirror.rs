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

/// What one drain of the embedding queue did (see `steward_core::embed::EmbedReport`).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct EmbedReport {
    /// The model.
    pub model: String,
    /// The dimension the endpoint answered in (none when it could not be reached).
    pub dimension: Option<u32>,
    /// Live messages looked at.
    pub checked: u64,
    /// Already embedded from the same text with the same model.
    pub up_to_date: u64,
    /// Embedded now.
    pub embedded: u64,
    /// Charged a failure now (retried by later drains).
    pub failed: u64,
    /// Failed too often on this text and model; retried when the text changes.
    pub given_up: u64,
    /// Still to embed when the drain stopped.
    pub remaining: u64,
    /// Vectors dropped because the model or dimension changed.
    pub reset: u64,
    /// Why the endpoint stopped the drain, if it did.
    pub unavailable: Option<String>,
    /// The endpoint's Retry-After, when it rate limited.
    pub retry_after_secs: Option<u64>,
}

impl From<steward_core::embed::EmbedReport> for EmbedReport {
    fn from(r: steward_core::embed::EmbedReport) -> Self {
        Self {
            model: r.model,
            dimension: r.dimension.and_then(|d| u32::try_from(d).ok()),
            checked: r.checked,
            up_to_date: r.up_to_date,
            embedded: r.embedded,
            failed: r.failed,
            given_up: r.given_up,
            remaining: r.remaining,
            reset: r.reset,
            unavailable: r.unavailable,
            retry_after_secs: r.retry_after_secs,
        }
    }
}
