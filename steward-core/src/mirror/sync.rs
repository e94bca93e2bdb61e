//! The sync engine: scan → diff against `source_files` → parse changed files in parallel
//! (recent first) → apply in batches → drop vanished paths → soft-delete orphans.
//!
//! Backfill and reconcile are one algorithm: a first run (backfill) sees every file as new, a
//! later one (reconcile) only what changed. Re-running on an unchanged source writes nothing but
//! its `sync_runs` row.

use std::{
    collections::{BTreeSet, HashMap},
    sync::{
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    time::Instant,
};

use rusqlite::params;

use super::{
    Mirror, MirrorError,
    model::{FileError, MailSource, ParseLimits, ParsedMessage, SourceFile},
    stats::FileErrorRecord,
    writer::{self, IngestCache, PreparedFile, PreparedMessage, Tally, Writer, WriterConfig},
};
use crate::{
    error::StewardError,
    store::{StoreError, int},
    time::now_secs,
};

/// Changed files at or above which a run loads the existence filters.
/// Fixed (not a setting).
const FILTER_MIN_FILES: usize = 1_000;

/// Indexes that no ingest step reads, so a bulk load may drop and rebuild them. Each `sql` must
/// match the migration that created the index.
const DEFERRED_INDEXES: [(&str, &str); 4] = [
    (
        "message_addresses_address",
        "CREATE INDEX IF NOT EXISTS message_addresses_address ON message_addresses (address)",
    ),
    ("messages_date", "CREATE INDEX IF NOT EXISTS messages_date ON messages (date)"),
    ("attachments_sha", "CREATE INDEX IF NOT EXISTS attachments_sha ON attachments (sha256)"),
    (
        "message_paths_message",
        "CREATE INDEX IF NOT EXISTS message_paths_message ON message_paths (message_id)",
    ),
];

/// Which kind of run this was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncMode {
    /// The account had no files yet: an initial import, most recent files first.
    Backfill,
    /// A diff of paths and mtimes against what the mirror already holds.
    Reconcile,
}

impl SyncMode {
    fn as_str(self) -> &'static str {
        match self {
            Self::Backfill => "backfill",
            Self::Reconcile => "reconcile",
        }
    }
}

/// What to sync. No `Default`: the caller states the account.
#[derive(Debug, Clone)]
pub struct SyncOptions<'a> {
    /// The account the source belongs to; `None` uses the source's default name.
    pub account: Option<String>,
    /// Set to stop the run between batches (everything committed stays).
    pub cancel: Option<&'a AtomicBool>,
}

/// Where a running sync is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgressPhase {
    /// Listing files.
    Scanning,
    /// Parsing and applying changed files.
    Ingesting,
    /// Dropping vanished paths and soft-deleting orphans.
    Finishing,
}

/// A progress report, sent after every batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Progress {
    /// The phase.
    pub phase: ProgressPhase,
    /// Files to ingest in this run (changed or new).
    pub files_total: u64,
    /// Files ingested so far.
    pub files_done: u64,
}

/// The outcome of one sync.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SyncSummary {
    /// The `sync_runs` row of this run (derived indexes record the last run they reflect).
    pub run_id: i64,
    /// When the run started (Unix seconds); every message it wrote has `updated_at >=` this.
    pub started_at: i64,
    /// Whether the run changed the mirror at all.
    pub changed: bool,
    /// The account synced.
    pub account: String,
    /// The source format.
    pub format: String,
    /// Backfill or reconcile.
    pub mode: SyncMode,
    /// Files the scan found.
    pub files_scanned: u64,
    /// Files whose path, mtime and size were unchanged (skipped without parsing).
    pub files_unchanged: u64,
    /// New logical messages.
    pub added: u64,
    /// Existing messages whose content, flags, mailbox or deletion state changed.
    pub updated: u64,
    /// New physical copies of messages already mirrored (labels, All Mail, moved files).
    pub copies: u64,
    /// Messages re-read from a changed file that turned out identical.
    pub unchanged: u64,
    /// Physical paths that no longer exist.
    pub paths_removed: u64,
    /// Messages soft-deleted because their last path vanished.
    pub soft_deleted: u64,
    /// Soft-deleted messages that reappeared.
    pub restored: u64,
    /// Threads of the account after the run.
    pub threads: u64,
    /// Files that could not be ingested in this run (exact count).
    pub error_count: u64,
    /// The first of them (bounded by `Limits::max_errors_listed`).
    pub errors: Vec<FileErrorRecord>,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Messages read (added, updated, copies, unchanged) per second of the whole run.
    pub messages_per_second: f64,
}

