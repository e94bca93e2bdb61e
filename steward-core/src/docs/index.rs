//! `docs-index.db`: every document under the roots cut into passages (the same ~1,800-character
//! chunks with 200 overlap as [`Steward::search_doc`]) in an FTS5 table, for `docs.search_all`.
//! Derived: built from `files.db`'s list and `docs.db`'s extractions by [`Steward::index_docs`]
//! (an unchanged file, by its SHA-256, is skipped; a gone one is removed), one document per
//! transaction so memory holds one document at a time.
//!
//! With an embedder, each run also gives passages without a vector one (at most
//! [`MAX_EMBED_PER_RUN`] per run, in batches of [`super::semantic::DOC_EMBED_BATCH`]; the rest
//! wait for the next run, and a failing embedder stops the pass until then), and a search fuses
//! the BM25 ranking with the passages nearest in meaning, by rank, as mail does: only passages
//! within the embedder's `max_distance` count, so a question about something no document holds
//! finds nothing by meaning.

use std::path::{Path, PathBuf};

use rusqlite::{OptionalExtension as _, params};
use serde::Serialize;

use super::{DocError, Extracted, MAX_QUERY_CHARS, read};
use crate::{
    Limits, Steward,
    store::{Database, Migration, OpenOptions, Schema, StoreError},
};

const SCHEMA: Schema = Schema {
    name: "docs-index",
    migrations: &[
        Migration {
            version: 1,
            name: "docs_index",
            sql: include_str!("../../migrations/docs-index/001_docs_index.sql"),
        },
        Migration {
            version: 2,
            name: "chunk_vectors",
            sql: include_str!("../../migrations/docs-index/002_chunk_vectors.sql"),
        },
    ],
};

/// The extensions indexed (what the readers read).
pub const INDEXED_EXTENSIONS: &[&str] = &[
    "pdf", "docx", "pptx", "xlsx", "odt", "ods", "odp", "html", "htm", "md", "markdown", "rtf",
    "txt", "text", "csv", "eml",
];
/// Most documents one index holds.
/// Fixed (not a setting).
pub const MAX_INDEXED_DOCS: usize = 100_000;
/// Most passages one search returns.
/// Fixed (not a setting).
pub const MAX_ALL_HITS: usize = 50;
/// Passages one search returns when the question does not say.
/// Fixed (not a setting).
pub const DEFAULT_ALL_HITS: usize = 10;
/// Most passages of one document among a search's results (others fill the rest).
/// Fixed (not a setting).
pub const MAX_HITS_PER_DOC: usize = 3;
/// Most passages one indexing run gives a vector (the rest wait for the next run).
/// Fixed (not a setting).
pub const MAX_EMBED_PER_RUN: usize = 2_048;
/// Most passage vectors one search compares with the question.
/// Fixed (not a setting).
pub const MAX_SCANNED_VECTORS: usize = 200_000;
/// Most passages the BM25 ranking across documents hands to the fusion.
/// Fixed (not a setting).
pub const MAX_LEXICAL_ROWS: usize = 500;

/// The store.
#[derive(Debug)]
pub struct DocIndex {
    db: Database,
}

fn q(ctx: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::query(ctx, e)
}

impl DocIndex {
    /// Opens (creating if needed) `<home>/docs-index.db`.
    pub fn open(home: &Path, limits: &Limits) -> Result<Self, StoreError> {
        let path = home.join("docs-index.db");
        let db = Database::open(&path, &SCHEMA, OpenOptions::small_writes(limits))?;
        crate::store::restrict_file(&path);
        Ok(Self { db })
    }
}

