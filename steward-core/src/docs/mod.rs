//! Documents under the file roots: turned into text by an [`Extractor`] (the formats live in
//! `steward-connectors`), normalized here ([`normalize`]), cached by fingerprint in `docs.db`
//! ([`cache`]), read in bounded windows with cursors and searched inside ([`read`]).
//!
//! A document's text is data, never instructions: it reaches a model only as a tool result.
//!
//! Extraction runs on a worker thread with a time limit; a panic in a parser is contained and
//! becomes [`ExtractError::Panicked`]. A worker that overruns its time is abandoned (a thread
//! cannot be stopped) and counted: while [`MAX_ABANDONED_WORKERS`] still run, new extractions
//! are refused with [`ExtractError::Busy`] rather than piling threads up.

pub mod cache;
pub mod index;
pub mod normalize;
pub mod read;
pub mod semantic;

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use serde::{Deserialize, Serialize};

use crate::error::{ErrorKind, StewardError};

pub use cache::DocCache;
pub use index::{
    DocsEmbedReport, DocsHit, DocsHits, DocsIndexProgress, DocsIndexReport, SharedFoldersReport,
};
pub use read::{DocError, DocHit, DocHits, DocInfo, DocWindow};
pub use semantic::{SemanticReport, SemanticStatus};

/// Characters a read returns when the question does not say.
/// Fixed (not a setting).
pub const DEFAULT_READ_CHARS: usize = 6_000;
/// Most characters one read returns.
/// Fixed (not a setting).
pub const MAX_READ_CHARS: usize = 12_000;
/// Fewest characters one read may ask for.
/// Fixed (not a setting).
pub const MIN_READ_CHARS: usize = 200;
/// Characters of one search chunk.
/// Fixed (not a setting).
pub const CHUNK_CHARS: usize = 1_800;
/// Characters two neighbouring chunks share.
/// Fixed (not a setting).
pub const CHUNK_OVERLAP: usize = 200;
/// Most hits one search inside a document returns.
/// Fixed (not a setting).
pub const MAX_DOC_HITS: usize = 10;
/// Hits a search inside a document returns when the question does not say.
/// Fixed (not a setting).
pub const DEFAULT_DOC_HITS: usize = 5;
/// Characters of a hit's snippet.
/// Fixed (not a setting).
pub const SNIPPET_CHARS: usize = 300;
/// Longest search question, characters.
/// Fixed (not a setting).
pub const MAX_QUERY_CHARS: usize = 512;
/// Extraction workers that overran their time and still run, at most; more extractions are
/// refused ([`ExtractError::Busy`]) while that many run (one that never ends keeps its place
/// until the process restarts).
/// Fixed (not a setting).
pub const MAX_ABANDONED_WORKERS: usize = 2;
/// Stack of an extraction worker, bytes (parsers recurse on nested structures).
/// Fixed (not a setting).
pub const WORKER_STACK_BYTES: usize = 16 * 1024 * 1024;

/// What kind of document a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DocKind {
    /// PDF (its text layer, page by page).
    Pdf,
    /// Word (OOXML).
    Docx,
    /// PowerPoint (OOXML), slide by slide.
    Pptx,
    /// Excel (OOXML), sheet by sheet.
    Xlsx,
    /// OpenDocument text.
    Odt,
    /// OpenDocument spreadsheet, sheet by sheet.
    Ods,
    /// OpenDocument presentation, slide by slide.
    Odp,
    /// HTML.
    Html,
    /// Markdown.
    Markdown,
    /// Rich Text Format.
    Rtf,
    /// Plain text in any encoding.
    Text,
    /// A mail message (RFC 5322).
    Eml,
}

impl DocKind {
    /// The unit a reader moves through.
    pub fn unit(self) -> UnitKind {
        match self {
            Self::Pdf => UnitKind::Page,
            Self::Pptx | Self::Odp => UnitKind::Slide,
            Self::Xlsx | Self::Ods => UnitKind::Sheet,
            _ => UnitKind::Part,
        }
    }

    /// Its name as written in answers (`pdf`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pdf => "pdf",
            Self::Docx => "docx",
            Self::Pptx => "pptx",
            Self::Xlsx => "xlsx",
            Self::Odt => "odt",
            Self::Ods => "ods",
            Self::Odp => "odp",
            Self::Html => "html",
            Self::Markdown => "markdown",
            Self::Rtf => "rtf",
            Self::Text => "text",
            Self::Eml => "eml",
        }
    }

    /// The kind named `s` (as [`Self::as_str`] writes it).
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Pdf,
            Self::Docx,
            Self::Pptx,
            Self::Xlsx,
            Self::Odt,
            Self::Ods,
            Self::Odp,
            Self::Html,
            Self::Markdown,
            Self::Rtf,
            Self::Text,
            Self::Eml,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// What a reader moves through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UnitKind {
    /// Pages (PDF).
    Page,
    /// Slides.
    Slide,
    /// Sheets (named).
    Sheet,
    /// The document is one flowing text (or a few parts, such as a mail's body).
    Part,
}

