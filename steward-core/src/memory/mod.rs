//! Memory a person can trust: markdown notes with provenance under `<home>/memory/`.
//!
//! - `notes/<slug>-<id>.md` are the accepted notes, the only ones recall reads. They are the
//!   truth: the index (`<home>/memory-index/`, BM25 and vectors) is derived from them by
//!   [`Steward::memory_reconcile`], which also picks up what a person changed in an editor
//!   (audited as theirs).
//! - `inbox/<id>.md` are proposals. The agent (`memory.propose`), the mail promotion and
//!   imports can only propose; accepting, editing or rejecting takes a person
//!   ([`HumanAuthority`]). Accepting a note that replaces another supersedes it: the old note
//!   keeps its file and history, with `valid_to` and `superseded_at` set.
//! - `tombstones.jsonl` keeps the hash of every rejected or forgotten fact (never its words):
//!   the same fact proposed again, from any source, is dropped and counted.
//!
//! [`Steward::memory_forget`] removes notes, their index rows and vectors and the proposals
//! derived from the same sources, writes tombstones and hands back a [`ForgetReceipt`].

mod import;
mod index;
pub mod note;
mod promote;
mod vectors;

pub use import::{
    ImportReport, MAX_IMPORT_DEPTH, MAX_IMPORT_FACTS_PER_FILE, MAX_IMPORT_FILE_BYTES,
    MAX_IMPORT_FILES,
};
pub(crate) use promote::PromotionStore;
pub use promote::{
    MAX_PROMOTION_ATTEMPTS, MAX_PROMOTION_FACTS, MAX_PROMOTION_MESSAGES, MAX_PROMOTION_THREADS,
    PROMOTER, PROMOTION_BACKOFF_SECS, PROMOTION_INPUT_CHARS, PROMOTION_MAX_TOKENS,
    PROMOTION_MESSAGE_CHARS, PROMOTION_WINDOW_DAYS, PromotionReport,
};
pub use vectors::{MEMORY_EMBED_BATCH, MEMORY_VECTOR_CANDIDATES};

use std::{
    collections::{BTreeMap, BTreeSet, HashSet},
    io::Write as _,
    path::{Path, PathBuf},
};

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

pub use note::{
    MemoryKind, MemorySource, Note, NoteMeta, Review, ReviewDecision, Sensitivity, content_hash,
    valid_id,
};

use crate::{
    Steward,
    approval::HumanAuthority,
    audit::{AuditEvent, Risk},
    error::{ErrorKind, StewardError},
    store::StoreError,
};
use index::{Filter, MemoryIndex};

/// The memory index, as the handle holds it.
pub(crate) type MemoryIndexHandle = MemoryIndex;

/// The memory folder under the home.
pub const MEMORY_DIR: &str = "memory";
/// The derived index folder under the home.
pub const INDEX_DIR: &str = "memory-index";
/// Most proposals waiting in the inbox; proposing more is refused until a person reviews.
/// Fixed (not a setting).
pub const MAX_INBOX: usize = 1_000;
/// Most note files a reconcile reads; more are reported, not indexed.
/// Fixed (not a setting).
pub const MAX_NOTES: usize = 100_000;
/// Most results of one memory search.
/// Fixed (not a setting).
pub const MAX_MEMORY_RESULTS: usize = 20;
/// Longest search text, characters.
/// Fixed (not a setting).
pub const MAX_MEMORY_QUERY_CHARS: usize = 500;
/// Most notes and proposals one forget removes; a selector matching more is refused (narrow it).
/// Fixed (not a setting).
pub const MAX_FORGET: usize = 1_000;
/// Most errors a reconcile lists (the count is complete).
/// Fixed (not a setting).
pub const MAX_RECONCILE_ERRORS: usize = 100;

/// Most accepted notes shown beside one proposal (those of its subject; its named
/// supersessions are always shown).
/// Fixed (not a setting).
pub const MAX_RELATED: usize = 20;

/// Who a change found in a note file is audited as: the person, outside Steward.
pub const OUTSIDE_ACTOR: &str = "person:files";

/// Why a memory call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// A note or an input breaks a rule (the message says which).
    #[error("{0}")]
    BadNote(String),
    /// No note or proposal of this id.
    #[error("no {what} {id}")]
    NotFound {
        /// `note` or `proposal`.
        what: &'static str,
        /// The id asked for.
        id: String,
    },
    /// The inbox holds [`MAX_INBOX`] proposals.
    #[error("the memory inbox holds {MAX_INBOX} proposals; review some first")]
    InboxFull,
    /// The person rejected or forgot this fact before; it is not written again.
    #[error("the person rejected or forgot this fact before")]
    Tombstoned,
    /// The search has no words to look for, or is too long.
    #[error("the search needs words (at most {MAX_MEMORY_QUERY_CHARS} characters)")]
    BadQuery,
    /// A forget would remove more than [`MAX_FORGET`] items.
    #[error("the selector matches {0} items, more than {MAX_FORGET}; narrow it")]
    TooMany(usize),
    /// A file could not be read or written.
    #[error("memory files: {0}")]
    Io(String),
    /// The index.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The vectors.
    #[error(transparent)]
    Vectors(#[from] crate::index::VectorError),
    /// The person's authority could not be made (an agent identity, a bad name).
    #[error(transparent)]
    Authority(#[from] crate::approval::ApprovalError),
}

impl StewardError for MemoryError {
    fn code(&self) -> &'static str {
        match self {
            Self::BadNote(_) => "MEMORY_BAD_NOTE",
            Self::NotFound { .. } => "MEMORY_NOT_FOUND",
            Self::InboxFull => "MEMORY_INBOX_FULL",
            Self::Tombstoned => "MEMORY_TOMBSTONED",
            Self::BadQuery => "MEMORY_BAD_QUERY",
            Self::TooMany(_) => "MEMORY_FORGET_TOO_MANY",
            Self::Io(_) => "MEMORY_IO",
            Self::Store(e) => e.code(),
            Self::Vectors(e) => e.code(),
            Self::Authority(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::BadNote(_) | Self::BadQuery | Self::TooMany(_) => ErrorKind::InvalidInput,
            Self::NotFound { .. } => ErrorKind::NotFound,
            Self::InboxFull | Self::Tombstoned => ErrorKind::Conflict,
            Self::Io(_) => ErrorKind::Unavailable,
            Self::Store(e) => e.kind(),
            Self::Vectors(e) => e.kind(),
            Self::Authority(e) => e.kind(),
        }
    }
}

fn io(path: &Path, e: &std::io::Error) -> MemoryError {
    MemoryError::Io(format!("{}: {e}", path.display()))
}

/// A fact to remember, as a proposer or a writer gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewMemory {
    /// The fact, in a sentence or a few (markdown).
    pub text: String,
    /// What it is about.
    pub kind: MemoryKind,
    /// Whom or what it is about: `<type>:<value>` (`person:anna@example.org`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Since when it is true in the world.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<DateTime<Utc>>,
    /// Until when it is true in the world.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<DateTime<Utc>>,
    /// How sure the proposer is, 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f32>,
    /// Where it came from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub sources: Vec<MemorySource>,
    /// Accepted notes it replaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub supersedes: Vec<String>,
    /// How careful a model must be with it.
    #[serde(default)]
    pub sensitivity: Sensitivity,
}

