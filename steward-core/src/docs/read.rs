//! Reading a document in windows and searching inside it, over its cached extraction.
//!
//! A cursor names the document's bytes (the first 16 hex digits of their SHA-256), the unit and
//! the byte offset in that unit's text: a file changed since the cursor was made is a typed
//! error ([`DocError::StaleCursor`]), never a window from other text.

use std::{
    io::Read as _,
    path::{Path, PathBuf},
    sync::Arc,
};

use serde::Serialize;
use sha2::Digest as _;

use super::{
    CHUNK_CHARS, CHUNK_OVERLAP, DEFAULT_DOC_HITS, DEFAULT_READ_CHARS, DocKind, ExtractError,
    ExtractLimits, Extracted, MAX_DOC_HITS, MAX_QUERY_CHARS, MAX_READ_CHARS, MIN_READ_CHARS,
    SNIPPET_CHARS, UnitKind,
    cache::{Outcome, Stamp},
};
use crate::{
    Steward,
    error::{ErrorKind, StewardError},
    paths::PathError,
    store::StoreError,
};

/// Why a document cannot be read or searched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DocError {
    /// The path is refused (outside the roots, a secret, not a file).
    #[error(transparent)]
    Path(#[from] PathError),
    /// The file could not be read.
    #[error("{path}: {reason}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        reason: String,
    },
    /// The file gave no text.
    #[error("{path}: {source}")]
    Extract {
        /// The file.
        path: PathBuf,
        /// Why.
        source: ExtractError,
    },
    /// The file has no text layer (a scan, an empty document): there is nothing to read.
    #[error("{path}: the {kind} has no text ({units} {unit}s without any; a scan needs OCR)")]
    NoText {
        /// The file.
        path: PathBuf,
        /// Its kind.
        kind: &'static str,
        /// Its pages, slides or sheets.
        units: usize,
        /// What they are.
        unit: &'static str,
    },
    /// The cursor was made for other bytes: the file changed since.
    #[error("the document changed since this cursor was made: read it again from the start")]
    StaleCursor,
    /// The cursor is not one this reader made.
    #[error("not a cursor of this document: {0}")]
    BadCursor(String),
    /// A question that cannot be asked (a bound, an empty question).
    #[error("{0}")]
    BadQuery(String),
    /// No document reader is installed on this handle.
    #[error("no document reader is installed (open the home with steward-connectors)")]
    NoReader,
    /// The cache failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The list of the shared folders' files failed (no roots, its store).
    #[error(transparent)]
    Files(#[from] crate::files::FileStoreError),
}

impl StewardError for DocError {
    fn code(&self) -> &'static str {
        match self {
            Self::Path(e) => e.code(),
            Self::Io { .. } => "DOCS_IO",
            Self::Extract { source, .. } => source.code(),
            Self::NoText { .. } => "DOCS_NO_TEXT",
            Self::StaleCursor => "DOCS_CURSOR_STALE",
            Self::BadCursor(_) => "DOCS_BAD_CURSOR",
            Self::BadQuery(_) => "DOCS_BAD_QUERY",
            Self::NoReader => "DOCS_NO_READER",
            Self::Store(e) => e.code(),
            Self::Files(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Path(e) => e.kind(),
            Self::Io { .. } => ErrorKind::NotFound,
            Self::Extract { source, .. } => source.kind(),
            Self::NoText { .. } => ErrorKind::NotFound,
            Self::StaleCursor => ErrorKind::Conflict,
            Self::BadCursor(_) | Self::BadQuery(_) => ErrorKind::InvalidInput,
            Self::NoReader => ErrorKind::Unavailable,
            Self::Store(e) => e.kind(),
            Self::Files(e) => e.kind(),
        }
    }
}

/// What a document is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct DocInfo {
    /// Its path (canonical).
    pub path: PathBuf,
    /// Its kind.
    pub kind: DocKind,
    /// What a reader moves through.
    pub unit: UnitKind,
    /// How many pages, slides, sheets or parts.
    pub units: usize,
    /// The sheets' names (at most 100), for spreadsheets.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// Its size, bytes.
    pub size: u64,
    /// When it was last modified (Unix seconds).
    pub modified: i64,
    /// Its title, when the file names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The SHA-256 of its bytes (hex).
    pub fingerprint: String,
    /// Characters of text.
    pub chars: usize,
    /// Whether it has any text (a scanned PDF has none).
    pub has_text: bool,
    /// Whether the text stopped at a bound.
    pub truncated: bool,
    /// Whether the text came from the cache (nothing was extracted).
    pub from_cache: bool,
}

