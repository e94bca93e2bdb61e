//! The mail mirror (`mirror.db` + `blobs/`): the normalized local record of a person's mail.
//!
//! Owns: accounts, mailboxes and their roles, one logical row per message (keyed by RFC
//! Message-ID, else a deterministic surrogate), every physical copy of it (`message_paths`), soft
//! deletes, body completeness, threads, attachments in a content-addressed blob store, and the
//! sync engine that converges the mirror with a [`MailSource`].
//!
//! Never does: parse a file format (connectors do, behind [`MailSource`]), talk to a network, or
//! hold authority over anything — the mirror is rebuildable from its sources at any time.
//!
//! Thread resolution, in descending order of confidence:
//! 1. existing identity — a re-ingested message keeps its thread;
//! 2. Gmail thread id (`X-GM-THRID`);
//! 3. the RFC reply graph — In-Reply-To, then References nearest-first, to a stored message; a
//!    parent that arrives after its children joins (and merges) their threads;
//! 4. normalized subject plus at least one shared participant within ±14 days;
//! 5. otherwise a new thread.
//!
//! Crash safety: each batch of files is applied in one transaction together with the
//! `source_files` rows that mark them done, so a crash anywhere leaves a prefix of the work
//! committed and the next run continues from there (proved by `tests/crash.rs` in steward-server).
//!
//! Bounds: batch size, parser threads, message/header/body sizes, addresses, references,
//! attachments and thread participants all come from [`crate::Limits`].

mod blobs;
mod feed;
pub mod model;
mod people;
pub mod read;
mod role;
mod stats;
mod subject;
mod sync;
mod writer;

use std::path::{Path, PathBuf};

pub use blobs::hex;
pub use feed::{ChangeSink, IndexFeedError, IndexableMessage, RunProgress};
pub use model::{
    Address, BodyState, FileError, Flags, MailSource, MailboxRef, MailboxRole, ParseLimits,
    ParsedAttachment, ParsedMessage, SourceError, SourceFile,
};
pub use people::DEFAULT_MAX_CORRESPONDENTS;
pub use read::{
    AttachmentInfo, BodyText, BodyWindow, MessageRead, ReadError, ThreadEntry, ThreadPage,
};
pub use role::classify_mailbox;
pub use stats::{FileErrorRecord, MirrorStats};
pub use subject::normalize_subject;
pub use sync::{Progress, ProgressPhase, SyncMode, SyncOptions, SyncSummary};
pub use writer::normalize_message_id;

use crate::{
    Limits,
    error::{ErrorKind, StewardError},
    store::{Database, Migration, OpenOptions, Schema, StoreError},
};

/// The migrations of `mirror.db`.
pub const SCHEMA: Schema = Schema {
    name: "mirror",
    migrations: &[
        Migration {
            version: 1,
            name: "init",
            sql: include_str!("../../migrations/mirror/001_init.sql"),
        },
        Migration {
            version: 2,
            name: "sync_runs",
            sql: include_str!("../../migrations/mirror/002_sync_runs.sql"),
        },
        Migration {
            version: 3,
            name: "thread_activity",
            sql: include_str!("../../migrations/mirror/003_thread_activity.sql"),
        },
        Migration {
            version: 4,
            name: "size_order",
            sql: include_str!("../../migrations/mirror/004_size_order.sql"),
        },
        Migration {
            version: 5,
            name: "sync_progress",
            sql: include_str!("../../migrations/mirror/005_sync_progress.sql"),
        },
        Migration {
            version: 6,
            name: "bulk",
            sql: include_str!("../../migrations/mirror/006_bulk.sql"),
        },
    ],
};

/// Errors of the mirror.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MirrorError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The source could not be scanned.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The caller passed something unusable.
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// Which input.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// The blob directory could not be created.
    #[error("cannot use blob directory {path}: {reason}")]
    Blobs {
        /// The directory.
        path: PathBuf,
        /// The OS error text.
        reason: String,
    },
    /// The sync was cancelled by the caller; everything committed so far stays.
    #[error("sync cancelled")]
    Cancelled,
    /// A parser thread panicked (a bug in a parser); the batch was not applied.
    #[error("a parser thread failed: {0}")]
    ParserPanicked(String),
}

impl StewardError for MirrorError {
    fn code(&self) -> &'static str {
        match self {
            Self::Store(e) => e.code(),
            Self::Source(e) => e.code(),
            Self::InvalidInput { .. } => "MIRROR_INVALID_INPUT",
            Self::Blobs { .. } => "MIRROR_BLOBS_UNAVAILABLE",
            Self::Cancelled => "MIRROR_SYNC_CANCELLED",
            Self::ParserPanicked(_) => "MIRROR_PARSER_PANICKED",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Store(e) => e.kind(),
            Self::Source(e) => e.kind(),
            Self::InvalidInput { .. } => ErrorKind::InvalidInput,
            Self::Blobs { .. } => ErrorKind::Unavailable,
            Self::Cancelled => ErrorKind::Conflict,
            Self::ParserPanicked(_) => ErrorKind::Internal,
        }
    }
}

/// The mail mirror of one Steward home.
#[derive(Debug)]
pub struct Mirror {
    db: Database,
    blobs: blobs::BlobStore,
    limits: Limits,
}

impl Mirror {
    /// The database (for read paths in sibling modules such as search).
    pub(crate) fn db(&self) -> &Database {
        &self.db
    }

    /// Opens (creating and migrating) `mirror.db` and `blobs/` under `home`.
    pub(crate) fn open(home: &Path, limits: &Limits) -> Result<Self, MirrorError> {
        let blob_dir = home.join("blobs");
        std::fs::create_dir_all(&blob_dir)
            .map_err(|e| MirrorError::Blobs { path: blob_dir.clone(), reason: e.to_string() })?;
        let db =
            Database::open(&home.join("mirror.db"), &SCHEMA, OpenOptions::from_limits(limits))?;
        let mirror = Self { db, blobs: blobs::BlobStore::new(blob_dir), limits: limits.clone() };
        // A bulk load interrupted by a crash leaves its deferred indexes to rebuild.
        mirror.ensure_indexes()?;
        Ok(mirror)
    }

    /// The underlying database (for integrity checks and versions).
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Where attachment bytes live.
    pub fn blob_dir(&self) -> &Path {
        self.blobs.root()
    }

    /// The file holding the blob with this SHA-256 (hex), if it is stored.
    pub fn blob_path(&self, sha256_hex: &str) -> Option<PathBuf> {
        if sha256_hex.len() != 64 || !sha256_hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let p = self.blobs.path_of(&sha256_hex.to_ascii_lowercase());
        p.exists().then_some(p)
    }
}
