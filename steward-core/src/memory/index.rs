//! `memory-index/index.db`: the accepted notes as last read from their files, with BM25 over
//! their facts. Derived: reconcile brings it in line with the files, and dropping it loses
//! nothing.

use std::{collections::HashMap, path::Path};

use rusqlite::{OptionalExtension as _, params};

use super::{
    MemoryError,
    note::{MemoryKind, Note, NoteMeta},
};
use crate::{
    Limits,
    store::{Database, Migration, OpenOptions, Schema, StoreError},
};

const SCHEMA: Schema = Schema {
    name: "memory",
    migrations: &[Migration {
        version: 1,
        name: "memory",
        sql: include_str!("../../migrations/memory/001_memory.sql"),
    }],
};

/// Tries to truncate the index's log after a forget, 20 ms apart.
/// Fixed (not a setting).
const CHECKPOINT_TRIES: usize = 100;

/// Words a question has that say nothing about a fact (English and Italian).
const STOPWORDS: &[&str] = &[
    "a", "an", "the", "of", "at", "in", "on", "to", "for", "with", "and", "or", "is", "are", "was",
    "were", "be", "what", "when", "where", "who", "whom", "which", "how", "why", "do", "does",
    "did", "my", "me", "i", "you", "your", "it", "its", "that", "this", "about", "s", "il", "lo",
    "la", "le", "gli", "un", "una", "uno", "di", "da", "del", "della", "e", "che", "cosa",
    "quando", "dove", "chi", "come", "per", "con", "mio", "mia", "è",
];

/// The FTS5 query of `text`: its words that are not stopwords, each quoted, all required.
/// `None` when no word is left.
pub(crate) fn fts_query(text: &str) -> Option<String> {
    let folded = super::note::normalized(text);
    let mut words: Vec<&str> =
        folded.split(' ').filter(|w| !w.is_empty() && !STOPWORDS.contains(w)).take(16).collect();
    words.dedup();
    (!words.is_empty())
        .then(|| words.iter().map(|w| format!("\"{w}\"")).collect::<Vec<_>>().join(" "))
}

/// A note file as last indexed.
#[derive(Debug, Clone)]
pub(crate) struct Indexed {
    pub(crate) sha: String,
    pub(crate) size: i64,
    pub(crate) mtime_ns: i64,
    pub(crate) id: String,
}

/// One indexed note, as the index holds it.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) rowid: i64,
    pub(crate) file: String,
    pub(crate) note: Note,
}

/// What a search asks of the index.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter<'a> {
    pub(crate) kinds: &'a [MemoryKind],
    pub(crate) subject: Option<&'a str>,
    /// Unix seconds: notes valid and known then; `None` is now, excluding superseded notes.
    pub(crate) as_of: Option<i64>,
    pub(crate) now: i64,
}

#[derive(Debug)]
pub(crate) struct MemoryIndex {
    db: Database,
}

fn ts(t: Option<chrono::DateTime<chrono::Utc>>) -> Option<i64> {
    t.map(|t| t.timestamp())
}

impl MemoryIndex {
    pub(crate) fn open(home: &Path, limits: &Limits) -> Result<Self, MemoryError> {
        let dir = home.join(super::INDEX_DIR);
        std::fs::create_dir_all(&dir)
            .map_err(|e| MemoryError::Io(format!("{}: {e}", dir.display())))?;
        let path = dir.join("index.db");
        let db =
            Database::open(&path, &SCHEMA, OpenOptions::small_writes(limits).zeroing_deletes())?;
        crate::store::restrict_file(&path);
        Ok(Self { db })
    }

    /// The file state of every indexed note, by file name.
    pub(crate) fn files(&self) -> Result<HashMap<String, Indexed>, MemoryError> {
        Ok(self.db.read(|c| {
            let mut st = c
                .prepare_cached("SELECT file, file_sha, size, mtime_ns, id FROM notes")
                .map_err(|e| StoreError::query("prepare note files", e))?;
            let rows = st
                .query_map([], |r| {
                    Ok((
                        r.get(0)?,
                        Indexed {
                            sha: r.get(1)?,
                            size: r.get(2)?,
                            mtime_ns: r.get(3)?,
                            id: r.get(4)?,
                        },
                    ))
                })
                .map_err(|e| StoreError::query("note files", e))?;
            rows.collect::<Result<HashMap<_, _>, _>>()
                .map_err(|e| StoreError::query("note file", e))
        })?)
    }