/// One window of a document's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct DocWindow {
    /// The document.
    pub info: DocInfo,
    /// The text, each page, slide or sheet begun with its marker (`[page 3]`).
    pub text: String,
    /// The unit the window starts in (1-based).
    pub first_unit: usize,
    /// The unit it ends in (1-based).
    pub last_unit: usize,
    /// Where the next window starts, when the document goes on.
    pub next_cursor: Option<String>,
}

/// One passage of a document that matches a question.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DocHit {
    /// Its page, slide, sheet or part (1-based).
    pub unit: usize,
    /// The sheet's name, for spreadsheets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit_name: Option<String>,
    /// BM25 score (higher is better; 0 for a passage found by meaning only).
    pub score: f32,
    /// Its rank by words (1 is best), when the words found it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lexical_rank: Option<u32>,
    /// Its rank by meaning (1 is best), when an embedder found it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector_rank: Option<u32>,
    /// The words around the first match (the passage's start when only its meaning matched).
    pub snippet: String,
    /// Reads on from the passage's start.
    pub cursor: String,
}

/// The passages of a document that match a question, best first.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DocHits {
    /// The document.
    pub info: DocInfo,
    /// Passages of about [`CHUNK_CHARS`] characters the document was cut into.
    pub chunks: usize,
    /// How many hold a word of the question.
    pub matched: usize,
    /// The best passages by words and meaning, fused (see [`super::semantic`]).
    pub hits: Vec<DocHit>,
    /// How the meaning side went.
    pub semantic: super::semantic::SemanticReport,
}

/// A document's extraction, loaded.
struct Loaded {
    path: PathBuf,
    size: u64,
    modified: i64,
    sha256: String,
    doc: Arc<Prepared>,
    from_cache: bool,
}

/// Most documents kept prepared in memory (text and passage index) for repeated reads.
/// Fixed (not a setting).
pub const MAX_MEMO_DOCS: usize = 8;
/// Most bytes kept prepared in memory over those documents: their text counted three times
/// (the text and its passage index).
/// Fixed (not a setting).
pub const MAX_MEMO_BYTES: usize = 64 * 1024 * 1024;

/// A document's text, with its passage index built on first search.
#[derive(Debug)]
pub(crate) struct Prepared {
    doc: Extracted,
    bytes: usize,
    index: std::sync::OnceLock<ChunkIndex>,
    /// Passage vectors, filled by searches with an embedder (at most
    /// [`super::semantic::MAX_SEMANTIC_CHUNKS`] of one dimension).
    vectors: std::sync::Mutex<super::semantic::ChunkVectors>,
}

impl std::ops::Deref for Prepared {
    type Target = Extracted;
    fn deref(&self) -> &Extracted {
        &self.doc
    }
}

impl Prepared {
    fn new(doc: Extracted) -> Self {
        // The passage index, built on the first search, is counted as twice the text, and the
        // passages' vectors (a search with an embedder) as 256 of 1,024 dimensions.
        let vectors = super::semantic::MAX_SEMANTIC_CHUNKS * 1024 * 4;
        let bytes = doc
            .units
            .iter()
            .map(|u| u.text.len())
            .sum::<usize>()
            .saturating_mul(3)
            .saturating_add(vectors);
        Self { doc, bytes, index: std::sync::OnceLock::new(), vectors: Default::default() }
    }

    fn index(&self) -> &ChunkIndex {
        self.index.get_or_init(|| ChunkIndex::build(&self.doc))
    }
}

/// The documents last read, most recent last, within [`MAX_MEMO_DOCS`] and
/// [`MAX_MEMO_BYTES`].
#[derive(Debug, Default)]
pub(crate) struct Memo {
    docs: std::sync::Mutex<std::collections::VecDeque<(String, Arc<Prepared>)>>,
}

impl Memo {
    fn get(&self, sha: &str) -> Option<Arc<Prepared>> {
        let mut d = self.docs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let i = d.iter().position(|(s, _)| s == sha)?;
        let e = d.remove(i)?;
        let p = Arc::clone(&e.1);
        d.push_back(e);
        Some(p)
    }

