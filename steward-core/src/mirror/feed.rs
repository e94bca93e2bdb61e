//! What derived indexes read from the mirror: one record per live message, streamed.

use rusqlite::OptionalExtension;

use super::Mirror;
use crate::store::StoreError;

/// The indexable text of one live message.
#[derive(Debug, Clone, Copy)]
pub struct IndexableMessage<'a> {
    /// The message id.
    pub id: i64,
    /// The Date header (else the delivery time, else 0), Unix seconds.
    pub date: i64,
    /// Size of the RFC 822 message in bytes.
    pub size: i64,
    /// The subject.
    pub subject: &'a str,
    /// The body text held by the mirror.
    pub body: &'a str,
    /// Sender and recipient names and addresses, space separated.
    pub people: &'a str,
    /// The sender's name and address.
    pub from: &'a str,
    /// The `To` names and addresses, space separated.
    pub to: &'a str,
    /// The `Cc` names and addresses, space separated.
    pub cc: &'a str,
    /// Attachment names, space separated.
    pub attachments: &'a str,
}

/// How far a sync run is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct RunProgress {
    /// The `sync_runs` row.
    pub run_id: i64,
    /// The account synced.
    pub account: String,
    /// Unix seconds.
    pub started_at: i64,
    /// Unix seconds; absent while it runs (or if it died: see `status`).
    pub finished_at: Option<i64>,
    /// Files the run set out to ingest (new or changed).
    pub files_total: i64,
    /// Files ingested and committed so far.
    pub files_done: i64,
    /// Files in error (counted when the run finishes).
    pub errors: i64,
}

/// Receives each changed message: its id, and its text unless it was soft-deleted.
pub type ChangeSink<'s> = dyn FnMut(i64, Option<IndexableMessage<'_>>) -> Result<(), String> + 's;

/// Why feeding an index stopped.
#[derive(Debug)]
pub enum IndexFeedError {
    /// Reading the mirror failed.
    Store(StoreError),
    /// The receiving index failed.
    Sink(String),
}

impl From<StoreError> for IndexFeedError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

impl Mirror {
    /// The last sync run that finished (across accounts): what a derived index built now
    /// reflects. 0 before any run.
    pub fn last_finished_run(&self) -> Result<i64, StoreError> {
        self.db.read(|c| {
            c.query_row(
                "SELECT coalesce(max(id), 0) FROM sync_runs WHERE finished_at IS NOT NULL",
                [],
                |r| r.get(0),
            )
            .map_err(|e| StoreError::query("last finished run", e))
        })
    }

    /// The newest sync run, finished or not: how far it got (for status screens and the live
    /// feed; a running sync updates it with every committed batch).
    pub fn last_run(&self) -> Result<Option<RunProgress>, StoreError> {
        self.db.read(|c| {
            c.query_row(
                "SELECT r.id, a.name, r.started_at, r.finished_at, r.files_total, r.files_done,
                        r.errors
                 FROM sync_runs r JOIN accounts a ON a.id = r.account_id
                 ORDER BY r.id DESC LIMIT 1",
                [],
                |r| {
                    Ok(RunProgress {
                        run_id: r.get(0)?,
                        account: r.get(1)?,
                        started_at: r.get(2)?,
                        finished_at: r.get(3)?,
                        files_total: r.get(4)?,
                        files_done: r.get(5)?,
                        errors: r.get(6)?,
                    })
                },
            )
            .optional()
            .map_err(|e| StoreError::query("last run", e))
        })
    }