impl UnitKind {
    /// Its name in a window's markers (`page`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Page => "page",
            Self::Slide => "slide",
            Self::Sheet => "sheet",
            Self::Part => "part",
        }
    }
}

/// One page, slide, sheet or part of a document's text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unit {
    /// Its name, when it has one (a sheet's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its text.
    pub text: String,
}

/// A document's text as an extractor found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extracted {
    /// What it is.
    pub kind: DocKind,
    /// Its title, when the file names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its pages, slides, sheets or parts, in order.
    pub units: Vec<Unit>,
    /// Whether the text stopped at [`ExtractLimits::max_chars`] or a unit bound.
    #[serde(default)]
    pub truncated: bool,
}

impl Extracted {
    /// Characters of text in all.
    pub fn chars(&self) -> usize {
        self.units.iter().map(|u| u.text.chars().count()).sum()
    }

    /// Whether any unit holds text (a scanned PDF has pages and no text layer).
    pub fn has_text(&self) -> bool {
        self.units.iter().any(|u| u.text.chars().any(|c| !c.is_whitespace()))
    }
}

/// The bounds one extraction runs within.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractLimits {
    /// Largest file read, bytes.
    pub max_bytes: u64,
    /// Longest the caller waits for an extraction (the worker is then abandoned, see the
    /// module's notes: a thread cannot be stopped).
    pub timeout: Duration,
    /// Most bytes of text (UTF-8, as the readers produce it, before normalization) kept; more
    /// is cut and marked truncated.
    pub max_chars: usize,
    /// Most pages, slides or sheets kept.
    pub max_units: usize,
    /// Most entries an archive (DOCX, XLSX, ODF…) may hold.
    pub max_archive_entries: usize,
    /// Most bytes an archive's entries may decompress to, together, and all reads of its
    /// parts together.
    pub max_unpacked_bytes: u64,
    /// Most cells a spreadsheet may declare.
    pub max_cells: u64,
}

impl ExtractLimits {
    /// The bounds of `limits`.
    pub fn of(limits: &crate::Limits) -> Self {
        Self {
            max_bytes: limits.max_document_bytes,
            timeout: Duration::from_secs(limits.docs_extract_secs),
            max_chars: limits.max_document_chars,
            max_units: MAX_UNITS,
            max_archive_entries: MAX_ARCHIVE_ENTRIES,
            max_unpacked_bytes: limits.max_document_bytes.saturating_mul(4),
            max_cells: MAX_CELLS,
        }
    }
}

impl Default for ExtractLimits {
    fn default() -> Self {
        Self::of(&crate::Limits::default())
    }
}

/// Longest title kept, characters.
/// Fixed (not a setting).
pub const MAX_TITLE_CHARS: usize = 300;
/// Longest sheet name kept, characters (a window's marker must leave room for text).
/// Fixed (not a setting).
pub const MAX_NAME_CHARS: usize = 100;
/// Most distinct words of a search question used.
/// Fixed (not a setting).
pub const MAX_QUERY_TERMS: usize = 32;
/// The version of the readers' output: cached extractions of another version are read again.
/// Fixed (not a setting).
pub const READER_VERSION: u32 = 1;

/// Most pages, slides or sheets kept of one document.
/// Fixed (not a setting).
pub const MAX_UNITS: usize = 20_000;
/// Most entries an archive-based document may hold.
/// Fixed (not a setting).
pub const MAX_ARCHIVE_ENTRIES: usize = 10_000;
/// Most cells a spreadsheet may declare (a 1 KB ODS can declare 10^18).
/// Fixed (not a setting).
pub const MAX_CELLS: u64 = 10_000_000;