fn validate_account(name: &str) -> Result<(), MirrorError> {
    let bad =
        |reason: &str| MirrorError::InvalidInput { field: "account", reason: reason.to_owned() };
    if name.trim().is_empty() {
        return Err(bad("must not be empty"));
    }
    if name.chars().count() > 200 {
        return Err(bad("longer than 200 characters"));
    }
    if name.chars().any(char::is_control) {
        return Err(bad("contains control characters"));
    }
    Ok(())
}

impl Mirror {
    /// Converges the mirror with `source`: new and changed files are parsed and applied (most
    /// recent first), vanished paths are dropped and messages without any path are soft-deleted.
    pub fn sync(
        &self,
        source: &dyn MailSource,
        opts: &SyncOptions<'_>,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<SyncSummary, MirrorError> {
        let account = opts.account.clone().unwrap_or_else(|| source.default_account());
        validate_account(&account)?;
        let span = tracing::info_span!("ingest", account = %account, format = source.format(), root = %source.root().display());
        let _guard = span.enter();
        let started = Instant::now();
        let now = now_secs();

        progress(&Progress { phase: ProgressPhase::Scanning, files_total: 0, files_done: 0 });
        let scanned = source.scan()?;
        tracing::info!(files = scanned.len(), "scanned");

        let (account_id, known, interrupted) = self.db.write(|tx| {
            let id = writer::ensure_account(tx, &account, now)?;
            // A run that never recorded its end may have crashed before settling soft deletes
            // and attribution; this run settles them even if no file changed since.
            let interrupted: bool = tx
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM sync_runs WHERE account_id = ?1 AND finished_at IS NULL)",
                    [id],
                    |r| r.get(0),
                )
                .map_err(|e| StoreError::query("find interrupted runs", e))?;
            let mut stmt = tx
                .prepare("SELECT path, mtime_ns, size FROM source_files WHERE account_id = ?1")
                .map_err(|e| StoreError::query("load source files", e))?;
            let rows = stmt
                .query_map([id], |r| {
                    Ok((r.get::<_, String>(0)?, (r.get::<_, i64>(1)?, r.get::<_, i64>(2)?)))
                })
                .map_err(|e| StoreError::query("load source files", e))?;
            let mut known = HashMap::new();
            for r in rows {
                let (p, v) = r.map_err(|e| StoreError::query("read source file", e))?;
                known.insert(p, v);
            }
            Ok::<_, MirrorError>((id, known, interrupted))
        })?;
        let mode = if known.is_empty() { SyncMode::Backfill } else { SyncMode::Reconcile };

        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut changed: Vec<&SourceFile> = Vec::new();
        let mut unchanged_files = 0u64;
        let mut paths: Vec<String> = Vec::with_capacity(scanned.len());
        for f in &scanned {
            paths.push(f.path.to_string_lossy().into_owned());
        }
        for (f, p) in scanned.iter().zip(&paths) {
            seen.insert(p.as_str());
            match known.get(p.as_str()) {
                Some(&(mtime, size))
                    if mtime == f.mtime_ns && u64::try_from(size).ok() == Some(f.size) =>
                {
                    unchanged_files += 1;
                }
                _ => changed.push(f),
            }
        }
        let vanished: Vec<&String> = known.keys().filter(|p| !seen.contains(p.as_str())).collect();
        // Recent first, then by path, so that runs are deterministic.
        changed.sort_by(|a, b| b.mtime_ns.cmp(&a.mtime_ns).then_with(|| a.path.cmp(&b.path)));

        let run_id: i64 = self.db.write(|tx| {
            tx.query_row(
                "INSERT INTO sync_runs (account_id, mode, started_at, files_scanned, files_total)
                 VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id",
                params![account_id, mode.as_str(), now, int(scanned.len()), int(changed.len())],
                |r| r.get(0),
            )
            .map_err(|e| StoreError::query("insert sync run", e))
        })?;

        let mut tally = Tally::default();
        let mut errors: Vec<FileErrorRecord> = Vec::new();
        let total = changed.len() as u64;
        let is_new = |p: &str| !known.contains_key(p);
        // A large import into a small mirror builds the lookup-only indexes once at the end
        // instead of updating them row by row (a sorted build is several times cheaper).
        let total_messages: i64 = self.db.read(|c| {
            c.query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
                .map_err(|e| StoreError::query("count messages", e))
        })?;
        let bulk = changed.len() >= self.limits.bulk_load_min_files
            && i64::try_from(changed.len()).unwrap_or(i64::MAX) >= total_messages;
        if bulk {
            self.db.write(|tx| {
                for (name, _) in DEFERRED_INDEXES {
                    tx.execute_batch(&format!("DROP INDEX IF EXISTS {name}"))
                        .map_err(|e| StoreError::query("drop deferred index", e))?;
                }
                Ok::<_, MirrorError>(())
            })?;
        }
        let ingested = self.ingest_changed(
            source,
            &account,
            (account_id, run_id),
            &changed,
            &is_new,
            opts,
            now,
            &mut tally,
            &mut errors,
            &mut |done| {
                progress(&Progress {
                    phase: ProgressPhase::Ingesting,
                    files_total: total,
                    files_done: done,
                });
            },
        );
        if bulk {
            self.ensure_indexes()?;
        }
        ingested?;

        progress(&Progress {
            phase: ProgressPhase::Finishing,
            files_total: total,
            files_done: total,
        });
        let cfg = self.writer_config();
        let mut cache = IngestCache::default();
        for chunk in vanished.chunks(self.limits.ingest_batch) {
            self.db.write(|tx| {
                let mut w = Writer::new(tx, account_id, &mut cache, cfg, now);
                for p in chunk {
                    tally.paths_removed += w.remove_file(p)?;
                }
                Ok::<_, MirrorError>(())
            })?;
            fail::fail_point!("mirror::after_vanished_batch", |_| std::process::abort());
        }

        let something_changed = !changed.is_empty() || !vanished.is_empty() || interrupted;
        let (soft_deleted, restored, threads) = self.db.write(|tx| {
            let (soft, restored) = if something_changed {
                finish_account(tx, account_id, now, cfg.max_participants)?
            } else {
                (0, 0)
            };
            let threads: i64 = tx
                .query_row("SELECT count(*) FROM threads WHERE account_id = ?1", [account_id], |r| r.get(0))
                .map_err(|e| StoreError::query("count threads", e))?;
            // Runs left unfinished by a crash are settled by this one.
            tx.execute(
                "UPDATE sync_runs SET finished_at = ?2 WHERE account_id = ?1 AND finished_at IS NULL AND id != ?3",
                params![account_id, now_secs(), run_id],
            )
            .map_err(|e| StoreError::query("close interrupted runs", e))?;
            tx.execute(
                "UPDATE sync_runs SET finished_at = ?2, added = ?3, updated = ?4, paths_removed = ?5,
                   soft_deleted = ?6, errors = ?7 WHERE id = ?1",
                params![run_id, now_secs(), int(tally.added), int(tally.updated), int(tally.paths_removed), int(soft), int(tally.errors)],
            )
            .map_err(|e| StoreError::query("finish sync run", e))?;
            Ok::<_, MirrorError>((soft, restored, threads))
        })?;

        if something_changed {
            self.db.checkpoint()?;
        }
        let seconds = started.elapsed().as_secs_f64();
        let summary = SyncSummary {
            run_id,
            started_at: now,
            changed: something_changed,
            account,
            format: source.format().to_owned(),
            mode,
            files_scanned: scanned.len() as u64,
            files_unchanged: unchanged_files,
            added: tally.added,
            updated: tally.updated,
            copies: tally.copies,
            unchanged: tally.unchanged,
            paths_removed: tally.paths_removed,
            soft_deleted,
            restored,
            threads: u64::try_from(threads).unwrap_or(0),
            error_count: tally.errors,
            errors,
            seconds,
            messages_per_second: if seconds > 0.0 {
                (tally.added + tally.updated + tally.copies + tally.unchanged) as f64 / seconds
            } else {
                0.0
            },
        };
        tracing::info!(
            added = summary.added,
            updated = summary.updated,
            errors = summary.error_count,
            seconds,
            "synced"
        );
        Ok(summary)
    }

    /// Creates any deferred index that is missing (after a bulk load, or after a crash during
    /// one).
    pub(crate) fn ensure_indexes(&self) -> Result<(), MirrorError> {
        // Read first: opening a home for a search must not take the write lock.
        let present: i64 = self.db.read(|c| {
            c.query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'index'
                 AND name IN (SELECT value FROM json_each(?1))",
                [serde_json::to_string(&DEFERRED_INDEXES.map(|(n, _)| n)).unwrap_or_default()],
                |r| r.get(0),
            )
            .map_err(|e| StoreError::query("deferred indexes present", e))
        })?;
        if usize::try_from(present).is_ok_and(|p| p == DEFERRED_INDEXES.len()) {
            return Ok(());
        }
        self.db.write(|tx| {
            for (_, sql) in DEFERRED_INDEXES {
                tx.execute_batch(sql).map_err(|e| StoreError::query("create deferred index", e))?;
            }
            Ok(())
        })
    }

    fn writer_config(&self) -> WriterConfig {
        WriterConfig {
            window_secs: self.limits.thread_subject_window_days * 86_400,
            max_participants: self.limits.max_thread_participants,
        }
    }

    /// Parses `changed` on worker threads (one batch ahead of the writer) and applies each batch
    /// in its own transaction.
    #[allow(clippy::too_many_arguments)]
    fn ingest_changed(
        &self,
        source: &dyn MailSource,
        account: &str,
        (account_id, run_id): (i64, i64),
        changed: &[&SourceFile],
        is_new: &dyn Fn(&str) -> bool,
        opts: &SyncOptions<'_>,
        now: i64,
        tally: &mut Tally,
        errors: &mut Vec<FileErrorRecord>,
        on_batch: &mut dyn FnMut(u64),
    ) -> Result<(), MirrorError> {
        let limits = ParseLimits::from(&self.limits);
        let threads = self.limits.effective_ingest_threads().max(1);
        let batch = self.limits.ingest_batch;
        let blobs = &self.blobs;
        let cfg = self.writer_config();
        let max_errors = self.limits.max_errors_listed;
        let mut cache = IngestCache::default();
        // Loading the filters reads every id of the account; worth it only for a large batch
        // of changes (a few new messages just query).
        if changed.len() >= FILTER_MIN_FILES {
            self.db.read(|c| cache.load_filters(c, account_id))?;
        }
        let mut done = 0u64;
        let stop = AtomicBool::new(false);
        let stop_ref = &stop;
        std::thread::scope(|scope| -> Result<(), MirrorError> {
            let (tx_batches, rx_batches) =
                mpsc::sync_channel::<Result<Vec<PreparedFile>, MirrorError>>(1);
            scope.spawn(move || {
                for chunk in changed.chunks(batch) {
                    if stop_ref.load(Ordering::Relaxed) {
                        break;
                    }
                    let prepared =
                        prepare_parallel(source, account, chunk, &limits, blobs, threads);
                    if tx_batches.send(prepared).is_err() {
                        break;
                    }
                }
            });
            let result = (|| {
                for prepared in rx_batches {
                    if opts.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                        return Err(MirrorError::Cancelled);
                    }
                    let prepared = prepared?;
                    let mut batch_tally = Tally::default();
                    let done_after = done + prepared.len() as u64;
                    self.db.write(|tx| {
                        let mut w = Writer::new(tx, account_id, &mut cache, cfg, now);
                        for pf in &prepared {
                            w.apply(pf, is_new(&pf.path), &mut batch_tally)?;
                            fail::fail_point!("mirror::after_file", |_| std::process::abort());
                        }
                        tx.execute(
                            "UPDATE sync_runs SET files_done = ?2 WHERE id = ?1",
                            params![run_id, int(done_after)],
                        )
                        .map_err(|e| StoreError::query("record sync progress", e))?;
                        fail::fail_point!("mirror::before_commit", |_| std::process::abort());
                        Ok::<_, MirrorError>(())
                    })?;
                    fail::fail_point!("mirror::after_commit", |_| std::process::abort());
                    tally.added += batch_tally.added;
                    tally.updated += batch_tally.updated;
                    tally.copies += batch_tally.copies;
                    tally.unchanged += batch_tally.unchanged;
                    tally.paths_removed += batch_tally.paths_removed;
                    tally.errors += batch_tally.errors;
                    for pf in &prepared {
                        if let Err(e) = &pf.result {
                            tracing::warn!(path = %pf.file.path.display(), code = e.code(), "file not ingested: {e}");
                            if errors.len() < max_errors {
                                errors.push(FileErrorRecord {
                                    path: pf.path.clone(),
                                    code: e.code().to_owned(),
                                    message: e.to_string(),
                                });
                            }
                        }
                    }
                    done = done_after;
                    on_batch(done);
                }
                Ok(())
            })();
            stop.store(true, Ordering::Relaxed);
            result
        })
    }
}