/// What one indexing run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct DocsIndexReport {
    /// Documents under the roots (by extension).
    pub documents: usize,
    /// Extracted and indexed now (new or changed).
    pub indexed: usize,
    /// Unchanged since the last run (skipped).
    pub unchanged: usize,
    /// Gone from the roots, removed.
    pub removed: usize,
    /// Passages in the index now.
    pub chunks: usize,
    /// Documents that gave no text, with why (a code), at most 1,000 listed.
    pub failed: Vec<(PathBuf, String)>,
    /// Failed in all.
    pub failed_total: usize,
    /// Whether the run was stopped before every document was looked at.
    pub cancelled: bool,
    /// The passages' vectors (`None` without an embedder).
    pub vectors: Option<DocsEmbedReport>,
}

/// What one run did for the passages' vectors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct DocsEmbedReport {
    /// Passages given a vector now.
    pub embedded: usize,
    /// Passages still without one (the next run goes on).
    pub pending: usize,
    /// Whether the embedder failed (the pass stopped there).
    pub failed: bool,
}

/// What one pass over the shared folders did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SharedFoldersReport {
    /// The walk of the folders into `files.db`.
    pub files: crate::files::FilesReport,
    /// The documents' passages (`None` without a document reader).
    pub documents: Option<DocsIndexReport>,
}

/// How far an indexing run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocsIndexProgress {
    /// Documents looked at.
    pub done: usize,
    /// Documents in all.
    pub total: usize,
}

/// One passage found across the documents.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DocsHit {
    /// The document.
    pub path: PathBuf,
    /// Its page, slide, sheet or part (1-based).
    pub unit: usize,
    /// What units are (`page`).
    pub unit_kind: String,
    /// The sheet's name.
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
    /// Reads on from the passage (with `docs.read` on `path`).
    pub cursor: String,
}

/// The passages found across the documents, best first.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DocsHits {
    /// The passages.
    pub hits: Vec<DocsHit>,
    /// Passages holding a word of the question, in all (at most [`MAX_LEXICAL_ROWS`] counted).
    pub matched: usize,
    /// How the meaning side went: `selected` counts the indexed passages, `embedded` those
    /// with a vector of the embedder's space.
    pub semantic: super::semantic::SemanticReport,
}

/// One passage as the search query returns it.
struct HitRow {
    id: i64,
    path: String,
    sha: String,
    unit_kind: String,
    unit: i64,
    name: Option<String>,
    start: i64,
    text: String,
    score: Option<f64>,
}

/// The FTS5 query of `terms`: each a quoted string, any of them.
fn fts_query(terms: &[String]) -> String {
    terms.iter().map(|t| format!("\"{}\"", t.replace('"', "\"\""))).collect::<Vec<_>>().join(" OR ")
}

impl Steward {
    fn doc_index(&self) -> Result<&DocIndex, StoreError> {
        self.open_once(&self.docs_index, || DocIndex::open(self.home(), self.limits()))
    }

