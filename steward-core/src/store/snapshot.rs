//! A parsed copy of a store's rows kept in memory and rebuilt only when the store changed.
//!
//! The store keeps a generation counter (a one-row table `generation`, created by its
//! migrations, bumped in the same transaction as every write that changes what the snapshot
//! holds, by any process); a reader asks the counter (one indexed row) and uses the copy it has
//! when the counter is the same.
//! A copy larger than its bound is not kept: the caller falls back to asking SQLite.

use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::{Connection, Transaction};

use super::{Database, StoreError};

/// Marks the store changed, inside the write's transaction.
pub(crate) fn bump(tx: &Transaction<'_>) -> Result<(), StoreError> {
    tx.execute("UPDATE generation SET n = n + 1 WHERE id = 1", [])
        .map(|_| ())
        .map_err(|e| StoreError::query("bump generation", e))
}

pub(crate) fn generation(c: &Connection) -> Result<i64, StoreError> {
    c.query_row("SELECT n FROM generation WHERE id = 1", [], |r| r.get(0))
        .map_err(|e| StoreError::query("generation", e))
}

/// The in-memory copy, `None` until first asked.
#[derive(Debug)]
pub(crate) struct Snapshot<T> {
    held: Mutex<Option<(i64, Option<Arc<T>>)>>,
}

impl<T> Default for Snapshot<T> {
    fn default() -> Self {
        Self { held: Mutex::new(None) }
    }
}

impl<T> Snapshot<T> {
    /// The copy for the store's current generation: the one held, or `load`'s (which returns
    /// `None` when the rows exceed its bound; that answer is remembered for the generation
    /// too). Loading reads on one connection, after the counter, so a write committed
    /// between the two only makes the next call load again.
    pub(crate) fn get<E: From<StoreError>>(
        &self,
        db: &Database,
        load: impl FnOnce(&Connection) -> Result<Option<T>, E>,
    ) -> Result<Option<Arc<T>>, E> {
        db.read(|c| {
            let now = generation(c)?;
            let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((g, copy)) = held.as_ref()
                && *g == now
            {
                return Ok(copy.clone());
            }
            let copy = load(c)?.map(Arc::new);
            *held = Some((now, copy.clone()));
            Ok(copy)
        })
    }
}