    /// The first sync run after run `run_id`, finished or not: its id and when it started (Unix
    /// seconds) — everything written since is at or after that time. `None` when no run follows
    /// `run_id` (an index claiming a run this mirror never had).
    pub fn first_run_after(&self, run_id: i64) -> Result<Option<(i64, i64)>, StoreError> {
        self.db.read(|c| {
            c.query_row(
                "SELECT id, started_at FROM sync_runs WHERE id > ?1 ORDER BY id LIMIT 1",
                [run_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| StoreError::query("first run after", e))
        })
    }

    /// Calls `each` for every message written at or after `since` (Unix seconds): live ones with
    /// their text, soft-deleted ones with `None`, so an index can replace or drop them.
    pub fn for_each_changed_since(
        &self,
        since: i64,
        each: &mut ChangeSink<'_>,
    ) -> Result<u64, IndexFeedError> {
        self.feed("WHERE m.updated_at >= ?1 ORDER BY m.id", since, &mut |id, deleted, doc| {
            each(id, if deleted { None } else { Some(doc) })
        })
    }

    /// Calls `each` for every live message, in id order, on one read transaction (a consistent
    /// snapshot). Returns how many were fed.
    pub fn for_each_indexable(
        &self,
        each: &mut dyn FnMut(IndexableMessage<'_>) -> Result<(), String>,
    ) -> Result<u64, IndexFeedError> {
        self.feed(
            "WHERE m.deleted_at IS NULL AND ?1 = ?1 ORDER BY m.id",
            0,
            &mut |_, deleted, doc| {
                if deleted { Ok(()) } else { each(doc) }
            },
        )
    }

    /// Live (not deleted) messages.
    pub fn live_message_count(&self) -> Result<u64, StoreError> {
        self.db.read(|c| {
            c.query_row("SELECT count(*) FROM messages WHERE deleted_at IS NULL", [], |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(|e| StoreError::query("count live messages", e))
        })
    }

    /// Up to `limit` live messages with an id above `after`, in id order: id, subject and the
    /// first `max_body_chars` characters of the body (the embedding queue's source; the cut is
    /// made in SQL, so a long body is never loaded whole).
    pub fn embed_sources(
        &self,
        after: i64,
        limit: usize,
        max_body_chars: usize,
    ) -> Result<Vec<(i64, String, String)>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let chars = i64::try_from(max_body_chars).unwrap_or(i64::MAX);
        self.db.read(|c| {
            let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
            let mut s = c
                .prepare_cached(
                    "SELECT m.id, m.subject, substr(coalesce(b.body_text, ''), 1, ?3)
                     FROM messages m LEFT JOIN message_bodies b ON b.message_id = m.id
                     WHERE m.deleted_at IS NULL AND m.id > ?1 ORDER BY m.id LIMIT ?2",
                )
                .map_err(q("prepare embed sources"))?;
            s.query_map(rusqlite::params![after, limit, chars], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .and_then(Iterator::collect)
            .map_err(q("embed sources"))
        })
    }

    fn feed(
        &self,
        filter: &str,
        param: i64,
        each: &mut dyn FnMut(i64, bool, IndexableMessage<'_>) -> Result<(), String>,
    ) -> Result<u64, IndexFeedError> {
        self.db.read(|c| {
            let q = |ctx: &'static str| move |e| IndexFeedError::Store(StoreError::query(ctx, e));
            let sql = format!(
                "SELECT m.id, m.deleted_at IS NOT NULL, m.subject, coalesce(b.body_text, ''),
                    coalesce((SELECT group_concat(coalesce(a.name, '') || ' ' || a.address, ' ')
                              FROM message_addresses a WHERE a.message_id = m.id), ''),
                    coalesce((SELECT group_concat(coalesce(t.name, ''), ' ')
                              FROM attachments t WHERE t.message_id = m.id), ''),
                    coalesce(m.from_name, '') || ' ' || coalesce(m.from_addr, ''),
                    coalesce((SELECT group_concat(coalesce(a.name, '') || ' ' || a.address, ' ')
                              FROM message_addresses a
                              WHERE a.message_id = m.id AND a.field = 'to'), ''),
                    coalesce((SELECT group_concat(coalesce(a.name, '') || ' ' || a.address, ' ')
                              FROM message_addresses a
                              WHERE a.message_id = m.id AND a.field = 'cc'), ''),
                    coalesce(m.date, m.received_at, 0), m.size
                 FROM messages m LEFT JOIN message_bodies b ON b.message_id = m.id {filter}"
            );
            let mut stmt = c.prepare(&sql).map_err(q("prepare index feed"))?;
            let mut rows = stmt.query([param]).map_err(q("index feed"))?;
            let mut n = 0u64;
            while let Some(r) = rows.next().map_err(q("index feed row"))? {
                let text = |i: usize| -> Result<&str, IndexFeedError> {
                    r.get_ref(i).map_err(q("index feed value"))?.as_str().map_err(|e| {
                        IndexFeedError::Store(StoreError::query("index feed text", e.into()))
                    })
                };
                let id: i64 = r.get(0).map_err(q("index feed id"))?;
                let deleted: bool = r.get(1).map_err(q("index feed state"))?;
                let doc = IndexableMessage {
                    id,
                    subject: text(2)?,
                    body: text(3)?,
                    people: text(4)?,
                    attachments: text(5)?,
                    from: text(6)?,
                    to: text(7)?,
                    cc: text(8)?,
                    date: r.get(9).map_err(q("index feed date"))?,
                    size: r.get(10).map_err(q("index feed size"))?,
                };
                each(id, deleted, doc).map_err(IndexFeedError::Sink)?;
                n += 1;
            }
            Ok::<_, IndexFeedError>(n)
        })
    }
}
