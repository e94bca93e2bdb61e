//! Numbered, forward-only migrations. Each store has a [`Schema`]: an ordered list of SQL files
//! (`migrations/<store>/NNN_name.sql`), applied in one transaction each, with the version kept in
//! `PRAGMA user_version`. A file whose version is newer than this build is refused, never touched.

use std::path::Path;

use rusqlite::Connection;

use super::{StoreError, StoreResult};

/// One migration step.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// The version the store has after this step (1-based, consecutive).
    pub version: i64,
    /// A short name, for logs.
    pub name: &'static str,
    /// The SQL applied.
    pub sql: &'static str,
}

/// The ordered migrations of one store.
#[derive(Debug, Clone, Copy)]
pub struct Schema {
    /// The store's name, for logs.
    pub name: &'static str,
    /// Steps in version order.
    pub migrations: &'static [Migration],
}

impl Schema {
    /// The newest version this build knows.
    pub fn latest(&self) -> i64 {
        self.migrations.last().map_or(0, |m| m.version)
    }

    /// Brings `conn` from its current `user_version` to [`Self::latest`]. Safe when several
    /// connections open the same new store at once.
    pub(crate) fn migrate(&self, path: &Path, conn: &mut Connection) -> StoreResult<()> {
        let found: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| StoreError::Open { path: path.to_path_buf(), source: Box::new(e) })?;
        if found > self.latest() || found < 0 {
            return Err(StoreError::UnknownVersion {
                path: path.to_path_buf(),
                found,
                supported: self.latest(),
            });
        }
        for m in self.migrations.iter().filter(|m| m.version > found) {
            let fail = |e: rusqlite::Error| StoreError::Migration {
                path: path.to_path_buf(),
                version: m.version,
                source: Box::new(e),
            };
            // IMMEDIATE takes the write lock before reading the version, so two processes (or
            // two threads) opening the same new store apply each step once: the second waits,
            // then sees the step done and skips it.
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(fail)?;
            let now: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(fail)?;
            if now >= m.version {
                continue;
            }
            tx.execute_batch(m.sql).map_err(fail)?;
            tx.pragma_update(None, "user_version", m.version).map_err(fail)?;
            tx.commit().map_err(fail)?;
            tracing::info!(store = self.name, version = m.version, name = m.name, "migrated");
        }
        Ok(())
    }
}