    /// Brings `docs-index.db` up to date with the documents `files.db` lists under the roots
    /// (walk them first: [`Steward::index_files`]), calling `progress` after each document.
    /// A raised `cancel` stops it between documents (what was indexed stays).
    pub fn index_docs(
        &self,
        cancel: Option<&std::sync::atomic::AtomicBool>,
        progress: &mut dyn FnMut(DocsIndexProgress),
    ) -> Result<DocsIndexReport, DocError> {
        let files = self.file_store()?.with_extensions(INDEXED_EXTENSIONS, MAX_INDEXED_DOCS)?;
        let index = self.doc_index()?;
        let known: std::collections::HashMap<String, String> = index.db.read(|c| {
            let mut stmt =
                c.prepare("SELECT path, sha256 FROM doc_files").map_err(q("prepare known"))?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(q("known"))?;
            rows.collect::<Result<_, _>>().map_err(q("known row"))
        })?;
        let mut report = DocsIndexReport { documents: files.len(), ..DocsIndexReport::default() };
        let listed: std::collections::HashSet<String> =
            files.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        let gone: Vec<&String> = known.keys().filter(|k| !listed.contains(*k)).collect();
        index.db.write(|tx| {
            for g in &gone {
                tx.execute("DELETE FROM chunks WHERE path = ?1", [g]).map_err(q("gone chunks"))?;
                tx.execute("DELETE FROM doc_files WHERE path = ?1", [g]).map_err(q("gone file"))?;
            }
            Ok::<_, StoreError>(())
        })?;
        report.removed = gone.len();
        let total = files.len();
        for (done, path) in files.iter().enumerate() {
            if cancel.is_some_and(|c| c.load(std::sync::atomic::Ordering::SeqCst)) {
                report.cancelled = true;
                break;
            }
            let key = path.to_string_lossy().into_owned();
            // Unchanged since it was indexed (its stamp still names the same bytes): not read.
            if known.get(&key).is_some_and(|k| read::known_sha(self, path).as_ref() == Some(k)) {
                report.unchanged += 1;
                progress(DocsIndexProgress { done: done + 1, total });
                continue;
            }
            match read::load_for_index(self, path) {
                Ok((sha, doc)) => {
                    if known.get(&key) == Some(&sha) {
                        report.unchanged += 1;
                    } else {
                        write_doc(index, &key, &sha, &doc, "ok")?;
                        report.indexed += 1;
                    }
                }
                Err((passing, code)) => {
                    // A lasting failure replaces what was indexed; a passing one leaves it.
                    if !passing {
                        let empty = Extracted {
                            kind: super::DocKind::Text,
                            title: None,
                            units: Vec::new(),
                            truncated: false,
                        };
                        write_doc(index, &key, "", &empty, &code)?;
                    }
                    report.failed_total += 1;
                    if report.failed.len() < 1_000 {
                        report.failed.push((path.clone(), code));
                    }
                }
            }
            progress(DocsIndexProgress { done: done + 1, total });
        }
        report.chunks = index.db.read(|c| {
            c.query_row("SELECT count(*) FROM chunks", [], |r| r.get::<_, i64>(0))
                .map_err(q("count chunks"))
        })? as usize;
        if let Some(e) = self.embedder_ref()
            && !report.cancelled
        {
            report.vectors = Some(embed_chunks(index, e, MAX_EMBED_PER_RUN, cancel)?);
        }
        Ok(report)
    }

    /// Walks the shared folders into `files.db` ([`Steward::index_files`]), then, when a
    /// document reader is installed, brings the documents' passages up to date
    /// ([`Steward::index_docs`]): what `steward index files`, the `files-index` job and the
    /// bindings run.
    pub fn index_shared_folders(
        &self,
        cancel: Option<&std::sync::atomic::AtomicBool>,
        progress: &mut dyn FnMut(DocsIndexProgress),
    ) -> Result<SharedFoldersReport, DocError> {
        let files = self.index_files()?;
        let documents =
            if self.reads_documents() { Some(self.index_docs(cancel, progress)?) } else { None };
        Ok(SharedFoldersReport { files, documents })
    }

