//! `docs-index.db`: every document under the roots cut into passages (the same ~1,800-character
//! chunks with 200 overlap as [`Steward::search_doc`]) in an FTS5 table, for `docs.search_all`.
//! Derived: built from `files.db`'s list and `docs.db`'s extractions by [`Steward::index_docs`]
//! (an unchanged file, by its SHA-256, is skipped; a gone one is removed), one document per
//! transaction so memory holds one document at a time. A search returns only passages that hold
//! a word of the question (BM25), never the nearest ones.

use std::path::{Path, PathBuf};

use rusqlite::params;
use serde::Serialize;

use super::{DocError, Extracted, MAX_QUERY_CHARS, read};
use crate::{
    Limits, Steward,
    store::{Database, Migration, OpenOptions, Schema, StoreError},
};

const SCHEMA: Schema = Schema {
    name: "docs-index",
    migrations: &[Migration {
        version: 1,
        name: "docs_index",
        sql: include_str!("../../migrations/docs-index/001_docs_index.sql"),
    }],
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
    /// BM25 score (higher is better).
    pub score: f32,
    /// The words around the first match.
    pub snippet: String,
    /// Reads on from the passage (with `docs.read` on `path`).
    pub cursor: String,
}

/// The passages found across the documents, best first.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DocsHits {
    /// The passages.
    pub hits: Vec<DocsHit>,
    /// Passages holding a word of the question, in all (at most 500 counted).
    pub matched: usize,
}

/// One passage as the search query returns it.
struct HitRow {
    path: String,
    sha: String,
    unit_kind: String,
    unit: i64,
    name: Option<String>,
    start: i64,
    text: String,
    score: f64,
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
        let rows: Vec<HitRow> = index.db.read(|c| {
            let mut stmt = c
                .prepare(
                    "SELECT c.path, f.sha256, f.unit, c.unit, c.name, c.start, c.text,
                            bm25(chunks_fts)
                     FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid
                     JOIN doc_files f ON f.path = c.path
                     WHERE chunks_fts MATCH ?1 ORDER BY bm25(chunks_fts) LIMIT 500",
                )
                .map_err(q("prepare search"))?;
            let rows = stmt
                .query_map([fts_query(&terms)], |r| {
                    Ok(HitRow {
                        path: r.get(0)?,
                        sha: r.get(1)?,
                        unit_kind: r.get(2)?,
                        unit: r.get(3)?,
                        name: r.get(4)?,
                        start: r.get(5)?,
                        text: r.get(6)?,
                        score: r.get(7)?,
                    })
                })
                .map_err(q("search"))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(q("search row"))
        })?;
        let matched = rows.len();
        let mut per_doc: std::collections::HashMap<String, usize> = Default::default();
        let mut hits = Vec::new();
        for HitRow { path, sha, unit_kind, unit, name, start, text, score } in rows {
            if hits.len() >= limit {
                break;
            }
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
                score: -(score as f32),
                snippet: read::snippet(&text, &terms),
                cursor: read::cursor(
                    &sha,
                    usize::try_from(unit).unwrap_or(0),
                    usize::try_from(start).unwrap_or(0),
                ),
            });
        }
        Ok(DocsHits { hits, matched })
    }
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