/// What proposing did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ProposeOutcome {
    /// In the inbox, waiting for the person.
    Proposed {
        /// The proposal.
        id: String,
    },
    /// The same fact is already waiting in the inbox: its sources were added to it.
    AlreadyProposed {
        /// That proposal.
        id: String,
    },
    /// The same fact is already an accepted note.
    AlreadyKnown {
        /// That note.
        id: String,
    },
    /// The person rejected or forgot this fact before: dropped, counted, not shown.
    Suppressed,
}

/// A proposal in the inbox, with the accepted notes it may contradict.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Proposal {
    /// The proposed note.
    pub note: Note,
    /// Current accepted notes of the same subject, and those it names as superseded: shown
    /// beside it, since accepting may replace them.
    pub related: Vec<Note>,
    /// When it expires unreviewed.
    pub expires: DateTime<Utc>,
}

/// A person's changes to a proposal before accepting it (absent fields stay as proposed).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryEdit {
    /// The fact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<MemoryKind>,
    /// The subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Since when it is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<DateTime<Utc>>,
    /// Until when it is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<DateTime<Utc>>,
    /// The notes it replaces (instead of the proposed ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<Vec<String>>,
    /// The sensitivity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensitivity: Option<Sensitivity>,
}

impl MemoryEdit {
    fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A memory search.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryQuery {
    /// Words to look for.
    pub text: String,
    /// Only these kinds (all when empty).
    #[serde(default)]
    pub kinds: Vec<MemoryKind>,
    /// Only notes of this subject.
    #[serde(default)]
    pub subject: Option<String>,
    /// Answer from what was true and known then (default: now, without superseded notes).
    #[serde(default)]
    pub as_of: Option<DateTime<Utc>>,
    /// Most results (1 to [`MAX_MEMORY_RESULTS`]).
    pub limit: usize,
}

/// One note found.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct MemoryHit {
    /// The note, with its provenance in its frontmatter.
    pub note: Note,
    /// Its file under `memory/notes/`.
    pub file: String,
    /// Its rank among the BM25 matches (1 is best), when it matched the words.
    pub lexical_rank: Option<usize>,
    /// Its rank among the nearest notes by meaning, when it was one of them.
    pub vector_rank: Option<usize>,
}

/// What a forget selects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "by", content = "value", rename_all = "snake_case")]
pub enum ForgetSelector {
    /// One note and the notes it replaced or that replaced it.
    Id(String),
    /// Every note and proposal about a subject.
    Subject(String),
    /// Every note and proposal holding all these words.
    Query(String),
}

/// One note or proposal a forget removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ForgottenItem {
    /// Its id.
    pub id: String,
    /// The file removed.
    pub path: PathBuf,
    /// The hash of its fact (what the tombstone keeps).
    pub content_hash: String,
}

/// Something a forget left in place, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Kept {
    /// What.
    pub what: String,
    /// Why.
    pub why: String,
}

/// What a forget removed and what it kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ForgetReceipt {
    /// Nothing was removed: this is what a forget would do.
    pub dry_run: bool,
    /// Who asked.
    pub by: String,
    /// When.
    pub at: DateTime<Utc>,
    /// The accepted notes removed (files, with their supersession history).
    pub notes: Vec<ForgottenItem>,
    /// The proposals removed (matching, or derived from the same sources).
    pub proposals: Vec<ForgottenItem>,
    /// Rows removed from the full-text index.
    pub index_entries: usize,
    /// Vectors removed.
    pub vectors: usize,
    /// Tombstones written (one per distinct fact).
    pub tombstones: usize,
    /// What stays, and why.
    pub kept: Vec<Kept>,
}

/// One file a reconcile could not index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ReconcileProblem {
    /// The file, under `memory/notes/`.
    pub file: String,
    /// A stable code.
    pub code: String,
    /// What is wrong.
    pub message: String,
}

/// What a reconcile did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
pub struct ReconcileReport {
    /// Notes indexed after it.
    pub notes: usize,
    /// Files read again because they changed (or were new).
    pub read: usize,
    /// Notes a person added, changed or removed outside Steward (audited as theirs).
    pub outside_changes: usize,
    /// Index rows dropped (files gone or broken).
    pub removed: usize,
    /// Proposals that expired unreviewed.
    pub expired: usize,
    /// Files that could not be indexed (at most [`MAX_RECONCILE_ERRORS`]).
    pub problems: Vec<ReconcileProblem>,
    /// How many files could not be indexed in all.
    pub problem_count: usize,
    /// Notes embedded, when an embedder is set.
    pub embedded: usize,
    /// Why embedding stopped, when it did.
    pub embed_error: Option<String>,
}

/// Why a person rejects a proposal: a category, never their words (which would likely repeat
/// the fact the tombstone must not keep).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RejectReason {
    /// It is not true.
    Wrong,
    /// It was true once.
    Outdated,
    /// True, but not to be remembered.
    Private,
    /// Not worth remembering.
    Trivial,
}

impl RejectReason {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Wrong => "wrong",
            Self::Outdated => "outdated",
            Self::Private => "private",
            Self::Trivial => "trivial",
        }
    }

    /// The reason named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Wrong, Self::Outdated, Self::Private, Self::Trivial]
            .into_iter()
            .find(|r| r.as_str() == s)
    }
}

/// A line of `tombstones.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Tombstone {
    /// The fact's [`content_hash`].
    pub hash: String,
    /// `rejected` (with the person's [`RejectReason`]: `rejected: outdated`) or `forgotten`.
    pub reason: String,
    /// When.
    pub at: DateTime<Utc>,
    /// The person.
    pub by: String,
}

/// The memory folders and their lock.
pub(crate) struct Files {
    root: PathBuf,
}

impl Files {
    pub(crate) fn new(home: &Path) -> Self {
        Self { root: home.join(MEMORY_DIR) }
    }

    fn notes(&self) -> PathBuf {
        self.root.join("notes")
    }

    fn inbox(&self) -> PathBuf {
        self.root.join("inbox")
    }

    fn tombstones(&self) -> PathBuf {
        self.root.join("tombstones.jsonl")
    }

