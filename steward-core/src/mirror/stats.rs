//! Counts over the mirror, for `steward stats` and health checks.

use std::collections::BTreeMap;

use super::{Mirror, MirrorError};
use crate::store::StoreError;

/// A file that could not be ingested.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct FileErrorRecord {
    /// The file.
    pub path: String,
    /// The stable error code (`MAIL_BAD_FRAMING`).
    pub code: String,
    /// What was wrong.
    pub message: String,
}

/// Counts per table, per mailbox role and per body state, plus the per-file error list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct MirrorStats {
    /// Rows per table.
    pub tables: BTreeMap<String, u64>,
    /// Live (not soft-deleted) messages per mailbox role of their attributed mailbox.
    pub messages_by_role: BTreeMap<String, u64>,
    /// Live messages per body state.
    pub messages_by_body_state: BTreeMap<String, u64>,
    /// Live messages.
    pub messages_live: u64,
    /// Soft-deleted messages.
    pub messages_deleted: u64,
    /// Files whose last ingest failed (exact count).
    pub error_count: u64,
    /// The failed files (bounded by `Limits::max_errors_listed`).
    pub errors: Vec<FileErrorRecord>,
}

const TABLES: [&str; 11] = [
    "accounts",
    "mailboxes",
    "threads",
    "messages",
    "message_bodies",
    "message_addresses",
    "message_refs",
    "message_paths",
    "source_files",
    "attachments",
    "blobs",
];

impl Mirror {
    /// Computes [`MirrorStats`].
    pub fn stats(&self) -> Result<MirrorStats, MirrorError> {
        let max = self.limits.max_errors_listed;
        self.db.read(|c| {
            let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
            let mut tables = BTreeMap::new();
            for t in TABLES {
                let n: i64 = c
                    .query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0))
                    .map_err(q("count table"))?;
                tables.insert(t.to_owned(), u64::try_from(n).unwrap_or(0));
            }
            let group = |sql: &str| -> Result<BTreeMap<String, u64>, StoreError> {
                let mut stmt = c.prepare(sql).map_err(q("prepare group"))?;
                let rows = stmt
                    .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
                    .map_err(q("group"))?;
                let mut out = BTreeMap::new();
                for r in rows {
                    let (k, v) = r.map_err(q("group row"))?;
                    out.insert(k, u64::try_from(v).unwrap_or(0));
                }
                Ok(out)
            };
            let messages_by_role = group(
                "SELECT b.role, count(*) FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id
                 WHERE m.deleted_at IS NULL GROUP BY b.role",
            )?;
            let messages_by_body_state = group(
                "SELECT body_state, count(*) FROM messages WHERE deleted_at IS NULL GROUP BY body_state",
            )?;
            let (live, deleted): (i64, i64) = c
                .query_row(
                    "SELECT count(*) FILTER (WHERE deleted_at IS NULL), count(*) FILTER (WHERE deleted_at IS NOT NULL) FROM messages",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(q("count live"))?;
            let error_count: i64 = c
                .query_row("SELECT count(*) FROM source_files WHERE error_code IS NOT NULL", [], |r| r.get(0))
                .map_err(q("count errors"))?;
            let mut stmt = c
                .prepare(
                    "SELECT path, error_code, coalesce(error_message, '') FROM source_files
                     WHERE error_code IS NOT NULL ORDER BY path LIMIT ?1",
                )
                .map_err(q("prepare errors"))?;
            let errors = stmt
                .query_map([i64::try_from(max).unwrap_or(i64::MAX)], |r| {
                    Ok(FileErrorRecord {
                        path: r.get(0)?,
                        code: r.get(1)?,
                        message: r.get(2)?,
                    })
                })
                .map_err(q("errors"))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(q("error row"))?;
            Ok(MirrorStats {
                tables,
                messages_by_role,
                messages_by_body_state,
                messages_live: u64::try_from(live).unwrap_or(0),
                messages_deleted: u64::try_from(deleted).unwrap_or(0),
                error_count: u64::try_from(error_count).unwrap_or(0),
                errors,
            })
        })
    }
}