    fn put(&self, sha: &str, doc: Extracted) -> Arc<Prepared> {
        let p = Arc::new(Prepared::new(doc));
        if p.bytes > MAX_MEMO_BYTES {
            return p;
        }
        let mut d = self.docs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        d.retain(|(s, _)| s != sha);
        d.push_back((sha.to_owned(), Arc::clone(&p)));
        while d.len() > MAX_MEMO_DOCS
            || d.iter().map(|(_, p)| p.bytes).sum::<usize>() > MAX_MEMO_BYTES
        {
            d.pop_front();
        }
        p
    }
}

impl Loaded {
    fn info(&self) -> DocInfo {
        let e = &self.doc;
        DocInfo {
            path: self.path.clone(),
            kind: e.kind,
            unit: e.kind.unit(),
            units: e.units.len(),
            names: if e.kind.unit() == UnitKind::Sheet {
                e.units.iter().take(100).map(|u| u.name.clone().unwrap_or_default()).collect()
            } else {
                Vec::new()
            },
            size: self.size,
            modified: self.modified,
            title: e.title.clone(),
            fingerprint: self.sha256.clone(),
            chars: e.chars(),
            has_text: e.has_text(),
            truncated: e.truncated,
            from_cache: self.from_cache,
        }
    }

    fn no_text(&self) -> DocError {
        DocError::NoText {
            path: self.path.clone(),
            kind: self.doc.kind.as_str(),
            units: self.doc.units.len(),
            unit: self.doc.kind.unit().as_str(),
        }
    }
}

fn stamp_of(meta: &std::fs::Metadata) -> Stamp {
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    #[cfg(unix)]
    let (ino, ctime_ns) = {
        use std::os::unix::fs::MetadataExt as _;
        (meta.ino(), meta.ctime().saturating_mul(1_000_000_000).saturating_add(meta.ctime_nsec()))
    };
    #[cfg(not(unix))]
    let (ino, ctime_ns) = (0, 0);
    Stamp { size: meta.len(), mtime_ns, ino, ctime_ns }
}

/// Guards `path`, then answers from the cache or extracts (and caches) its text.
fn load(steward: &Steward, path: &Path) -> Result<Loaded, DocError> {
    let reader = steward.extractor().ok_or(DocError::NoReader)?;
    let path = steward.guard_path(path)?;
    let io = |e: std::io::Error| DocError::Io { path: path.clone(), reason: e.to_string() };
    let meta = std::fs::metadata(&path).map_err(io)?;
    // Not a FIFO, a device or a folder: opening a FIFO would wait for a writer forever.
    if !meta.is_file() {
        return Err(DocError::Path(PathError::NotAFile {
            path: path.clone(),
            why: "it is not a regular file".to_owned(),
        }));
    }
    let limits = ExtractLimits::of(steward.limits());
    if meta.len() > limits.max_bytes {
        return Err(DocError::Extract {
            path: path.clone(),
            source: ExtractError::TooLarge {
                what: format!("the file ({} bytes)", meta.len()),
                limit: format!("{} bytes ([limits] max_document_bytes)", limits.max_bytes),
            },
        });
    }
    let stamp = stamp_of(&meta);
    let modified = stamp.mtime_ns / 1_000_000_000;
    let cache = steward.doc_cache()?;
    let memo = steward.doc_memo();
    let loaded = |sha256: String, doc: Arc<Prepared>, from_cache: bool| Loaded {
        path: path.clone(),
        size: stamp.size,
        modified,
        sha256,
        doc,
        from_cache,
    };
    let done = |sha256: String, outcome: Outcome, from_cache: bool| match outcome {
        Outcome::Ok(doc) => {
            let doc = memo.put(&super::cache::cache_key(&sha256, &limits), doc);
            Ok(loaded(sha256, doc, from_cache))
        }
        Outcome::Err(source) => Err(DocError::Extract { path: path.clone(), source }),
    };
    let key = |sha: &str| super::cache::cache_key(sha, &limits);
    if let Some(sha) = cache.sha_of(&path, &stamp)? {
        if let Some(doc) = memo.get(&key(&sha)) {
            return Ok(loaded(sha, doc, true));
        }
        if let Some(outcome) = cache.get(&key(&sha))? {
            return done(sha, outcome, true);
        }
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0).min(1 << 26));
    let mut open = std::fs::OpenOptions::new();
    open.read(true);
    // Non-blocking: a FIFO swapped in after the check must not hold the reader forever.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut open,
        rustix::fs::OFlags::NONBLOCK.bits() as i32,
    );
    let file = open.open(&path).map_err(io)?;
    // What was opened is what was checked (not something swapped in since).
    let opened = file.metadata().map_err(io)?;
    if !opened.is_file() || stamp_of(&opened) != stamp {
        return Err(DocError::Io {
            path: path.clone(),
            reason: "it changed while it was opened: try again".to_owned(),
        });
    }
    file.take(limits.max_bytes.saturating_add(1)).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limits.max_bytes {
        return Err(DocError::Extract {
            path: path.clone(),
            source: ExtractError::TooLarge {
                what: "the file (it grew while read)".to_owned(),
                limit: format!("{} bytes ([limits] max_document_bytes)", limits.max_bytes),
            },
        });
    }
    let sha = hex(&sha2::Sha256::digest(&bytes));
    // The path's stamp is remembered only when the file did not change while it was read:
    // else the next read hashes it again rather than trust a stamp of other bytes.
    if std::fs::metadata(&path).map(|m| stamp_of(&m)).ok().as_ref() == Some(&stamp) {
        cache.remember(&path, &stamp, &sha)?;
    }
    if let Some(doc) = memo.get(&key(&sha)) {
        return Ok(loaded(sha, doc, true));
    }
    if let Some(outcome) = cache.get(&key(&sha))? {
        return done(sha, outcome, true);
    }
    let outcome = match super::extract_bounded(&reader, &path, Arc::from(bytes), &limits) {
        Ok(e) => Outcome::Ok(super::normalize::normalize(e)),
        Err(e) => Outcome::Err(e),
    };
    cache.put(&key(&sha), &outcome)?;
    done(sha, outcome, false)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The cursor of `unit` (0-based) at byte `offset` of the document `sha256`.