    /// The passages of the indexed documents that hold words of `query`, best first, at most
    /// [`MAX_HITS_PER_DOC`] per document, at most `limit` (default [`DEFAULT_ALL_HITS`], at
    /// most [`MAX_ALL_HITS`]); only documents still inside the roots are answered.
    pub fn search_docs(&self, query: &str, limit: Option<usize>) -> Result<DocsHits, DocError> {
        let limit = limit.unwrap_or(DEFAULT_ALL_HITS);
        if !(1..=MAX_ALL_HITS).contains(&limit) {
            return Err(DocError::BadQuery(format!("limit {limit}: between 1 and {MAX_ALL_HITS}")));
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(DocError::BadQuery(format!(
                "the question is longer than {MAX_QUERY_CHARS} characters"
            )));
        }
        let terms = read::query_terms(query);
        if terms.is_empty() {
            return Err(DocError::BadQuery("the question has no words".to_owned()));
        }
        let index = self.doc_index()?;
        let mut rows: std::collections::HashMap<i64, HitRow> = Default::default();
        let lexical: Vec<i64> = index.db.read(|c| {
            let mut stmt = c
                .prepare(
                    "SELECT c.id, c.path, f.sha256, f.unit, c.unit, c.name, c.start, c.text,
                            bm25(chunks_fts)
                     FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid
                     JOIN doc_files f ON f.path = c.path
                     WHERE chunks_fts MATCH ?1 ORDER BY bm25(chunks_fts) LIMIT ?2",
                )
                .map_err(q("prepare search"))?;
            let found = stmt
                .query_map(params![fts_query(&terms), crate::store::int(MAX_LEXICAL_ROWS)], hit_row)
                .map_err(q("search"))?;
            let mut order = Vec::new();
            for row in found {
                let row = row.map_err(q("search row"))?;
                order.push(row.id);
                rows.insert(row.id, row);
            }
            Ok::<_, StoreError>(order)
        })?;
        let matched = lexical.len();
        let (vector, semantic) = nearest(index, self.embedder_ref(), query)?;
        // Passages found by meaning only are read now.
        let missing: Vec<i64> =
            vector.iter().copied().filter(|id| !rows.contains_key(id)).collect();
        index.db.read(|c| {
            let mut stmt = c
                .prepare_cached(
                    "SELECT c.id, c.path, f.sha256, f.unit, c.unit, c.name, c.start, c.text, NULL
                     FROM chunks c JOIN doc_files f ON f.path = c.path WHERE c.id = ?1",
                )
                .map_err(q("prepare passage"))?;
            for id in &missing {
                if let Some(row) = stmt.query_row([id], hit_row).optional().map_err(q("passage"))? {
                    rows.insert(row.id, row);
                }
            }
            Ok::<_, StoreError>(())
        })?;
        let mut per_doc: std::collections::HashMap<String, usize> = Default::default();
        let mut hits = Vec::new();
        for f in super::semantic::fuse(&lexical, &vector) {
            if hits.len() >= limit {
                break;
            }
            let Some(HitRow { path, sha, unit_kind, unit, name, start, text, score, .. }) =
                rows.remove(&f.chunk)
            else {
                continue;
            };
            let n = per_doc.entry(path.clone()).or_default();
            if *n >= MAX_HITS_PER_DOC {
                continue;
            }
            // A file outside the roots now (the config changed) is not answered.
            if self.guard_path(Path::new(&path)).is_err() {
                continue;
            }
            *n += 1;
            hits.push(DocsHit {
                path: PathBuf::from(&path),
                unit: usize::try_from(unit).unwrap_or(0) + 1,
                unit_kind,
                unit_name: name,
                // bm25() is lower for better matches.
                score: score.map_or(0.0, |s| -(s as f32)),
                lexical_rank: f.lexical,
                vector_rank: f.vector,
                snippet: read::snippet(&text, &terms),
                cursor: read::cursor(
                    &sha,
                    usize::try_from(unit).unwrap_or(0),
                    usize::try_from(start).unwrap_or(0),
                ),
            });
        }
        Ok(DocsHits { hits, matched, semantic })
    }
}

fn hit_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<HitRow> {
    Ok(HitRow {
        id: r.get(0)?,
        path: r.get(1)?,
        sha: r.get(2)?,
        unit_kind: r.get(3)?,
        unit: r.get(4)?,
        name: r.get(5)?,
        start: r.get(6)?,
        text: r.get(7)?,
        score: r.get(8)?,
    })
}