    fn ensure(&self) -> Result<(), MemoryError> {
        for d in [self.root.clone(), self.notes(), self.inbox()] {
            std::fs::create_dir_all(&d).map_err(|e| io(&d, &e))?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt as _;
                let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
            }
        }
        Ok(())
    }

    /// Holds the memory lock (other processes of the same home wait) until dropped.
    fn lock(&self) -> Result<std::fs::File, MemoryError> {
        self.ensure()?;
        let path = self.root.join(".lock");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| io(&path, &e))?;
        f.lock().map_err(|e| io(&path, &e))?;
        Ok(f)
    }

    /// Writes `text` to `dir/name` whole or not at all (a temporary file, synced, renamed).
    fn write(&self, dir: &Path, name: &str, text: &str) -> Result<FileState, MemoryError> {
        let tmp = dir.join(format!(".{name}.tmp"));
        let path = dir.join(name);
        let mut opts = std::fs::OpenOptions::new();
        opts.create(true).truncate(true).write(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            opts.mode(0o600);
        }
        let written = opts.open(&tmp).and_then(|mut f| {
            f.write_all(text.as_bytes())?;
            f.sync_all()
        });
        if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, &path)) {
            // The temporary file holds the note: it does not stay behind.
            let _ = std::fs::remove_file(&tmp);
            return Err(io(&path, &e));
        }
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        let meta = std::fs::symlink_metadata(&path).map_err(|e| io(&path, &e))?;
        Ok(FileState::of(&meta, sha(text.as_bytes())))
    }

    /// Reads a note file: a regular file (not a link) of at most [`note::MAX_NOTE_FILE_BYTES`].
    fn read(path: &Path) -> Result<(String, FileState), MemoryError> {
        let meta = std::fs::symlink_metadata(path).map_err(|e| io(path, &e))?;
        if !meta.file_type().is_file() {
            return Err(MemoryError::BadNote("not a regular file".to_owned()));
        }
        if meta.len() > note::MAX_NOTE_FILE_BYTES {
            return Err(MemoryError::BadNote(format!(
                "{} bytes; a note file has at most {}",
                meta.len(),
                note::MAX_NOTE_FILE_BYTES
            )));
        }
        let bytes = std::fs::read(path).map_err(|e| io(path, &e))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| MemoryError::BadNote("not UTF-8 text".to_owned()))?;
        let state = FileState::of(&meta, sha(text.as_bytes()));
        Ok((text, state))
    }

    /// The `.md` files of `dir` (regular files, not hidden), by name, at most `max`.
    fn list(
        dir: &Path,
        max: usize,
    ) -> Result<(Vec<(String, std::fs::Metadata)>, usize), MemoryError> {
        let mut out = Vec::new();
        let mut over = 0;
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((out, 0)),
            Err(e) => return Err(io(dir, &e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| io(dir, &e))?;
            let Ok(name) = entry.file_name().into_string() else { continue };
            if name.starts_with('.') || !name.ends_with(".md") {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.file_type().is_file() {
                continue;
            }
            if out.len() >= max {
                over += 1;
                continue;
            }
            out.push((name, meta));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok((out, over))
    }

    /// Removes the temporary files a crash left in `notes/` and `inbox/` (each holds a note);
    /// returns how many. Called with the lock held, when no write is under way.
    fn sweep(&self) -> usize {
        let mut n = 0;
        for dir in [self.notes(), self.inbox(), self.root.clone()] {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with('.')
                    && name.ends_with(".tmp")
                    && std::fs::remove_file(e.path()).is_ok()
                {
                    n += 1;
                }
            }
        }
        n
    }

    fn tombstone(&self, t: &Tombstone) -> Result<(), MemoryError> {
        let path = self.tombstones();
        let mut opts = std::fs::OpenOptions::new();
        opts.create(true).append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            opts.mode(0o600);
        }
        let mut f = opts.open(&path).map_err(|e| io(&path, &e))?;
        let line = serde_json::to_string(t).map_err(|e| MemoryError::Io(e.to_string()))?;
        f.write_all(format!("{line}\n").as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| io(&path, &e))
    }

    /// The tombstoned hashes.
    fn tombstoned(&self) -> Result<HashSet<String>, MemoryError> {
        let path = self.tombstones();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashSet::new()),
            Err(e) => return Err(io(&path, &e)),
        };
        // A torn last line (a crash mid-append) is skipped, not fatal.
        Ok(text
            .lines()
            .filter_map(|l| serde_json::from_str::<Tombstone>(l).ok())
            .map(|t| t.hash)
            .collect())
    }
}

/// A file's size, modification time and SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileState {
    size: i64,
    mtime_ns: i64,
    sha: String,
}

impl FileState {
    fn of(meta: &std::fs::Metadata, sha: String) -> Self {
        Self { size: i64::try_from(meta.len()).unwrap_or(i64::MAX), mtime_ns: mtime_ns(meta), sha }
    }
}

fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

fn sha(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    note::hex(&sha2::Sha256::digest(bytes))
}

fn now_utc() -> DateTime<Utc> {
    DateTime::from_timestamp(crate::time::now_secs(), 0).unwrap_or_default()
}

fn note_from(m: &NewMemory, id: String, actor: &str, now: DateTime<Utc>) -> Note {
    Note {
        meta: NoteMeta {
            id,
            kind: m.kind,
            subject: m.subject.as_deref().map(|s| s.trim().to_owned()),
            valid_from: m.valid_from,
            valid_to: m.valid_to,
            created: now,
            superseded_at: None,
            superseded_by: None,
            replaced_from: None,
            confidence: m.confidence,
            sources: m.sources.clone(),
            proposed_by: actor.to_owned(),
            review: None,
            supersedes: m.supersedes.clone(),
            sensitivity: m.sensitivity,
        },
        body: m.text.trim().to_owned(),
    }
}

/// Checks a fact against the rules of a note before anything is written.
pub fn check_new(m: &NewMemory) -> Result<(), MemoryError> {
    let n = note_from(m, "m000000000000".to_owned(), "check", now_utc());
    note::check(&n)
}

/// Sources of `extra` not yet in `into`, appended up to [`note::MAX_SOURCES`].
fn merge_sources(into: &mut Vec<MemorySource>, extra: &[MemorySource]) -> bool {
    let mut changed = false;
    for s in extra {
        if into.len() >= note::MAX_SOURCES {
            break;
        }
        if !into.contains(s) {
            into.push(s.clone());
            changed = true;
        }
    }
    changed
}

impl Steward {
    fn memory_files(&self) -> Files {
        Files::new(self.home())
    }

    pub(crate) fn memory_index(&self) -> Result<&MemoryIndex, MemoryError> {
        self.open_once(&self.memory, || MemoryIndex::open(self.home(), self.limits()))
    }

    fn memory_audit(&self, actor: &str, event: &str, risk: Risk, payload: &serde_json::Value) {
        match self.audit() {
            Ok(a) => {
                a.record(&AuditEvent {
                    actor,
                    event_type: event,
                    risk,
                    chat: None,
                    tool: None,
                    correlation_id: None,
                    payload,
                    at: crate::time::now_secs(),
                });
            }
            Err(e) => tracing::warn!(error = %e, event, "audit trail unavailable"),
        }
    }