pub(crate) fn cursor(sha256: &str, unit: usize, offset: usize) -> String {
    format!("{}.{unit}.{offset}", sha256.get(..16).unwrap_or(sha256))
}

/// Where `cursor` points in `l`.
fn position(l: &Loaded, cursor: &str) -> Result<(usize, usize), DocError> {
    let bad = || DocError::BadCursor(cursor.chars().take(64).collect());
    let mut parts = cursor.split('.');
    let (Some(fp), Some(u), Some(o), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    if fp.len() != 16 || !fp.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    if !l.sha256.starts_with(fp) {
        return Err(DocError::StaleCursor);
    }
    let (u, o): (usize, usize) = (u.parse().map_err(|_| bad())?, o.parse().map_err(|_| bad())?);
    let unit = l.doc.units.get(u).ok_or_else(bad)?;
    if o > unit.text.len() || !unit.text.is_char_boundary(o) {
        return Err(bad());
    }
    Ok((u, o))
}

/// The marker that begins unit `u` (0-based) in a window, none for one flowing text.
fn marker(doc: &Extracted, u: usize, continued: bool) -> Option<String> {
    let kind = doc.kind.unit();
    if kind == UnitKind::Part && doc.units.len() == 1 {
        return None;
    }
    let label = match (kind, &doc.units[u].name) {
        (UnitKind::Sheet, Some(n)) => format!("sheet {} \"{n}\"", u + 1),
        (k, _) => format!("{} {}", k.as_str(), u + 1),
    };
    Some(if continued { format!("[{label}, continued]\n") } else { format!("[{label}]\n") })
}

/// The byte length of the first `n` characters of `s` (all of it when shorter).
fn prefix_bytes(s: &str, n: usize) -> usize {
    s.char_indices().nth(n).map_or(s.len(), |(i, _)| i)
}

/// `s[..end]` cut back to the last whitespace, when one lies in its second half.
fn cut_at_space(s: &str, end: usize) -> usize {
    match s[..end].rfind(char::is_whitespace) {
        Some(i) if i > end / 2 => i + 1,
        _ => end,
    }
}

impl Steward {
    /// Bytes and count of the outcomes `docs.db` caches now.
    pub fn doc_cache_size(&self) -> Result<(u64, usize), DocError> {
        Ok(self.doc_cache()?.size()?)
    }

    /// What the document at `path` is (see [`DocInfo`]); extracts it on first use.
    pub fn doc_info(&self, path: &Path) -> Result<DocInfo, DocError> {
        Ok(load(self, path)?.info())
    }

    /// A window of at most `chars` characters (default [`DEFAULT_READ_CHARS`], between
    /// [`MIN_READ_CHARS`] and [`MAX_READ_CHARS`]) of the document at `path`, from `cursor`
    /// (else its start).
    /// `page` (from 1) starts at a page, slide or sheet instead; it and `cursor_at` exclude
    /// each other.
    pub fn read_doc(
        &self,
        path: &Path,
        cursor_at: Option<&str>,
        page: Option<usize>,
        chars: Option<usize>,
    ) -> Result<DocWindow, DocError> {
        if cursor_at.is_some() && page.is_some() {
            return Err(DocError::BadQuery("a cursor or a page, not both".to_owned()));
        }
        let chars = chars.unwrap_or(DEFAULT_READ_CHARS);
        if !(MIN_READ_CHARS..=MAX_READ_CHARS).contains(&chars) {
            return Err(DocError::BadQuery(format!(
                "chars {chars}: between {MIN_READ_CHARS} and {MAX_READ_CHARS}"
            )));
        }
        let l = load(self, path)?;
        if !l.doc.has_text() {
            return Err(l.no_text());
        }
        let (mut u, mut off) = match (cursor_at, page) {
            (Some(c), _) => position(&l, c)?,
            (None, Some(p)) if p == 0 || p > l.doc.units.len() => {
                return Err(DocError::BadQuery(format!(
                    "{} {p}: the document has {} {}s",
                    l.doc.kind.unit().as_str(),
                    l.doc.units.len(),
                    l.doc.kind.unit().as_str()
                )));
            }
            (None, Some(p)) => (p - 1, 0),
            (None, None) => (0, 0),
        };
        let doc = &l.doc;
        let first_unit = u + 1;
        let mut budget = chars;
        let mut text = String::new();
        while u < doc.units.len() && budget > 0 {
            if let Some(m) = marker(doc, u, off > 0) {
                let n = m.chars().count();
                if n >= budget && !text.is_empty() {
                    break;
                }
                // A marker (at most a capped sheet name long) never eats the first window
                // whole: every window moves on.
                budget = budget.saturating_sub(n).max(if text.is_empty() { 1 } else { 0 });
                text.push_str(&m);
            }
            let rest = &doc.units[u].text[off..];
            let end = prefix_bytes(rest, budget);
            if end < rest.len() {
                let end = cut_at_space(rest, end);
                text.push_str(&rest[..end]);
                off += end;
                budget = 0;
            } else {
                text.push_str(rest);
                budget = budget.saturating_sub(rest.chars().count());
                u += 1;
                off = 0;
                if u < doc.units.len() && budget > 0 {
                    text.push_str("\n\n");
                    budget = budget.saturating_sub(2);
                }
            }
        }
        let done = u >= doc.units.len();
        Ok(DocWindow {
            last_unit: if done || off == 0 { u.max(first_unit) } else { u + 1 },
            first_unit,
            text,
            next_cursor: (!done).then(|| cursor(&l.sha256, u, off)),
            info: l.info(),
        })
    }

    /// The passages of the document at `path` that match `query`, best first, at most `limit`
    /// (default [`DEFAULT_DOC_HITS`], at most [`MAX_DOC_HITS`]): BM25 over every chunk of about
    /// [`CHUNK_CHARS`] characters and, with an embedder, meaning over at most
    /// [`super::semantic::MAX_SEMANTIC_CHUNKS`] of them, fused by rank (see
    /// [`super::semantic`]). A passage neither holds a word of the question nor comes
    /// within the embedder's distance is never returned.
    pub fn search_doc(
        &self,
        path: &Path,
        query: &str,
        limit: Option<usize>,
    ) -> Result<DocHits, DocError> {
        let limit = limit.unwrap_or(DEFAULT_DOC_HITS);
        if !(1..=MAX_DOC_HITS).contains(&limit) {
            return Err(DocError::BadQuery(format!("limit {limit}: between 1 and {MAX_DOC_HITS}")));
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(DocError::BadQuery(format!(
                "the question is longer than {MAX_QUERY_CHARS} characters"
            )));
        }
        let terms = query_terms(query);
        if terms.is_empty() {
            return Err(DocError::BadQuery("the question has no words".to_owned()));
        }
        let l = load(self, path)?;
        if !l.doc.has_text() {
            return Err(l.no_text());
        }
        let index = l.doc.index();
        let chunks = &index.chunks;
        let text_of = |i: usize| {
            let c = &chunks[i];
            &l.doc.units[c.unit].text[c.start..c.end]
        };
        let scored = index.score(&terms);
        let matched = scored.len();
        let bm25: std::collections::HashMap<usize, f32> = scored.iter().copied().collect();
        let lexical: Vec<usize> =
            scored.iter().take(super::semantic::LEXICAL_CANDIDATES).map(|(i, _)| *i).collect();
        let (vector, semantic) = super::semantic::rank(
            self.embedder_ref(),
            &l.doc.vectors,
            chunks.len(),
            text_of,
            query,
        );
        let hits = super::semantic::fuse(&lexical, &vector)
            .into_iter()
            .take(limit)
            .map(|f| {
                let c = &chunks[f.chunk];
                DocHit {
                    unit: c.unit + 1,
                    unit_name: l.doc.units[c.unit].name.clone(),
                    score: bm25.get(&f.chunk).copied().unwrap_or(0.0),
                    lexical_rank: f.lexical,
                    vector_rank: f.vector,
                    snippet: snippet(text_of(f.chunk), &terms),
                    cursor: cursor(&l.sha256, c.unit, c.start),
                }
            })
            .collect();
        Ok(DocHits { chunks: chunks.len(), matched, hits, info: l.info(), semantic })
    }
}

/// The distinct terms of a question.
pub(crate) fn query_terms(query: &str) -> Vec<String> {
    let mut t = tokens(&crate::docs::normalize::clean(query, false));
    t.sort();
    t.dedup();
    t.truncate(super::MAX_QUERY_TERMS);
    t
}

/// The passages of `doc` as (unit, start, end) byte ranges.
pub(crate) fn chunk_ranges(doc: &Extracted) -> Vec<(usize, usize, usize)> {
    chunks(doc).into_iter().map(|c| (c.unit, c.start, c.end)).collect()
}

/// The extraction of `path` for the index: its SHA-256 and text, or the code of why not.
pub(crate) fn load_for_index(
    steward: &Steward,
    path: &Path,
) -> Result<(String, Extracted), (bool, String)> {
    match load(steward, path) {
        Ok(l) => Ok((l.sha256, l.doc.doc.clone())),
        Err(e) => {
            // Busy and a timeout are about the moment: the index keeps what it had.
            let passing = matches!(
                e,
                DocError::Extract {
                    source: ExtractError::Busy | ExtractError::TimedOut { .. },
                    ..
                } | DocError::Io { .. }
                    | DocError::Store(_)
            );
            Err((passing, e.code().to_owned()))
        }
    }
}

/// The SHA-256 `path` held when last read, if its stamp has not moved since (nothing is read).
pub(crate) fn known_sha(steward: &Steward, path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    steward.doc_cache().ok()?.sha_of(path, &stamp_of(&meta)).ok()?
}

/// One passage: a byte range of a unit's text.
#[derive(Debug)]
struct Chunk {
    unit: usize,
    start: usize,
    end: usize,
}

/// Each unit cut into passages of about [`CHUNK_CHARS`] characters, neighbours sharing
/// [`CHUNK_OVERLAP`], cut at spaces where one is near.
fn chunks(doc: &Extracted) -> Vec<Chunk> {
    let mut out = Vec::new();
    for (u, unit) in doc.units.iter().enumerate() {
        let t = &unit.text;
        let mut start = 0;
        while start < t.len() {
            let rest = &t[start..];
            let mut end = prefix_bytes(rest, CHUNK_CHARS);
            if end < rest.len() {
                end = cut_at_space(rest, end);
            }
            out.push(Chunk { unit: u, start, end: start + end });
            if start + end >= t.len() {
                break;
            }
            // Step back by the overlap, to a character boundary and a word start.
            let step_chars = rest[..end].chars().count().saturating_sub(CHUNK_OVERLAP).max(1);
            let mut next = start + prefix_bytes(rest, step_chars);
            if let Some(sp) = t[next..start + end].find(char::is_whitespace) {
                next += sp + 1;
            }
            start = next.max(start + 1);
            while !t.is_char_boundary(start) {
                start += 1;
            }
        }
    }
    out
}

/// Whether `c` is written without spaces between words (each is a term of its own).
fn unspaced(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF
        | 0x20000..=0x2FFFF)
}