    /// Replaces (or adds) the row of `file`. A note whose id another file already holds is
    /// refused (two files cannot be one note).
    pub(crate) fn upsert(
        &self,
        file: &str,
        file_sha: &str,
        size: i64,
        mtime_ns: i64,
        note: &Note,
    ) -> Result<(), MemoryError> {
        let m = &note.meta;
        let meta = serde_json::to_string(m).map_err(|e| MemoryError::BadNote(e.to_string()))?;
        let hash = super::note::content_hash(m.subject.as_deref(), &note.body);
        self.db.write(|tx| {
            let other: Option<String> = tx
                .query_row(
                    "SELECT file FROM notes WHERE id = ?1 AND file <> ?2",
                    params![m.id, file],
                    |r| r.get(0),
                )
                .optional()
                .map_err(|e| StoreError::query("note id owner", e))?;
            if let Some(other) = other {
                return Err(MemoryError::BadNote(format!(
                    "{file}: id {} is already the id of {other}",
                    m.id
                )));
            }
            tx.execute(
                "INSERT INTO notes (id, file, kind, subject, valid_from, valid_to, created,
                   superseded_at, content_hash, file_sha, size, mtime_ns, meta, body, known_at,
                   replaced_from)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
                 ON CONFLICT (file) DO UPDATE SET id = excluded.id, kind = excluded.kind,
                   subject = excluded.subject, valid_from = excluded.valid_from,
                   valid_to = excluded.valid_to, created = excluded.created,
                   known_at = excluded.known_at, replaced_from = excluded.replaced_from,
                   superseded_at = excluded.superseded_at, content_hash = excluded.content_hash,
                   file_sha = excluded.file_sha, size = excluded.size,
                   mtime_ns = excluded.mtime_ns, meta = excluded.meta, body = excluded.body",
                params![
                    m.id,
                    file,
                    m.kind.as_str(),
                    m.subject.as_deref().map(str::to_lowercase),
                    ts(m.valid_from),
                    ts(m.valid_to),
                    m.created.timestamp(),
                    ts(m.superseded_at),
                    hash,
                    file_sha,
                    size,
                    mtime_ns,
                    meta,
                    note.body,
                    m.review.as_ref().map_or(m.created, |r| r.at.max(m.created)).timestamp(),
                    ts(m.replaced_from)
                ],
            )
            .map_err(|e| StoreError::query("upsert note", e))?;
            Ok(())
        })
    }

    /// Drops the rows of `files`; returns the rowids dropped.
    pub(crate) fn remove_files(&self, files: &[String]) -> Result<Vec<i64>, MemoryError> {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        self.db.write(|tx| {
            let mut gone = Vec::new();
            for f in files {
                let rowid: Option<i64> = tx
                    .query_row("DELETE FROM notes WHERE file = ?1 RETURNING rowid", [f], |r| {
                        r.get(0)
                    })
                    .optional()
                    .map_err(|e| StoreError::query("delete note", e))?;
                gone.extend(rowid);
            }
            Ok(gone)
        })
    }

    /// Rewrites the full-text index without the deleted entries and checkpoints the file, so a
    /// forgotten note's words are in no page of it (freed pages are zeroed).
    pub(crate) fn compact(&self) -> Result<(), MemoryError> {
        self.db.write(|tx| {
            tx.execute("INSERT INTO notes_fts (notes_fts) VALUES ('optimize')", [])
                .map_err(|e| StoreError::query("optimize memory index", e))?;
            Ok::<_, MemoryError>(())
        })?;
        self.db.write_autocommit(|c| {
            c.execute_batch("VACUUM").map_err(|e| StoreError::query("vacuum memory index", e))?;
            // A reader in another thread or process holds the WAL's frames: wait for it (a
            // search takes milliseconds), so the frames that held the note are truncated.
            for _ in 0..CHECKPOINT_TRIES {
                let busy: i64 = c
                    .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
                    .map_err(|e| StoreError::query("wal_checkpoint", e))?;
                if busy == 0 {
                    return Ok(());
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(MemoryError::Io(
                "the memory index's log could not be truncated: a reader held it; forget again"
                    .to_owned(),
            ))
        })
    }

    fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
        let meta: String = r.get(2)?;
        let meta: NoteMeta = serde_json::from_str(&meta).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, Box::new(e))
        })?;
        Ok(Row { rowid: r.get(0)?, file: r.get(1)?, note: Note { meta, body: r.get(3)? } })
    }

    const COLUMNS: &'static str = "rowid, file, meta, body";

    /// The note of `id`.
    pub(crate) fn get(&self, id: &str) -> Result<Option<Row>, MemoryError> {
        Ok(self.db.read(|c| {
            c.query_row(
                &format!("SELECT {} FROM notes WHERE id = ?1", Self::COLUMNS),
                [id],
                Self::row,
            )
            .optional()
            .map_err(|e| StoreError::query("note", e))
        })?)
    }

    /// Notes by rowid (in no order).
    pub(crate) fn by_rowids(&self, rowids: &[i64]) -> Result<Vec<Row>, MemoryError> {
        let ids: Vec<rusqlite::types::Value> = rowids.iter().map(|r| (*r).into()).collect();
        Ok(self.db.read(|c| {
            let mut st = c
                .prepare_cached(&format!(
                    "SELECT {} FROM notes WHERE rowid IN rarray(?1)",
                    Self::COLUMNS
                ))
                .map_err(|e| StoreError::query("prepare notes", e))?;
            let rows = st
                .query_map([std::rc::Rc::new(ids)], Self::row)
                .map_err(|e| StoreError::query("notes", e))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(|e| StoreError::query("note row", e))
        })?)
    }

    /// Every note of `subject` (lowercase compared), current or not.
    pub(crate) fn of_subject(&self, subject: &str) -> Result<Vec<Row>, MemoryError> {
        Ok(self.db.read(|c| {
            let mut st = c
                .prepare_cached(&format!(
                    "SELECT {} FROM notes WHERE subject = ?1 ORDER BY created",
                    Self::COLUMNS
                ))
                .map_err(|e| StoreError::query("prepare subject", e))?;
            let rows = st
                .query_map([subject.to_lowercase()], Self::row)
                .map_err(|e| StoreError::query("subject", e))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(|e| StoreError::query("subject row", e))
        })?)
    }

    /// Notes holding a content hash.
    pub(crate) fn with_hash(&self, hash: &str) -> Result<Vec<Row>, MemoryError> {
        Ok(self.db.read(|c| {
            let mut st = c
                .prepare_cached(&format!(
                    "SELECT {} FROM notes WHERE content_hash = ?1",
                    Self::COLUMNS
                ))
                .map_err(|e| StoreError::query("prepare hash", e))?;
            let rows = st.query_map([hash], Self::row).map_err(|e| StoreError::query("hash", e))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(|e| StoreError::query("hash row", e))
        })?)
    }

    /// The texts to embed: every note's rowid and its subject and fact.
    pub(crate) fn embed_sources(&self) -> Result<Vec<(i64, String)>, MemoryError> {
        Ok(self.db.read(|c| {
            let mut st = c
                .prepare_cached("SELECT rowid, coalesce(subject, ''), body FROM notes")
                .map_err(|e| StoreError::query("prepare embed sources", e))?;
            let rows = st
                .query_map([], |r| {
                    let subject: String = r.get(1)?;
                    let body: String = r.get(2)?;
                    Ok((
                        r.get(0)?,
                        if subject.is_empty() { body } else { format!("{subject}: {body}") },
                    ))
                })
                .map_err(|e| StoreError::query("embed sources", e))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(|e| StoreError::query("embed source", e))
        })?)
    }

    /// Rowids of the notes matching `fts` under `filter`, best first (at most `limit`).
    pub(crate) fn lexical(
        &self,
        fts: &str,
        filter: &Filter<'_>,
        limit: usize,
    ) -> Result<Vec<i64>, MemoryError> {
        let (when, current) = match filter.as_of {
            Some(t) => (t, 0),
            None => (filter.now, 1),
        };
        let kinds = kinds_param(filter.kinds);
        Ok(self.db.read(|c| {
            let mut st = c
                .prepare_cached(
                    "SELECT n.rowid FROM notes_fts JOIN notes n ON n.rowid = notes_fts.rowid
                     WHERE notes_fts MATCH ?1
                       AND (?2 = '' OR instr(?2, char(31) || n.kind || char(31)) > 0)
                       AND (?3 IS NULL OR n.subject = ?3)
                       AND n.known_at <= ?4
                       AND (n.valid_from IS NULL OR n.valid_from <= ?4)
                       AND (n.valid_to IS NULL OR n.valid_to > ?4)
                       AND (n.superseded_at IS NULL OR (?5 = 0 AND n.superseded_at > ?4)
                            OR n.replaced_from > ?4)
                     ORDER BY bm25(notes_fts) LIMIT ?6",
                )
                .map_err(|e| StoreError::query("prepare memory search", e))?;
            let rows = st
                .query_map(
                    params![
                        fts,
                        kinds,
                        filter.subject.map(str::to_lowercase),
                        when,
                        current,
                        i64::try_from(limit).unwrap_or(100)
                    ],
                    |r| r.get(0),
                )
                .map_err(|e| StoreError::query("memory search", e))?;
            rows.collect::<Result<Vec<i64>, _>>().map_err(|e| StoreError::query("memory hit", e))
        })?)
    }

    /// Rowids of every note matching `fts`, superseded or not, whatever its validity.
    pub(crate) fn matching(&self, fts: &str, limit: usize) -> Result<Vec<i64>, MemoryError> {
        Ok(self.db.read(|c| {
            let mut st = c
                .prepare_cached("SELECT rowid FROM notes_fts WHERE notes_fts MATCH ?1 LIMIT ?2")
                .map_err(|e| StoreError::query("prepare memory match", e))?;
            let rows = st
                .query_map(params![fts, i64::try_from(limit).unwrap_or(1_000)], |r| r.get(0))
                .map_err(|e| StoreError::query("memory match", e))?;
            rows.collect::<Result<Vec<i64>, _>>()
                .map_err(|e| StoreError::query("memory match row", e))
        })?)
    }

    /// Which of `rowids` pass `filter`.
    pub(crate) fn passing(
        &self,
        rowids: &[i64],
        filter: &Filter<'_>,
    ) -> Result<Vec<i64>, MemoryError> {
        let (when, current) = match filter.as_of {
            Some(t) => (t, 0),
            None => (filter.now, 1),
        };
        let ids: Vec<rusqlite::types::Value> = rowids.iter().map(|r| (*r).into()).collect();
        let kinds = kinds_param(filter.kinds);
        let ok: Vec<i64> = self.db.read(|c| {
            let mut st = c
                .prepare_cached(
                    "SELECT n.rowid FROM notes n WHERE n.rowid IN rarray(?1)
                       AND (?2 = '' OR instr(?2, char(31) || n.kind || char(31)) > 0)
                       AND (?3 IS NULL OR n.subject = ?3)
                       AND n.known_at <= ?4
                       AND (n.valid_from IS NULL OR n.valid_from <= ?4)
                       AND (n.valid_to IS NULL OR n.valid_to > ?4)
                       AND (n.superseded_at IS NULL OR (?5 = 0 AND n.superseded_at > ?4)
                            OR n.replaced_from > ?4)",
                )
                .map_err(|e| StoreError::query("prepare memory filter", e))?;
            let rows = st
                .query_map(
                    params![
                        std::rc::Rc::new(ids),
                        kinds,
                        filter.subject.map(str::to_lowercase),
                        when,
                        current
                    ],
                    |r| r.get(0),
                )
                .map_err(|e| StoreError::query("memory filter", e))?;
            rows.collect::<Result<Vec<i64>, _>>()
                .map_err(|e| StoreError::query("memory filter row", e))
        })?;
        Ok(rowids.iter().copied().filter(|r| ok.contains(r)).collect())
    }

    /// Notes of the index (for a listing), newest first.
    pub(crate) fn count(&self) -> Result<u64, MemoryError> {
        Ok(self
            .db
            .read(|c| {
                c.query_row("SELECT count(*) FROM notes", [], |r| r.get::<_, i64>(0))
                    .map_err(|e| StoreError::query("count notes", e))
            })?
            .try_into()
            .unwrap_or(0))
    }
}

fn kinds_param(kinds: &[MemoryKind]) -> String {
    if kinds.is_empty() {
        String::new()
    } else {
        let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        format!("\u{1f}{}\u{1f}", names.join("\u{1f}"))
    }
}