/// Why a file gave no text. Every one is about that file alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExtractError {
    /// Not a kind of document Steward reads.
    #[error("not a document Steward reads: {0}")]
    Unsupported(String),
    /// The file is damaged or not what its name says.
    #[error("damaged or unreadable {kind}: {reason}")]
    Damaged {
        /// The kind it claimed to be.
        kind: String,
        /// What the parser said.
        reason: String,
    },
    /// The file needs a password.
    #[error("the {0} is encrypted and needs a password")]
    Encrypted(String),
    /// The file is built to exhaust a reader (a zip bomb, an entity bomb, a huge grid).
    #[error("refused: {0}")]
    Hostile(String),
    /// The file is larger than the bound.
    #[error("{what} is larger than {limit} (a bound)")]
    TooLarge {
        /// What.
        what: String,
        /// The bound.
        limit: String,
    },
    /// The extraction took longer than the bound.
    #[error("reading the document took longer than {secs} s (a bound)")]
    TimedOut {
        /// The bound.
        secs: u64,
    },
    /// Too many extractions overran their time and still run.
    #[error("too many document readers are still busy: try again shortly")]
    Busy,
    /// The parser failed unexpectedly (contained; the file is the cause).
    #[error("the {kind} reader failed on this file: {reason}")]
    Panicked {
        /// The kind.
        kind: String,
        /// What it said.
        reason: String,
    },
}

impl ExtractError {
    /// A damaged `kind`.
    pub fn damaged(kind: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        Self::Damaged { kind: kind.into(), reason: reason.to_string() }
    }
}

impl StewardError for ExtractError {
    fn code(&self) -> &'static str {
        match self {
            Self::Unsupported(_) => "DOCS_UNSUPPORTED",
            Self::Damaged { .. } => "DOCS_DAMAGED",
            Self::Encrypted(_) => "DOCS_ENCRYPTED",
            Self::Hostile(_) => "DOCS_HOSTILE",
            Self::TooLarge { .. } => "DOCS_TOO_LARGE",
            Self::TimedOut { .. } => "DOCS_TIMED_OUT",
            Self::Busy => "DOCS_BUSY",
            Self::Panicked { .. } => "DOCS_READER_FAILED",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::TimedOut { .. } | Self::Busy => ErrorKind::Unavailable,
            _ => ErrorKind::InvalidInput,
        }
    }
}

/// Turns a file's bytes into text. Implementations read only the bytes given (never the
/// path, which names the file for its extension and messages), follow no reference out of
/// the file (no external entity, no linked file, no URL) and keep to the limits.
pub trait Extractor: Send + Sync + std::fmt::Debug {
    /// The text of `bytes`, the content of the file at `path`.
    fn extract(
        &self,
        path: &Path,
        bytes: &[u8],
        limits: &ExtractLimits,
    ) -> Result<Extracted, ExtractError>;
}

/// Workers that overran their time and have not ended yet.
static ABANDONED: AtomicUsize = AtomicUsize::new(0);

/// Runs `extractor` on `bytes` on a worker thread within `limits.timeout`; a panic is
/// contained. See the module's notes on abandoned workers.
pub fn extract_bounded(
    extractor: &Arc<dyn Extractor>,
    path: &Path,
    bytes: Arc<[u8]>,
    limits: &ExtractLimits,
) -> Result<Extracted, ExtractError> {
    if ABANDONED.load(Ordering::SeqCst) >= MAX_ABANDONED_WORKERS {
        return Err(ExtractError::Busy);
    }
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let (e, p, l) = (Arc::clone(extractor), path.to_path_buf(), limits.clone());
    // Whether the caller stopped waiting; the worker and the caller decide under this lock,
    // so a worker is counted out exactly when it was counted in.
    let abandoned = Arc::new(std::sync::Mutex::new(false));
    let worker_abandoned = Arc::clone(&abandoned);
    std::thread::Builder::new()
        .name("steward-extract".to_owned())
        .stack_size(WORKER_STACK_BYTES)
        .spawn(move || {
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                e.extract(&p, &bytes, &l)
            }));
            let out = out.unwrap_or_else(|panic| {
                let reason = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_owned());
                let kind = p
                    .extension()
                    .map_or_else(|| "document".to_owned(), |x| x.to_string_lossy().to_lowercase());
                Err(ExtractError::Panicked { kind, reason })
            });
            let gone = worker_abandoned.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if *gone {
                ABANDONED.fetch_sub(1, Ordering::SeqCst);
            } else {
                // The channel holds one answer: this never blocks.
                let _ = tx.send(out);
            }
        })
        // No thread to be had is about the moment, not the file (and is not cached).
        .map_err(|_| ExtractError::Busy)?;
    match rx.recv_timeout(limits.timeout) {
        Ok(out) => out,
        // The worker ended without an answer (it cannot: it catches panics); not counted.
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(ExtractError::Panicked {
            kind: "document".into(),
            reason: "the reader ended without an answer".into(),
        }),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            let mut gone = abandoned.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // The worker may have answered between the timeout and the lock: that answer counts.
            if let Ok(out) = rx.try_recv() {
                return out;
            }
            *gone = true;
            ABANDONED.fetch_add(1, Ordering::SeqCst);
            Err(ExtractError::TimedOut { secs: limits.timeout.as_secs() })
        }
    }
}