/// The terms of `text`: lowercase words, and each CJK character alone.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if unspaced(c) {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            out.push(c.to_string());
        } else if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        } else if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// A document's passages as an inverted index for BM25.
#[derive(Debug)]
pub(crate) struct ChunkIndex {
    chunks: Vec<Chunk>,
    /// Term → (chunk, occurrences in it).
    postings: std::collections::HashMap<String, Vec<(u32, u32)>>,
    /// Terms per chunk.
    lens: Vec<u32>,
    avg: f32,
}

impl ChunkIndex {
    fn build(doc: &Extracted) -> Self {
        let chunks = chunks(doc);
        let mut postings: std::collections::HashMap<String, Vec<(u32, u32)>> = Default::default();
        let mut lens = Vec::with_capacity(chunks.len());
        for (i, c) in chunks.iter().enumerate() {
            let toks = tokens(&doc.units[c.unit].text[c.start..c.end]);
            lens.push(u32::try_from(toks.len()).unwrap_or(u32::MAX));
            let mut tf: std::collections::HashMap<String, u32> = Default::default();
            for t in toks {
                *tf.entry(t).or_default() += 1;
            }
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            for (t, n) in tf {
                postings.entry(t).or_default().push((i, n));
            }
        }
        let avg = lens.iter().map(|&l| l as f32).sum::<f32>() / (lens.len().max(1) as f32);
        Self { chunks, postings, lens, avg }
    }