    /// The proposals of the inbox, parsed, by id (broken files are skipped and logged).
    fn read_inbox(&self, files: &Files) -> Result<BTreeMap<String, (String, Note)>, MemoryError> {
        let (list, _) = Files::list(&files.inbox(), MAX_INBOX * 2)?;
        let mut out = BTreeMap::new();
        for (name, _) in list {
            let path = files.inbox().join(&name);
            match Files::read(&path).and_then(|(t, _)| note::parse(&t)) {
                Ok(note::Parsed::Note(n)) => {
                    out.insert(n.meta.id.clone(), (name, *n));
                }
                Ok(note::Parsed::Plain(_)) => {
                    tracing::warn!(file = name, "inbox file without frontmatter")
                }
                Err(e) => tracing::warn!(file = name, error = %e, "inbox file unreadable"),
            }
        }
        Ok(out)
    }

    /// Removes proposals older than `[limits] memory_proposal_days`; returns how many.
    fn expire_proposals(
        &self,
        files: &Files,
        inbox: &mut BTreeMap<String, (String, Note)>,
        now: DateTime<Utc>,
    ) -> usize {
        let days = i64::try_from(self.limits().memory_proposal_days).unwrap_or(i64::MAX);
        let cutoff = now - chrono::Duration::days(days);
        let old: Vec<String> = inbox
            .iter()
            .filter(|(_, (_, n))| n.meta.created < cutoff)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &old {
            if let Some((name, _)) = inbox.remove(id) {
                let _ = std::fs::remove_file(files.inbox().join(&name));
            }
        }
        if !old.is_empty() {
            self.memory_audit("system", "memory.expired", Risk::Low, &json!({ "ids": old }));
        }
        old.len()
    }

    /// Proposes a fact for the person to review: it lands in the inbox, never in the notes
    /// recall reads. A fact the person rejected or forgot before is dropped and counted; one
    /// already waiting gains the new sources; one already accepted is not proposed again.
    pub fn memory_propose(
        &self,
        actor: &str,
        m: &NewMemory,
    ) -> Result<ProposeOutcome, MemoryError> {
        let files = self.memory_files();
        let _lock = files.lock()?;
        let now = now_utc();
        let proposal = note_from(m, note::new_id()?, actor, now);
        note::check(&proposal)?;
        let hash = content_hash(proposal.meta.subject.as_deref(), &proposal.body);
        if files.tombstoned()?.contains(&hash) {
            self.memory_audit(actor, "memory.suppressed", Risk::Low, &json!({ "hash": hash }));
            return Ok(ProposeOutcome::Suppressed);
        }
        let index = self.memory_index()?;
        if let Some(known) =
            index.with_hash(&hash)?.into_iter().find(|r| r.note.meta.superseded_at.is_none())
        {
            return Ok(ProposeOutcome::AlreadyKnown { id: known.note.meta.id });
        }
        for id in &proposal.meta.supersedes {
            if index.get(id)?.is_none() {
                return Err(MemoryError::BadNote(format!(
                    "supersedes {id}: no such accepted note"
                )));
            }
        }
        let mut inbox = self.read_inbox(&files)?;
        self.expire_proposals(&files, &mut inbox, now);
        if let Some((name, mut waiting)) = inbox
            .values()
            .find(|(_, n)| content_hash(n.meta.subject.as_deref(), &n.body) == hash)
            .cloned()
        {
            if merge_sources(&mut waiting.meta.sources, &proposal.meta.sources) {
                files.write(&files.inbox(), &name, &note::render(&waiting)?)?;
            }
            return Ok(ProposeOutcome::AlreadyProposed { id: waiting.meta.id });
        }
        if inbox.len() >= MAX_INBOX {
            return Err(MemoryError::InboxFull);
        }
        let id = proposal.meta.id.clone();
        files.write(&files.inbox(), &format!("{id}.md"), &note::render(&proposal)?)?;
        self.memory_audit(
            actor,
            "memory.proposed",
            Risk::Low,
            &json!({ "id": id, "kind": proposal.meta.kind, "hash": hash }),
        );
        Ok(ProposeOutcome::Proposed { id })
    }

    /// The inbox, oldest first, each proposal with the accepted notes it may contradict
    /// (expired proposals are removed first).
    pub fn memory_inbox(&self) -> Result<Vec<Proposal>, MemoryError> {
        let files = self.memory_files();
        let _lock = files.lock()?;
        let now = now_utc();
        let mut inbox = self.read_inbox(&files)?;
        self.expire_proposals(&files, &mut inbox, now);
        let index = self.memory_index()?;
        let days = i64::try_from(self.limits().memory_proposal_days).unwrap_or(i64::MAX);
        let mut out = Vec::with_capacity(inbox.len());
        for (_, (_, n)) in inbox {
            let mut related: Vec<Note> = Vec::new();
            if let Some(s) = &n.meta.subject {
                related.extend(
                    index
                        .of_subject(s)?
                        .into_iter()
                        .filter(|r| r.note.meta.superseded_at.is_none())
                        .take(MAX_RELATED)
                        .map(|r| r.note),
                );
            }
            for id in &n.meta.supersedes {
                if let Some(r) = index.get(id)?
                    && !related.iter().any(|x| x.meta.id == *id)
                {
                    related.push(r.note);
                }
            }
            let expires = n
                .meta
                .created
                .checked_add_signed(chrono::Duration::days(days))
                .unwrap_or(DateTime::<Utc>::MAX_UTC);
            out.push(Proposal { note: n, related, expires });
        }
        out.sort_by(|a, b| {
            a.note.meta.created.cmp(&b.note.meta.created).then(a.note.meta.id.cmp(&b.note.meta.id))
        });
        Ok(out)
    }

    /// One proposal of the inbox.
    pub fn memory_proposal(&self, id: &str) -> Result<Proposal, MemoryError> {
        self.memory_inbox()?
            .into_iter()
            .find(|p| p.note.meta.id == id)
            .ok_or_else(|| MemoryError::NotFound { what: "proposal", id: id.to_owned() })
    }

