//! The person's files: the paths under the roots they chose (`[files] roots`), walked into
//! `files.db` and found by name, glob, extension, time and size, newest first.
//!
//! A walk follows no link (what a link points to inside a root is found under its own path),
//! never lists a secret or anything in the Steward home ([`crate::paths`]), reads no file's
//! content, and stops at [`MAX_INDEXED_FILES`] files and [`MAX_WALK_DEPTH`] levels. A root
//! that cannot be listed keeps what was stored for it; a walk that stopped early removes
//! nothing. Questions are answered from a copy kept in memory until a walk changes the list.

pub mod save;
pub mod store;

use std::path::PathBuf;

use serde::Serialize;

pub use save::{SaveError, SaveOutcome, SavePlan, SavedAttachment};
pub use store::{FileStore, FileStoreError};

/// Most files one walk lists, over every root.
/// Fixed (not a setting).
pub const MAX_INDEXED_FILES: usize = 1_000_000;
/// Deepest folder a walk enters, below its root.
/// Fixed (not a setting).
pub const MAX_WALK_DEPTH: usize = 64;
/// Most files one answer lists.
/// Fixed (not a setting).
pub const MAX_FIND_RESULTS: usize = 200;
/// Files an answer lists when the question does not say.
/// Fixed (not a setting).
pub const DEFAULT_FIND_RESULTS: usize = 50;
/// Longest name or glob asked for, characters.
/// Fixed (not a setting).
pub const MAX_PATTERN_CHARS: usize = 256;

/// What to find. Every given condition must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileQuery {
    /// Words the file name holds (case and width folded), in any order.
    pub name: Option<String>,
    /// A glob on the path below its root (`*` within a folder, `**` across folders, `?` one
    /// character); without `/` it matches the file name.
    pub glob: Option<String>,
    /// The extension (`pdf`, `.PDF`).
    pub extension: Option<String>,
    /// Modified at or after (Unix seconds).
    pub modified_after: Option<i64>,
    /// Modified before (Unix seconds).
    pub modified_before: Option<i64>,
    /// At least this many bytes.
    pub min_size: Option<u64>,
    /// At most this many bytes.
    pub max_size: Option<u64>,
    /// Only under this root (one of the configured ones, as written or resolved).
    pub root: Option<PathBuf>,
    /// Where the last page stopped.
    pub cursor: Option<String>,
    /// How many (1 to [`MAX_FIND_RESULTS`]; default [`DEFAULT_FIND_RESULTS`]).
    pub limit: Option<usize>,
}

/// One file found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct FoundFile {
    /// Its path (canonical).
    pub path: PathBuf,
    /// The root it lies under.
    pub root: PathBuf,
    /// Its size, bytes.
    pub size: u64,
    /// When it was last modified (Unix seconds).
    pub modified: i64,
}

/// One page of files, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct FilePage {
    /// The files.
    pub files: Vec<FoundFile>,
    /// How many match in all.
    pub total: usize,
    /// The cursor of the next page, if there is one.
    pub next_cursor: Option<String>,
}

/// What one walk of the roots changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct FilesReport {
    /// Roots walked whole.
    pub roots: usize,
    /// Files listed now.
    pub files: usize,
    /// New since the last walk.
    pub added: usize,
    /// Changed (size or time).
    pub changed: usize,
    /// Gone.
    pub removed: usize,
    /// Roots that could not be listed (kept as stored), and why.
    pub unreadable: Vec<String>,
    /// Whether the walk stopped at a bound ([`MAX_INDEXED_FILES`]): nothing was removed then.
    pub truncated: bool,
}