    /// The chunks holding a term, with their BM25 score, best first (ties: earlier first).
    fn score(&self, terms: &[String]) -> Vec<(usize, f32)> {
        const K1: f32 = 1.2;
        const B: f32 = 0.75;
        let n = self.chunks.len() as f32;
        let mut scores: std::collections::HashMap<u32, f32> = Default::default();
        for t in terms {
            let Some(post) = self.postings.get(t) else { continue };
            let df = post.len() as f32;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(c, tf) in post {
                let len = self.lens[c as usize] as f32;
                let tf = tf as f32;
                *scores.entry(c).or_default() +=
                    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / self.avg.max(1.0)));
            }
        }
        let mut scored: Vec<(usize, f32)> =
            scores.into_iter().filter(|(_, s)| *s > 0.0).map(|(c, s)| (c as usize, s)).collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored
    }
}

/// About [`SNIPPET_CHARS`] characters of `text` around the first term found.
pub(crate) fn snippet(text: &str, terms: &[String]) -> String {
    let lower = text.to_lowercase();
    // Lowercasing can change lengths: positions are mapped back by character count.
    let at_chars = terms
        .iter()
        .filter_map(|t| lower.find(t.as_str()).map(|i| lower[..i].chars().count()))
        .min()
        .unwrap_or(0);
    let total = text.chars().count();
    let start = at_chars.saturating_sub(SNIPPET_CHARS / 3);
    let s: String = text.chars().skip(start).take(SNIPPET_CHARS).collect();
    let s = s.replace('\n', " ");
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.push_str(s.trim());
    if start + SNIPPET_CHARS < total {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docs::Unit;

    #[test]
    fn tokens_split_words_and_cjk() {
        assert_eq!(
            tokens("Notice-period: 30 Tage, 日本語"),
            ["notice", "period", "30", "tage", "日", "本", "語"]
        );
    }

    #[test]
    fn chunks_cover_the_text_and_overlap() {
        let text: String = (0..2000).map(|i| format!("w{i} ")).collect();
        let doc = Extracted {
            kind: DocKind::Text,
            title: None,
            units: vec![Unit { name: None, text: text.trim().to_owned() }],
            truncated: false,
        };
        let cs = chunks(&doc);
        assert!(cs.len() > 5);
        assert_eq!(cs[0].start, 0);
        assert_eq!(cs.last().unwrap().end, doc.units[0].text.len());
        for w in cs.windows(2) {
            assert!(w[1].start < w[0].end, "neighbours overlap");
            assert!(w[1].start > w[0].start, "chunks move on");
        }
        for c in &cs {
            assert!(doc.units[0].text[c.start..c.end].chars().count() <= CHUNK_CHARS);
        }
    }
}