/// Parses a chunk of files on `threads` scoped threads, keeping the chunk's order, and stores
/// attachment bytes in the blob store.
fn prepare_parallel(
    source: &dyn MailSource,
    account: &str,
    chunk: &[&SourceFile],
    limits: &ParseLimits,
    blobs: &super::blobs::BlobStore,
    threads: usize,
) -> Result<Vec<PreparedFile>, MirrorError> {
    let per = chunk.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = chunk
            .chunks(per)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|f| prepare_one(source, account, f, limits, blobs))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut out = Vec::with_capacity(chunk.len());
        for h in handles {
            match h.join() {
                Ok(v) => out.extend(v),
                Err(p) => {
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".to_owned());
                    return Err(MirrorError::ParserPanicked(msg));
                }
            }
        }
        Ok(out)
    })
}

fn prepare_one(
    source: &dyn MailSource,
    account: &str,
    file: &SourceFile,
    limits: &ParseLimits,
    blobs: &super::blobs::BlobStore,
) -> PreparedFile {
    let mut messages = Vec::new();
    let mut blob_error: Option<FileError> = None;
    let mut each = |mut msg: ParsedMessage| {
        if blob_error.is_some() {
            return;
        }
        let mut shas = Vec::with_capacity(msg.attachments.len());
        for a in &mut msg.attachments {
            // The bytes go to the blob store now and are dropped: only the hash stays.
            match a.bytes.take().map(|bytes| blobs.put(&bytes)) {
                Some(Ok(sha)) => shas.push(Some(sha)),
                Some(Err(e)) => {
                    blob_error =
                        Some(FileError::Io { reason: format!("storing an attachment: {e}") });
                    return;
                }
                None => shas.push(None),
            }
        }
        messages.push(PreparedMessage::new(account, msg, shas));
    };
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        source.read(file, limits, &mut each)
    }))
    .unwrap_or_else(|_| {
        Err(FileError::NotMail { reason: "the parser failed on this file".to_owned() })
    });
    let result = match (read, blob_error) {
        (Err(e), _) | (Ok(()), Some(e)) => Err(e),
        (Ok(()), None) => Ok(messages),
    };
    PreparedFile { file: file.clone(), path: file.path.to_string_lossy().into_owned(), result }
}

