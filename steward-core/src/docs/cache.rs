//! `docs.db`: extractions cached by the SHA-256 of the file's bytes, and each path's last
//! (size, modification time, SHA-256), so that a file whose size and time have not moved is
//! answered without reading it, and a file touched but not changed is not extracted again.
//! Failures are cached too (a hostile file is refused once, not on every read), except
//! [`ExtractError::Busy`] and [`ExtractError::TimedOut`], which may be about the moment's load.
//! Outcomes are keyed by the bytes' SHA-256 with the readers' version and the bounds they ran
//! within ([`cache_key`]), so new readers or new bounds read a file again.

use std::path::Path;

use rusqlite::{OptionalExtension as _, params};
use serde::{Deserialize, Serialize};

use super::{ExtractError, Extracted};
use crate::{
    Limits,
    store::{Database, Migration, OpenOptions, Schema, StoreError},
};

const SCHEMA: Schema = Schema {
    name: "docs",
    migrations: &[
        Migration {
            version: 1,
            name: "docs",
            sql: include_str!("../../migrations/docs/001_docs.sql"),
        },
        Migration {
            version: 2,
            name: "stamp",
            sql: include_str!("../../migrations/docs/002_stamp.sql"),
        },
    ],
};

/// The cache key of the bytes `sha256` read within `limits` by readers of
/// [`super::READER_VERSION`].
pub fn cache_key(sha256: &str, limits: &super::ExtractLimits) -> String {
    format!(
        "{sha256}:v{}:{}:{}:{}:{}",
        super::READER_VERSION,
        limits.max_chars,
        limits.max_units,
        limits.max_unpacked_bytes,
        limits.max_cells
    )
}

/// A cached outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The text.
    Ok(Extracted),
    /// Why there is none.
    Err(ExtractError),
}

/// A path's state when it was last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    /// Its size, bytes.
    pub size: u64,
    /// Its modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Its inode (0 where the system has none).
    pub ino: u64,
    /// Its status-change time, nanoseconds since the epoch (0 where the system has none):
    /// nobody can set it back.
    pub ctime_ns: i64,
}

/// Paths whose stamp is remembered: those of the last this many first reads (a path read
/// again keeps its place); older ones are forgotten (and hashed again when read).
/// Fixed (not a setting).
pub const MAX_REMEMBERED_PATHS: i64 = 200_000;

/// The cache.
#[derive(Debug)]
pub struct DocCache {
    db: Database,
    /// Bytes of outcomes kept at most.
    budget: u64,
}

fn q(ctx: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::query(ctx, e)
}

impl DocCache {
    /// Opens (creating if needed) `<home>/docs.db`, bounded by `limits.docs_cache_mb`.
    pub fn open(home: &Path, limits: &Limits) -> Result<Self, StoreError> {
        let path = home.join("docs.db");
        let db = Database::open(&path, &SCHEMA, OpenOptions::small_writes(limits))?;
        crate::store::restrict_file(&path);
        Ok(Self { db, budget: limits.docs_cache_mb.saturating_mul(1024 * 1024) })
    }

    /// The SHA-256 `path` held when it had `stamp`, if it was read then.
    pub fn sha_of(&self, path: &Path, stamp: &Stamp) -> Result<Option<String>, StoreError> {
        let p = path.to_string_lossy();
        self.db.read(|c| {
            c.query_row(
                "SELECT sha256 FROM paths WHERE path = ?1 AND size = ?2 AND mtime_ns = ?3
                   AND ino = ?4 AND ctime_ns = ?5",
                params![
                    p,
                    crate::store::int(stamp.size),
                    stamp.mtime_ns,
                    crate::store::int(stamp.ino),
                    stamp.ctime_ns
                ],
                |r| r.get(0),
            )
            .optional()
            .map_err(q("path stamp"))
        })
    }