fn vec_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bytes_vec(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Gives passages without a vector one, oldest first, at most `max`; another model's vectors
/// go first (another space), and a new dimension under the same model replaces the old ones.
fn embed_chunks(
    index: &DocIndex,
    e: &dyn crate::index::Embedder,
    max: usize,
    cancel: Option<&std::sync::atomic::AtomicBool>,
) -> Result<DocsEmbedReport, StoreError> {
    let model = e.model().to_owned();
    let mut report = DocsEmbedReport::default();
    let pending = |report: &mut DocsEmbedReport| -> Result<(), StoreError> {
        report.pending = index
            .db
            .read(|c| {
                c.query_row(
                    "SELECT count(*) FROM chunks c LEFT JOIN chunk_vectors v ON v.chunk_id = c.id
                     WHERE v.chunk_id IS NULL",
                    [],
                    |r| r.get::<_, i64>(0),
                )
                .map_err(q("passages without vectors"))
            })?
            .try_into()
            .unwrap_or(0);
        Ok(())
    };
    // The space: the configured dimension, else what a probe answers (a model that changed
    // its dimension under the same name is noticed even when nothing is waiting).
    let dim = match e.dimension() {
        Some(d) => d,
        None => match e.embed_query("dimension probe").ok().and_then(super::semantic::unit) {
            Some(v) => v.len(),
            None => {
                report.failed = true;
                pending(&mut report)?;
                return Ok(report);
            }
        },
    };
    index.db.write(|tx| {
        tx.execute(
            "DELETE FROM chunk_vectors WHERE model <> ?1 OR dim <> ?2",
            params![&model, crate::store::int(dim)],
        )
        .map_err(q("vectors of another space"))?;
        Ok::<_, StoreError>(())
    })?;
    let batch = e.batch_size().clamp(1, super::semantic::DOC_EMBED_BATCH);
    let mut after = 0_i64;
    let mut tried = 0;
    while tried < max && !cancel.is_some_and(|c| c.load(std::sync::atomic::Ordering::SeqCst)) {
        let take = batch.min(max - tried);
        let todo: Vec<(i64, String)> = index.db.read(|c| {
            let mut stmt = c
                .prepare_cached(
                    "SELECT c.id, c.text FROM chunks c
                     LEFT JOIN chunk_vectors v ON v.chunk_id = c.id
                     WHERE v.chunk_id IS NULL AND c.id > ?1 ORDER BY c.id LIMIT ?2",
                )
                .map_err(q("prepare passages to embed"))?;
            let rows = stmt
                .query_map(params![after, crate::store::int(take)], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(q("passages to embed"))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(q("passage to embed"))
        })?;
        let Some(last) = todo.last() else { break };
        after = last.0;
        tried += todo.len();
        let texts: Vec<&str> = todo.iter().map(|(_, t)| t.as_str()).collect();
        let vectors: Vec<Option<Vec<f32>>> = match e.embed(&texts) {
            Ok(v) if v.len() == todo.len() => v.into_iter().map(Some).collect(),
            // The endpoint refused this input: each passage alone, so one it cannot take
            // never holds back the others (that one stays without a vector, reported pending).
            Err(crate::index::EmbedError::Rejected(_)) => {
                texts.iter().map(|t| e.embed(&[*t]).ok().and_then(|mut v| v.pop())).collect()
            }
            _ => {
                report.failed = true;
                break;
            }
        };
        let good: Vec<(i64, Vec<f32>)> = todo
            .iter()
            .zip(vectors)
            .filter_map(|((id, _), v)| {
                v.and_then(super::semantic::unit).filter(|v| v.len() == dim).map(|v| (*id, v))
            })
            .collect();
        let written = index.db.write(|tx| {
            let mut ins = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO chunk_vectors (chunk_id, model, dim, vec)
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(q("prepare vector"))?;
            for (id, v) in &good {
                ins.execute(params![id, &model, crate::store::int(dim), vec_bytes(v)])
                    .map_err(q("vector"))?;
            }
            Ok::<_, StoreError>(good.len())
        })?;
        report.embedded += written;
    }
    pending(&mut report)?;
    Ok(report)
}

/// The passages nearest in meaning to `query` (within the embedder's distance, at most
/// [`super::semantic::SEMANTIC_CANDIDATES`]), best first, and how it went.
fn nearest(
    index: &DocIndex,
    embedder: Option<&dyn crate::index::Embedder>,
    query: &str,
) -> Result<(Vec<i64>, super::semantic::SemanticReport), StoreError> {
    use super::semantic::{SemanticReport, SemanticStatus};
    let total: usize = index
        .db
        .read(|c| {
            c.query_row("SELECT count(*) FROM chunks", [], |r| r.get::<_, i64>(0))
                .map_err(q("count chunks"))
        })?
        .try_into()
        .unwrap_or(0);
    let report = |status, embedded| SemanticReport { status, selected: total, embedded };
    let Some(e) = embedder else { return Ok((Vec::new(), report(SemanticStatus::Disabled, 0))) };
    // Nothing indexed: nothing to compare, and nothing failed.
    if total == 0 {
        return Ok((Vec::new(), report(SemanticStatus::Full, 0)));
    }
    let Some(qv) = e.embed_query(query).ok().and_then(super::semantic::unit) else {
        return Ok((Vec::new(), report(SemanticStatus::Unavailable, 0)));
    };
    let cutoff = e.max_distance();
    let (near, scanned) = index.db.read(|c| {
        let mut stmt = c
            .prepare_cached(
                "SELECT chunk_id, vec FROM chunk_vectors WHERE model = ?1 AND dim = ?2 LIMIT ?3",
            )
            .map_err(q("prepare vectors"))?;
        let rows = stmt
            .query_map(
                params![
                    e.model(),
                    crate::store::int(qv.len()),
                    crate::store::int(MAX_SCANNED_VECTORS)
                ],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)),
            )
            .map_err(q("vectors"))?;
        let mut near: Vec<(i64, f32)> = Vec::new();
        let mut scanned = 0;
        for row in rows {
            let (id, bytes) = row.map_err(q("vector row"))?;
            scanned += 1;
            let v = bytes_vec(&bytes);
            if v.len() != qv.len() {
                continue;
            }
            let d = 1.0 - v.iter().zip(&qv).map(|(a, b)| a * b).sum::<f32>();
            if d <= cutoff {
                near.push((id, d));
            }
        }
        Ok::<_, StoreError>((near, scanned))
    })?;
    let mut near = near;
    near.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    near.truncate(super::semantic::SEMANTIC_CANDIDATES);
    let status = if scanned == 0 {
        SemanticStatus::Unavailable
    } else if scanned >= MAX_SCANNED_VECTORS && scanned < total {
        SemanticStatus::Sampled
    } else if scanned < total {
        SemanticStatus::Partial
    } else {
        SemanticStatus::Full
    };
    Ok((near.into_iter().map(|(id, _)| id).collect(), report(status, scanned)))
}

/// Replaces the passages of `path` with those of `doc`.
fn write_doc(
    index: &DocIndex,
    path: &str,
    sha: &str,
    doc: &Extracted,
    outcome: &str,
) -> Result<(), StoreError> {
    let chunks = read::chunk_ranges(doc);
    index.db.write(|tx| {
        tx.execute("DELETE FROM chunks WHERE path = ?1", [path]).map_err(q("old chunks"))?;
        tx.execute(
            "INSERT INTO doc_files (path, sha256, kind, unit, outcome) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (path) DO UPDATE SET sha256 = excluded.sha256, kind = excluded.kind,
               unit = excluded.unit, outcome = excluded.outcome",
            params![path, sha, doc.kind.as_str(), doc.kind.unit().as_str(), outcome],
        )
        .map_err(q("doc file"))?;
        let mut ins = tx
            .prepare_cached(
                "INSERT INTO chunks (path, unit, name, start, text) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(q("prepare chunk"))?;
        for (u, start, end) in chunks {
            let unit = &doc.units[u];
            ins.execute(params![
                path,
                crate::store::int(u),
                unit.name,
                crate::store::int(start),
                &unit.text[start..end]
            ])
            .map_err(q("chunk"))?;
        }
        Ok(())
    })
}