    /// A person accepts a proposal, as proposed or with their `edit`: it becomes a note recall
    /// reads, and the notes it supersedes get `valid_to` and `superseded_at` (they keep their
    /// files). Audited as the person's.
    pub fn memory_accept(
        &self,
        who: &HumanAuthority,
        id: &str,
        edit: Option<&MemoryEdit>,
    ) -> Result<Note, MemoryError> {
        let files = self.memory_files();
        let lock = files.lock()?;
        let inbox = self.read_inbox(&files)?;
        let (name, mut n) = inbox
            .get(id)
            .cloned()
            .ok_or_else(|| MemoryError::NotFound { what: "proposal", id: id.to_owned() })?;
        if let Some(row) = self.memory_index()?.get(id)? {
            // Accepted before and interrupted (a crash after the note was written): finish
            // what accepting does — the notes it replaces marked, the proposal's file gone,
            // the decision audited — and answer as accepting would have.
            let note = row.note;
            self.mark_replaced(
                &files,
                &note,
                note.meta.review.as_ref().map_or_else(now_utc, |r| r.at),
            )?;
            return self.accepted(&files, lock, who, &name, note, ("completed", true));
        }
        let edited = edit.is_some_and(|e| !e.is_empty());
        if let Some(e) = edit {
            if let Some(t) = &e.text {
                n.body = t.trim().to_owned();
            }
            if let Some(k) = e.kind {
                n.meta.kind = k;
            }
            if let Some(s) = &e.subject {
                n.meta.subject = Some(s.trim().to_owned()).filter(|s| !s.is_empty());
            }
            if e.valid_from.is_some() {
                n.meta.valid_from = e.valid_from;
            }
            if e.valid_to.is_some() {
                n.meta.valid_to = e.valid_to;
            }
            if let Some(s) = &e.supersedes {
                n.meta.supersedes.clone_from(s);
            }
            if let Some(s) = e.sensitivity {
                n.meta.sensitivity = s;
            }
        }
        let now = now_utc();
        n.meta.review = Some(Review {
            by: who.person().to_owned(),
            at: now,
            decision: if edited { ReviewDecision::Edited } else { ReviewDecision::Accepted },
        });
        note::check(&n)?;
        let note = self.admit(&files, n, now)?;
        self.accepted(&files, lock, who, &name, note, ("edited", edited))
    }

    /// The end of an accept, the note written: the proposal's file goes, the decision is
    /// audited (`detail`: whether it was edited, or that a retry completed it), and the note is
    /// embedded once the lock is released.
    fn accepted(
        &self,
        files: &Files,
        lock: std::fs::File,
        who: &HumanAuthority,
        inbox_name: &str,
        note: Note,
        detail: (&str, bool),
    ) -> Result<Note, MemoryError> {
        let inbox_file = files.inbox().join(inbox_name);
        std::fs::remove_file(&inbox_file).map_err(|e| io(&inbox_file, &e))?;
        self.memory_audit(
            who.person(),
            "memory.accepted",
            Risk::Low,
            &json!({
                "id": note.meta.id,
                detail.0: detail.1,
                "supersedes": note.meta.supersedes,
                "hash": content_hash(note.meta.subject.as_deref(), &note.body),
            }),
        );
        // The embedder is a network call: not under the lock other memory calls wait on.
        drop(lock);
        self.embed_memory_quietly();
        Ok(note)
    }

    /// Writes an accepted note, then marks the notes it supersedes (so a failure between the
    /// two leaves the new note and old notes still current, never old notes pointing at a note
    /// that does not exist), with the memory lock held by the caller.
    fn admit(&self, files: &Files, n: Note, now: DateTime<Utc>) -> Result<Note, MemoryError> {
        let index = self.memory_index()?;
        if index.get(&n.meta.id)?.is_some() {
            return Err(MemoryError::BadNote(format!("{} is already an accepted note", n.meta.id)));
        }
        let mut replaced = Vec::new();
        for old_id in &n.meta.supersedes {
            let row = index.get(old_id)?.ok_or_else(|| {
                MemoryError::BadNote(format!("supersedes {old_id}: no such accepted note"))
            })?;
            if row.note.meta.superseded_at.is_some() {
                return Err(MemoryError::BadNote(format!("{old_id} was already superseded")));
            }
            replaced.push(row);
        }
        drop(replaced);
        let name = note::file_name(&n.meta.id, &n.body);
        let state = files.write(&files.notes(), &name, &note::render(&n)?)?;
        index.upsert(&name, &state.sha, state.size, state.mtime_ns, &n)?;
        fail::fail_point!("memory::accept::before_supersede", |_| std::process::abort());
        self.mark_replaced(files, &n, now)?;
        Ok(n)
    }

    /// Marks the notes `n` supersedes as replaced by it, those still current (a retry after an
    /// interrupted accept finds some marked already; one another note replaced meanwhile stays
    /// as that one left it).
    fn mark_replaced(
        &self,
        files: &Files,
        n: &Note,
        now: DateTime<Utc>,
    ) -> Result<(), MemoryError> {
        let index = self.memory_index()?;
        for old_id in &n.meta.supersedes {
            let Some(row) = index.get(old_id)? else { continue };
            if row.note.meta.superseded_at.is_some() {
                continue;
            }
            let mut old = row.note;
            old.meta.superseded_at = Some(now);
            old.meta.superseded_by = Some(n.meta.id.clone());
            // It answers until the new fact holds; its own end (valid_to) stays as it was.
            old.meta.replaced_from = Some(n.meta.valid_from.unwrap_or(now));
            let state = files.write(&files.notes(), &row.file, &note::render(&old)?)?;
            index.upsert(&row.file, &state.sha, state.size, state.mtime_ns, &old)?;
        }
        Ok(())
    }

    /// A person rejects a proposal: its file goes, and its fact's hash becomes a tombstone, so
    /// the same fact is never proposed to them again.
    pub fn memory_reject(
        &self,
        who: &HumanAuthority,
        id: &str,
        reason: Option<RejectReason>,
    ) -> Result<Tombstone, MemoryError> {
        let files = self.memory_files();
        let _lock = files.lock()?;
        let inbox = self.read_inbox(&files)?;
        let (name, n) = inbox
            .get(id)
            .ok_or_else(|| MemoryError::NotFound { what: "proposal", id: id.to_owned() })?;
        let reason = match reason {
            Some(r) => format!("rejected: {}", r.as_str()),
            None => "rejected".to_owned(),
        };
        let t = Tombstone {
            hash: content_hash(n.meta.subject.as_deref(), &n.body),
            reason,
            at: now_utc(),
            by: who.person().to_owned(),
        };
        files.tombstone(&t)?;
        std::fs::remove_file(files.inbox().join(name)).map_err(|e| io(&files.inbox(), &e))?;
        self.memory_audit(
            who.person(),
            "memory.rejected",
            Risk::Low,
            &json!({ "id": id, "hash": t.hash }),
        );
        Ok(t)
    }

    /// Writes an accepted note directly: the path of `memory.write`, which the policy gates
    /// (a person approved it: `approved_by`). A fact the person rejected or forgot is refused.
    pub fn memory_write(
        &self,
        actor: &str,
        approved_by: &str,
        m: &NewMemory,
    ) -> Result<Note, MemoryError> {
        let files = self.memory_files();
        let lock = files.lock()?;
        let now = now_utc();
        let mut n = note_from(m, note::new_id()?, actor, now);
        n.meta.review = Some(Review {
            by: approved_by.to_owned(),
            at: now,
            decision: ReviewDecision::Approved,
        });
        note::check(&n)?;
        let hash = content_hash(n.meta.subject.as_deref(), &n.body);
        if files.tombstoned()?.contains(&hash) {
            return Err(MemoryError::Tombstoned);
        }
        let note = self.admit(&files, n, now)?;
        self.memory_audit(
            actor,
            "memory.written",
            Risk::Medium,
            &json!({ "id": note.meta.id, "approved_by": approved_by, "supersedes": note.meta.supersedes, "hash": hash }),
        );
        drop(lock);
        self.embed_memory_quietly();
        Ok(note)
    }