    /// The outcome cached for `sha256`, marked as just used.
    pub fn get(&self, sha256: &str) -> Result<Option<Outcome>, StoreError> {
        self.db.write(|tx| {
            let text: Option<String> = tx
                .query_row("SELECT outcome FROM extractions WHERE sha256 = ?1", [sha256], |r| {
                    r.get(0)
                })
                .optional()
                .map_err(q("cached extraction"))?;
            let Some(text) = text else { return Ok(None) };
            tx.execute(
                "UPDATE extractions SET used = (SELECT coalesce(max(used), 0) + 1 FROM extractions)
                 WHERE sha256 = ?1",
                [sha256],
            )
            .map_err(q("touch extraction"))?;
            // A row this version cannot read is as good as absent: it is extracted again.
            Ok(serde_json::from_str(&text).ok())
        })
    }

    /// Remembers that `path` with `stamp` holds the bytes `sha256`.
    pub fn remember(&self, path: &Path, stamp: &Stamp, sha256: &str) -> Result<(), StoreError> {
        let p = path.to_string_lossy();
        self.db.write(|tx| {
            tx.execute(
                "INSERT INTO paths (path, size, mtime_ns, sha256, ino, ctime_ns)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (path) DO UPDATE SET size = excluded.size,
                   mtime_ns = excluded.mtime_ns, sha256 = excluded.sha256,
                   ino = excluded.ino, ctime_ns = excluded.ctime_ns",
                params![
                    p,
                    crate::store::int(stamp.size),
                    stamp.mtime_ns,
                    sha256,
                    crate::store::int(stamp.ino),
                    stamp.ctime_ns
                ],
            )
            .map_err(q("path stamp"))?;
            tx.execute(
                "DELETE FROM paths WHERE rowid <= (SELECT max(rowid) FROM paths) - ?1",
                [MAX_REMEMBERED_PATHS],
            )
            .map_err(q("forget old paths"))?;
            Ok(())
        })
    }

    /// Stores `outcome` for `sha256` (not [`ExtractError::Busy`] or
    /// [`ExtractError::TimedOut`], which may be about the moment's load), then drops the least
    /// recently used outcomes until the cache fits its budget; an outcome larger than the
    /// whole budget is not kept.
    pub fn put(&self, sha256: &str, outcome: &Outcome) -> Result<(), StoreError> {
        if matches!(outcome, Outcome::Err(ExtractError::Busy | ExtractError::TimedOut { .. })) {
            return Ok(());
        }
        let text = serde_json::to_string(outcome).map_err(|e| StoreError::Query {
            context: "serialize an extraction",
            source: Box::new(e),
        })?;
        let len = text.len() as u64;
        if len > self.budget {
            return Ok(());
        }
        self.db.write(|tx| {
            tx.execute(
                "INSERT INTO extractions (sha256, outcome, bytes, used)
                 VALUES (?1, ?2, ?3, (SELECT coalesce(max(used), 0) + 1 FROM extractions))
                 ON CONFLICT (sha256) DO UPDATE SET outcome = excluded.outcome,
                   bytes = excluded.bytes, used = excluded.used",
                params![sha256, text, crate::store::int(len)],
            )
            .map_err(q("store extraction"))?;
            let mut total: i64 = tx
                .query_row("SELECT coalesce(sum(bytes), 0) FROM extractions", [], |r| r.get(0))
                .map_err(q("cache size"))?;
            let budget = crate::store::int(self.budget);
            while total > budget {
                let oldest: Option<(String, i64)> = tx
                    .query_row(
                        "SELECT sha256, bytes FROM extractions WHERE sha256 <> ?1
                         ORDER BY used LIMIT 1",
                        [sha256],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()
                    .map_err(q("oldest extraction"))?;
                let Some((sha, bytes)) = oldest else { break };
                tx.execute("DELETE FROM extractions WHERE sha256 = ?1", [&sha])
                    .map_err(q("evict extraction"))?;
                total -= bytes;
            }
            Ok(())
        })
    }

    /// Bytes of outcomes kept now, and how many.
    pub fn size(&self) -> Result<(u64, usize), StoreError> {
        self.db.read(|c| {
            c.query_row("SELECT coalesce(sum(bytes), 0), count(*) FROM extractions", [], |r| {
                Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as usize))
            })
            .map_err(q("cache size"))
        })
    }
}