/// Soft-deletes messages with no remaining path, restores ones that have a path again, moves
/// attribution off mailboxes that no longer hold a copy, and recomputes the threads touched.
fn finish_account(
    tx: &rusqlite::Transaction<'_>,
    account_id: i64,
    now: i64,
    max_participants: usize,
) -> Result<(u64, u64), MirrorError> {
    let q = |c: &'static str| move |e| StoreError::query(c, e);
    let mut dirty: BTreeSet<i64> = BTreeSet::new();
    {
        let mut stmt = tx
            .prepare(
                "SELECT DISTINCT thread_id FROM messages m WHERE account_id = ?1 AND (
                   (deleted_at IS NULL AND NOT EXISTS (SELECT 1 FROM message_paths p WHERE p.message_id = m.id))
                   OR (deleted_at IS NOT NULL AND EXISTS (SELECT 1 FROM message_paths p WHERE p.message_id = m.id)))",
            )
            .map_err(q("prepare dirty threads"))?;
        let rows = stmt.query_map([account_id], |r| r.get(0)).map_err(q("dirty threads"))?;
        for r in rows {
            dirty.insert(r.map_err(q("dirty thread"))?);
        }
    }
    let soft = tx
        .execute(
            "UPDATE messages SET deleted_at = ?2, updated_at = ?2 WHERE account_id = ?1 AND deleted_at IS NULL
               AND NOT EXISTS (SELECT 1 FROM message_paths p WHERE p.message_id = messages.id)",
            params![account_id, now],
        )
        .map_err(q("soft delete"))?;
    let restored = tx
        .execute(
            "UPDATE messages SET deleted_at = NULL, updated_at = ?2 WHERE account_id = ?1 AND deleted_at IS NOT NULL
               AND EXISTS (SELECT 1 FROM message_paths p WHERE p.message_id = messages.id)",
            params![account_id, now],
        )
        .map_err(q("restore"))?;
    tx.execute(
        "UPDATE messages SET mailbox_id = (
            SELECT p.mailbox_id FROM message_paths p JOIN mailboxes b ON b.id = p.mailbox_id
            WHERE p.message_id = messages.id ORDER BY (b.role = 'all_mail'), p.file_id LIMIT 1)
         WHERE account_id = ?1
           AND EXISTS (SELECT 1 FROM message_paths p WHERE p.message_id = messages.id)
           AND NOT EXISTS (SELECT 1 FROM message_paths p WHERE p.message_id = messages.id AND p.mailbox_id = messages.mailbox_id)",
        [account_id],
    )
    .map_err(q("reattribute"))?;
    for t in dirty {
        writer::recompute_thread(tx, t, max_participants)?;
    }
    fail::fail_point!("mirror::before_finish_commit", |_| std::process::abort());
    Ok((soft as u64, restored as u64))
}