    /// A person writes a note directly (an import they accept): `Proposed` names the note
    /// written; a fact already a note is `AlreadyKnown`; one they rejected or forgot before is
    /// `Suppressed` (they can still accept it from a proposal or write the file).
    pub(crate) fn memory_write_reviewed(
        &self,
        who: &HumanAuthority,
        m: &NewMemory,
    ) -> Result<ProposeOutcome, MemoryError> {
        let files = self.memory_files();
        let _lock = files.lock()?;
        let now = now_utc();
        let mut n = note_from(m, note::new_id()?, who.person(), now);
        n.meta.review = Some(Review {
            by: who.person().to_owned(),
            at: now,
            decision: ReviewDecision::Accepted,
        });
        note::check(&n)?;
        let hash = content_hash(n.meta.subject.as_deref(), &n.body);
        if files.tombstoned()?.contains(&hash) {
            return Ok(ProposeOutcome::Suppressed);
        }
        let index = self.memory_index()?;
        if let Some(known) =
            index.with_hash(&hash)?.into_iter().find(|r| r.note.meta.superseded_at.is_none())
        {
            return Ok(ProposeOutcome::AlreadyKnown { id: known.note.meta.id });
        }
        let note = self.admit(&files, n, now)?;
        self.memory_audit(
            who.person(),
            "memory.accepted",
            Risk::Low,
            &json!({ "id": note.meta.id, "edited": false, "imported": true, "hash": hash }),
        );
        Ok(ProposeOutcome::Proposed { id: note.meta.id })
    }

    /// Whether a fact was rejected or forgotten before.
    pub fn memory_tombstoned(
        &self,
        subject: Option<&str>,
        text: &str,
    ) -> Result<bool, MemoryError> {
        Ok(self.memory_files().tombstoned()?.contains(&content_hash(subject, text)))
    }

    /// An accepted note (a proposal is not one: it is `MEMORY_NOT_FOUND`).
    pub fn memory_note(&self, id: &str) -> Result<MemoryHit, MemoryError> {
        let row = self
            .memory_index()?
            .get(id)?
            .ok_or_else(|| MemoryError::NotFound { what: "note", id: id.to_owned() })?;
        Ok(MemoryHit { note: row.note, file: row.file, lexical_rank: None, vector_rank: None })
    }

    /// Accepted notes matching `q`: BM25 over the facts and subjects fused with the nearest
    /// notes by meaning (when an embedder is set), filtered by kind, subject and time. A topic
    /// memory does not hold finds nothing.
    pub fn memory_search(&self, q: &MemoryQuery) -> Result<Vec<MemoryHit>, MemoryError> {
        if q.text.chars().count() > MAX_MEMORY_QUERY_CHARS {
            return Err(MemoryError::BadQuery);
        }
        let fts = index::fts_query(&q.text).ok_or(MemoryError::BadQuery)?;
        if let Some(s) = &q.subject {
            note::check_subject(s)?;
        }
        let limit = q.limit.clamp(1, MAX_MEMORY_RESULTS);
        let index = self.memory_index()?;
        let filter = Filter {
            kinds: &q.kinds,
            subject: q.subject.as_deref(),
            as_of: q.as_of.map(|t| t.timestamp()),
            now: crate::time::now_secs(),
        };
        let lexical = index.lexical(&fts, &filter, 50)?;
        let near = index.passing(&self.near_memory(&q.text), &filter)?;
        let k = crate::search::engine::RRF_K;
        let mut score: BTreeMap<i64, f64> = BTreeMap::new();
        let position = |i: usize| 1.0 / (k + f64::from(u32::try_from(i + 1).unwrap_or(u32::MAX)));
        for (i, r) in lexical.iter().enumerate() {
            *score.entry(*r).or_default() += position(i);
        }
        for (i, r) in near.iter().enumerate() {
            *score.entry(*r).or_default() += position(i);
        }
        let mut ranked: Vec<(i64, f64)> = score.into_iter().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(limit);
        let ids: Vec<i64> = ranked.iter().map(|r| r.0).collect();
        let mut rows: BTreeMap<i64, index::Row> =
            index.by_rowids(&ids)?.into_iter().map(|r| (r.rowid, r)).collect();
        Ok(ids
            .iter()
            .filter_map(|id| rows.remove(id))
            .map(|r| MemoryHit {
                lexical_rank: lexical.iter().position(|x| *x == r.rowid).map(|p| p + 1),
                vector_rank: near.iter().position(|x| *x == r.rowid).map(|p| p + 1),
                file: r.file,
                note: r.note,
            })
            .collect())
    }

    /// Brings the index in line with the note files: reads what changed (a person's edit is
    /// audited as theirs), drops what is gone, expires old proposals and embeds what is new.
    pub fn memory_reconcile(&self) -> Result<ReconcileReport, MemoryError> {
        let files = self.memory_files();
        let lock = files.lock()?;
        let mut report = self.reconcile_locked(&files)?;
        let mut inbox = self.read_inbox(&files)?;
        report.expired = self.expire_proposals(&files, &mut inbox, now_utc());
        drop(lock);
        match self.embed_memory() {
            Ok(Some(e)) => {
                report.embedded = e.0;
                report.embed_error = e.1;
            }
            Ok(None) => {}
            Err(e) => report.embed_error = Some(e.to_string()),
        }
        Ok(report)
    }

    fn reconcile_locked(&self, files: &Files) -> Result<ReconcileReport, MemoryError> {
        let index = self.memory_index()?;
        let known = index.files()?;
        let (list, over) = Files::list(&files.notes(), MAX_NOTES)?;
        let mut report = ReconcileReport::default();
        let problem = |report: &mut ReconcileReport, file: &str, e: &MemoryError| {
            report.problem_count += 1;
            if report.problems.len() < MAX_RECONCILE_ERRORS {
                report.problems.push(ReconcileProblem {
                    file: file.to_owned(),
                    code: e.code().to_owned(),
                    message: e.to_string(),
                });
            }
        };
        if over > 0 {
            let e =
                MemoryError::BadNote(format!("{over} more files than {MAX_NOTES}; not indexed"));
            problem(&mut report, "notes/", &e);
        }
        files.sweep();
        // Files gone first: a note renamed in an editor keeps its id under the new name.
        let listed: HashSet<&String> = list.iter().map(|(n, _)| n).collect();
        let gone: Vec<String> = known.keys().filter(|f| !listed.contains(f)).cloned().collect();
        let mut outside: Vec<(String, &'static str)> = Vec::new();
        for f in &gone {
            if let Some(k) = known.get(f) {
                outside.push((k.id.clone(), "removed"));
            }
        }
        let dropped = index.remove_files(&gone)?;
        report.removed = dropped.len();
        if !dropped.is_empty()
            && let Ok(v) = self.memory_vectors()
        {
            v.remove(&dropped)?;
        }
        let mut broken: Vec<String> = Vec::new();
        for (name, meta) in &list {
            let prior = known.get(name);
            if prior.is_some_and(|p| {
                p.size == i64::try_from(meta.len()).unwrap_or(-1) && p.mtime_ns == mtime_ns(meta)
            }) {
                continue;
            }
            report.read += 1;
            let path = files.notes().join(name);
            let read = Files::read(&path);
            let (text, state) = match read {
                Ok(r) => r,
                Err(e) => {
                    problem(&mut report, name, &e);
                    broken.push(name.clone());
                    continue;
                }
            };
            if prior.is_some_and(|p| p.sha == state.sha) {
                // Touched, not changed: only the file state moves.
                if let Some(row) = index.get(&prior.map(|p| p.id.clone()).unwrap_or_default())? {
                    index.upsert(name, &state.sha, state.size, state.mtime_ns, &row.note)?;
                }
                continue;
            }
            let parsed = note::parse(&text);
            let note = match parsed {
                Ok(note::Parsed::Note(n)) => {
                    let state = state.clone();
                    (*n, state)
                }
                Ok(note::Parsed::Plain(body)) => {
                    // A person's own markdown: it becomes a note of theirs, with frontmatter.
                    let now = now_utc();
                    let mut n = note_from(
                        &NewMemory {
                            text: body,
                            kind: MemoryKind::Fact,
                            subject: None,
                            valid_from: None,
                            valid_to: None,
                            confidence: None,
                            sources: vec![MemorySource::Person],
                            supersedes: Vec::new(),
                            sensitivity: Sensitivity::Normal,
                        },
                        note::new_id()?,
                        OUTSIDE_ACTOR,
                        now,
                    );
                    n.meta.review = Some(Review {
                        by: OUTSIDE_ACTOR.to_owned(),
                        at: now,
                        decision: ReviewDecision::Written,
                    });
                    if let Err(e) = note::check(&n) {
                        problem(&mut report, name, &e);
                        broken.push(name.clone());
                        continue;
                    }
                    let state = files.write(&files.notes(), name, &note::render(&n)?)?;
                    (n, state)
                }
                Err(e) => {
                    problem(&mut report, name, &e);
                    broken.push(name.clone());
                    continue;
                }
            };
            let (n, state) = note;
            let id = n.meta.id.clone();
            if let Err(e) = index.upsert(name, &state.sha, state.size, state.mtime_ns, &n) {
                problem(&mut report, name, &e);
                broken.push(name.clone());
                continue;
            }
            outside.push((id, if prior.is_some() { "changed" } else { "added" }));
        }
        let drop: Vec<String> = broken.into_iter().filter(|b| known.contains_key(b)).collect();
        let dropped = index.remove_files(&drop)?;
        report.removed += dropped.len();
        if !dropped.is_empty()
            && let Ok(v) = self.memory_vectors()
        {
            v.remove(&dropped)?;
        }
        report.outside_changes = outside.len();
        for (id, what) in &outside {
            self.memory_audit(
                OUTSIDE_ACTOR,
                "memory.edited_outside",
                Risk::Medium,
                &json!({ "id": id, "change": what }),
            );
        }
        report.notes = usize::try_from(index.count()?).unwrap_or(usize::MAX);
        Ok(report)
    }

    /// Drops the memory index and builds it again from the note files.
    pub fn memory_rebuild(&self) -> Result<ReconcileReport, MemoryError> {
        let files = self.memory_files();
        let _lock = files.lock()?;
        let index = self.memory_index()?;
        let all: Vec<String> = index.files()?.into_keys().collect();
        let dropped = index.remove_files(&all)?;
        if let Ok(v) = self.memory_vectors() {
            v.remove(&dropped)?;
        }
        index.compact()?;
        let mut report = self.reconcile_locked(&files)?;
        report.outside_changes = 0;
        Ok(report)
    }

    /// A person forgets: the selected notes (with their supersession history), the proposals
    /// matching or derived from the same sources, their index rows and vectors go; each fact
    /// becomes a tombstone; the index is compacted so no page keeps the words. With `dry_run`,
    /// nothing is removed and the receipt says what would be.
    pub fn memory_forget(
        &self,
        who: &HumanAuthority,
        selector: &ForgetSelector,
        dry_run: bool,
    ) -> Result<ForgetReceipt, MemoryError> {
        let files = self.memory_files();
        let _lock = files.lock()?;
        let index = self.memory_index()?;
        let inbox = self.read_inbox(&files)?;
        // The notes selected.
        let mut notes: BTreeMap<String, index::Row> = BTreeMap::new();
        let mut proposals: BTreeMap<String, (String, Note)> = BTreeMap::new();
        match selector {
            ForgetSelector::Id(id) => {
                let row = index
                    .get(id)?
                    .ok_or_else(|| MemoryError::NotFound { what: "note", id: id.clone() })?;
                // The whole chain: what it replaced and what replaced it.
                let mut todo = vec![row];
                while let Some(r) = todo.pop() {
                    if notes.contains_key(&r.note.meta.id) || notes.len() > MAX_FORGET {
                        continue;
                    }
                    let linked: Vec<String> = r
                        .note
                        .meta
                        .supersedes
                        .iter()
                        .cloned()
                        .chain(r.note.meta.superseded_by.clone())
                        .collect();
                    notes.insert(r.note.meta.id.clone(), r);
                    for l in linked {
                        if let Some(x) = index.get(&l)? {
                            todo.push(x);
                        }
                    }
                }
            }
            ForgetSelector::Subject(s) => {
                note::check_subject(s)?;
                for r in index.of_subject(s)? {
                    notes.insert(r.note.meta.id.clone(), r);
                }
                let s = s.to_lowercase();
                for (id, p) in &inbox {
                    if p.1.meta.subject.as_deref().map(str::to_lowercase).as_deref()
                        == Some(s.as_str())
                    {
                        proposals.insert(id.clone(), p.clone());
                    }
                }
            }
            ForgetSelector::Query(q) => {
                if q.chars().count() > MAX_MEMORY_QUERY_CHARS {
                    return Err(MemoryError::BadQuery);
                }
                let fts = index::fts_query(q).ok_or(MemoryError::BadQuery)?;
                // Every note holding the words, superseded or not, whatever its validity.
                let mut rowids = index.matching(&fts, MAX_FORGET + 1)?;
                rowids.sort_unstable();
                rowids.dedup();
                for r in index.by_rowids(&rowids)? {
                    notes.insert(r.note.meta.id.clone(), r);
                }
                let words: Vec<String> = note::normalized(q)
                    .split(' ')
                    .filter(|w| fts.contains(&format!("\"{w}\"")))
                    .map(str::to_owned)
                    .collect();
                for (id, p) in &inbox {
                    let hay = format!(
                        " {} {} ",
                        note::normalized(p.1.meta.subject.as_deref().unwrap_or("")),
                        note::normalized(&p.1.body)
                    );
                    if !words.is_empty() && words.iter().all(|w| hay.contains(&format!(" {w} "))) {
                        proposals.insert(id.clone(), p.clone());
                    }
                }
            }
        }
        // Proposals derived from the same sources.
        let keys: HashSet<String> = notes
            .values()
            .flat_map(|r| r.note.meta.sources.iter().filter_map(MemorySource::derived_key))
            .chain(
                proposals
                    .values()
                    .flat_map(|p| p.1.meta.sources.iter().filter_map(MemorySource::derived_key)),
            )
            .collect();
        for (id, p) in &inbox {
            if p.1
                .meta
                .sources
                .iter()
                .filter_map(MemorySource::derived_key)
                .any(|k| keys.contains(&k))
            {
                proposals.insert(id.clone(), p.clone());
            }
        }
        // Proposals of the same facts, from any source (accepting one would bring a
        // forgotten fact back).
        let note_hashes: HashSet<String> = notes
            .values()
            .map(|r| content_hash(r.note.meta.subject.as_deref(), &r.note.body))
            .collect();
        for (id, p) in &inbox {
            if note_hashes.contains(&content_hash(p.1.meta.subject.as_deref(), &p.1.body)) {
                proposals.insert(id.clone(), p.clone());
            }
        }
        if notes.len() + proposals.len() > MAX_FORGET {
            return Err(MemoryError::TooMany(notes.len() + proposals.len()));
        }
        let now = now_utc();
        let item = |id: &str, path: PathBuf, n: &Note| ForgottenItem {
            id: id.to_owned(),
            path,
            content_hash: content_hash(n.meta.subject.as_deref(), &n.body),
        };
        let note_items: Vec<ForgottenItem> = notes
            .values()
            .map(|r| item(&r.note.meta.id, files.notes().join(&r.file), &r.note))
            .collect();
        let proposal_items: Vec<ForgottenItem> =
            proposals.iter().map(|(id, (name, n))| item(id, files.inbox().join(name), n)).collect();
        let hashes: BTreeSet<String> =
            note_items.iter().chain(&proposal_items).map(|i| i.content_hash.clone()).collect();
        let rowids: Vec<i64> = notes.values().map(|r| r.rowid).collect();
        let vectors = match self.memory_vectors() {
            Ok(v) => v.embed_states()?.keys().filter(|k| rowids.contains(k)).count(),
            Err(_) => 0,
        };
        let mut kept = Vec::new();
        let mut mails = BTreeSet::new();
        let mut chats = BTreeSet::new();
        let mut docs = BTreeSet::new();
        for s in notes
            .values()
            .flat_map(|r| &r.note.meta.sources)
            .chain(proposals.values().flat_map(|p| &p.1.meta.sources))
        {
            match s {
                MemorySource::Mail { message_id, .. } => {
                    mails.insert(message_id.clone());
                }
                MemorySource::Chat { chat } => {
                    chats.insert(chat.clone());
                }
                MemorySource::Document { fingerprint, .. } => {
                    docs.insert(fingerprint.clone());
                }
                MemorySource::Person | MemorySource::Import { .. } => {}
            }
        }
        for m in mails {
            kept.push(Kept {
                what: format!("mail <{m}>"),
                why: "the source mail stays in the mail mirror; delete the mail to remove it"
                    .to_owned(),
            });
        }
        for c in chats {
            kept.push(Kept {
                what: format!("chat {c}"),
                why: "the chat keeps what was said in it; delete the chat to remove it".to_owned(),
            });
        }
        for d in docs {
            kept.push(Kept {
                what: format!("document {d}"),
                why: "the document is the person's own file".to_owned(),
            });
        }
        kept.push(Kept {
            what: "approval requests".to_owned(),
            why: "a memory.propose or memory.write call the person had to approve keeps its \
                  input in the approval and its audit entries (the record of what they decided)"
                .to_owned(),
        });
        kept.push(Kept {
            what: "tombstones".to_owned(),
            why: "one SHA-256 per forgotten fact (never its words), so it is not proposed again"
                .to_owned(),
        });
        let mut receipt = ForgetReceipt {
            dry_run,
            by: who.person().to_owned(),
            at: now,
            notes: note_items,
            proposals: proposal_items,
            index_entries: rowids.len(),
            vectors,
            tombstones: hashes.len(),
            kept,
        };
        if dry_run {
            return Ok(receipt);
        }
        let tombstoned = files.tombstoned()?;
        for h in &hashes {
            if !tombstoned.contains(h) {
                files.tombstone(&Tombstone {
                    hash: h.clone(),
                    reason: "forgotten".to_owned(),
                    at: now,
                    by: who.person().to_owned(),
                })?;
            }
        }
        for i in receipt.notes.iter().chain(&receipt.proposals) {
            match std::fs::remove_file(&i.path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(&i.path, &e)),
            }
        }
        let removed =
            index.remove_files(&notes.values().map(|r| r.file.clone()).collect::<Vec<_>>())?;
        receipt.index_entries = removed.len();
        if let Ok(v) = self.memory_vectors() {
            v.remove(&removed)?;
        }
        files.sweep();
        // Audited before the index is compacted: the notes are gone whatever that says.
        self.memory_audit(
            who.person(),
            "memory.forgotten",
            Risk::Medium,
            &json!({
                "selector": match selector {
                    ForgetSelector::Id(id) => json!({ "by": "id", "value": id }),
                    // A subject or words would keep what was forgotten: only the kind.
                    ForgetSelector::Subject(_) => json!({ "by": "subject" }),
                    ForgetSelector::Query(_) => json!({ "by": "query" }),
                },
                "notes": receipt.notes.iter().map(|i| &i.id).collect::<Vec<_>>(),
                "proposals": receipt.proposals.iter().map(|i| &i.id).collect::<Vec<_>>(),
                "hashes": hashes,
                "index_entries": receipt.index_entries,
                "vectors": receipt.vectors,
            }),
        );
        index.compact()?;
        Ok(receipt)
    }

    /// How many proposals wait and how many notes are indexed.
    pub fn memory_counts(&self) -> Result<(usize, u64), MemoryError> {
        let files = self.memory_files();
        let (list, over) = Files::list(&files.inbox(), MAX_INBOX * 2)?;
        Ok((list.len() + over, self.memory_index()?.count()?))
    }
}
