//! Opening SQLite stores.
//!
//! Owns: connection setup (WAL, busy timeout, foreign keys, page cache, best-effort mmap),
//! numbered forward-only migrations, the one-writer / N-readers [`Database`], and registering
//! sqlite-vec once per process. Never does: domain logic, or deleting a store to "recover" from
//! corruption (rebuildable stores are rebuilt by their owning module, primary ones stop).
//! Bounds: reader pool size, busy timeout, cache and mmap sizes come from [`crate::Limits`].

mod migrate;
pub(crate) mod snapshot;

use std::{
    path::{Path, PathBuf},
    sync::{Mutex, MutexGuard, Once},
    time::Duration,
};

pub use migrate::{Migration, Schema};
use rusqlite::{Connection, OpenFlags, Transaction};

use crate::{
    Limits,
    error::{Cause, ErrorKind, StewardError},
};

/// Errors from opening or using a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database file could not be opened or configured.
    #[error("cannot open store {path}: {source}")]
    Open {
        /// The database file.
        path: PathBuf,
        /// The underlying cause.
        #[source]
        source: Cause,
    },
    /// The file was written by a newer Steward (or is not a Steward store).
    #[error("store {path} has schema version {found}; this build supports up to {supported}")]
    UnknownVersion {
        /// The database file.
        path: PathBuf,
        /// The version found in the file.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// A migration failed; the store was left at its previous version.
    #[error("migration {version} of {path} failed: {source}")]
    Migration {
        /// The database file.
        path: PathBuf,
        /// The migration that failed.
        version: i64,
        /// The underlying cause.
        #[source]
        source: Cause,
    },
    /// `PRAGMA integrity_check` or SQLite itself reported damage.
    #[error("store {path} is corrupt: {detail}")]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        detail: String,
    },
    /// A query failed.
    #[error("{context}: {source}")]
    Query {
        /// What was being done.
        context: &'static str,
        /// The underlying cause.
        #[source]
        source: Cause,
    },
    /// Another connection held the lock for longer than the busy timeout.
    #[error("store is busy: {context}")]
    Busy {
        /// What was being done.
        context: &'static str,
    },
}

impl StoreError {
    /// Wraps a rusqlite error with what was being done, classifying busy and corrupt errors.
    pub(crate) fn query(context: &'static str, e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode as C;
        match e.sqlite_error_code() {
            Some(C::DatabaseBusy | C::DatabaseLocked) => Self::Busy { context },
            Some(C::DatabaseCorrupt | C::NotADatabase) => {
                Self::Corrupt { path: PathBuf::new(), detail: format!("{context}: {e}") }
            }
            _ => Self::Query { context, source: Box::new(e) },
        }
    }
}

impl StewardError for StoreError {
    fn code(&self) -> &'static str {
        match self {
            Self::Open { .. } => "STORE_OPEN_FAILED",
            Self::UnknownVersion { .. } => "STORE_VERSION_UNKNOWN",
            Self::Migration { .. } => "STORE_MIGRATION_FAILED",
            Self::Corrupt { .. } => "STORE_CORRUPT",
            Self::Query { .. } => "STORE_QUERY_FAILED",
            Self::Busy { .. } => "STORE_BUSY",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Open { .. } | Self::Busy { .. } => ErrorKind::Unavailable,
            Self::UnknownVersion { .. } | Self::Corrupt { .. } => ErrorKind::Corrupt,
            Self::Migration { .. } | Self::Query { .. } => ErrorKind::Internal,
        }
    }
}

/// Converts a count or size to SQLite's integer, saturating (SQLite has no unsigned type).
pub(crate) fn int<T: TryInto<i64>>(n: T) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// Shorthand for results of this module.
pub type StoreResult<T> = Result<T, StoreError>;

static VEC_EXTENSION: Once = Once::new();

/// Bytes a WAL file is truncated to after a checkpoint.
/// Fixed (not a setting).
const WAL_SIZE_LIMIT: i64 = 64 * 1024 * 1024;

/// Page cache of each pooled read connection, in KiB.
/// Fixed (not a setting).
const READER_CACHE_KIB: i64 = 16 * 1024;

/// Prepared statements kept per connection.
/// Fixed (not a setting).
const STATEMENT_CACHE: usize = 128;

/// Registers sqlite-vec as an auto-extension, once per process, before any connection opens.
#[expect(unsafe_code, reason = "sqlite-vec registration goes through SQLite's C API")]
fn register_sqlite_vec() {
    VEC_EXTENSION.call_once(|| {
        // SAFETY: `sqlite3_vec_init` is the extension entry point exported by the statically
        // linked sqlite-vec library; it has the signature SQLite expects of an auto-extension
        // (`int (*)(sqlite3*, char**, const sqlite3_api_routines*)`), which is what the transmute
        // from its `extern "C" fn()` declaration restores. Registration happens once, before any
        // connection of this process is opened by this module.
        unsafe {
            type Entry = unsafe extern "C" fn(
                *mut rusqlite::ffi::sqlite3,
                *mut *mut std::os::raw::c_char,
                *const rusqlite::ffi::sqlite3_api_routines,
            ) -> std::os::raw::c_int;
            let entry: Entry =
                std::mem::transmute::<*const (), Entry>(sqlite_vec::sqlite3_vec_init as *const ());
            rusqlite::ffi::sqlite3_auto_extension(Some(entry));
        }
    });
}

/// How a store's connections are configured.
#[derive(Debug, Clone)]
pub(crate) struct OpenOptions {
    pub(crate) busy_timeout: Duration,
    pub(crate) page_cache_kib: i64,
    pub(crate) mmap_bytes: i64,
    pub(crate) readers: usize,
    pub(crate) wal_autocheckpoint_pages: i64,
    /// Freed pages are overwritten with zeros (`PRAGMA secure_delete`): for a store whose
    /// deleted rows must not linger in the file (memory's forget).
    pub(crate) secure_delete: bool,
}

impl OpenOptions {
    pub(crate) fn from_limits(limits: &Limits) -> Self {
        Self {
            busy_timeout: Duration::from_millis(limits.busy_timeout_ms),
            page_cache_kib: limits.page_cache_kib,
            mmap_bytes: limits.mmap_bytes,
            readers: limits.reader_connections,
            wal_autocheckpoint_pages: limits.wal_autocheckpoint_pages,
            secure_delete: false,
        }
    }

    /// These options with freed pages zeroed ([`Self::secure_delete`]).
    pub(crate) fn zeroing_deletes(self) -> Self {
        Self { secure_delete: true, ..self }
    }

    /// For a store written in many small transactions: a WAL kept small and reused
    /// ([`crate::limits::SMALL_WRITES_WAL_AUTOCHECKPOINT_PAGES`]).
    pub(crate) fn small_writes(limits: &Limits) -> Self {
        Self {
            wal_autocheckpoint_pages: limits.small_writes_wal_autocheckpoint_pages,
            ..Self::from_limits(limits)
        }
    }
}

fn open_connection(path: &Path, opts: &OpenOptions, read_only: bool) -> StoreResult<Connection> {
    register_sqlite_vec();
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let open_err =
        |e: rusqlite::Error| StoreError::Open { path: path.to_path_buf(), source: Box::new(e) };
    let conn = Connection::open_with_flags(path, flags).map_err(open_err)?;
    conn.busy_timeout(opts.busy_timeout).map_err(open_err)?;
    // The ingest path alone uses ~30 distinct statements; rusqlite keeps 16 by default, and a
    // cache that thrashes re-parses SQL on every message.
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // Query planner stability: plans must not depend on bound values. Without it, SQLite 3.54
    // marks joins and ORDER BY … LIMIT statements "re-prepare on bind", and rusqlite's statement
    // cache clears bindings when a statement is returned — so every cached statement was parsed
    // and planned again on each use (measured: 13 µs instead of 4 µs per lookup).
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(open_err)?;
    // `rarray(?)`: a bound list of ids as a table (search filters candidate sets with it).
    rusqlite::vtab::array::load_module(&conn).map_err(open_err)?;
    // The writer gets the large cache; each pooled reader a small one, so memory stays bounded
    // by the page cache plus readers × READER_CACHE_KIB.
    let cache_kib =
        if read_only { opts.page_cache_kib.min(READER_CACHE_KIB) } else { opts.page_cache_kib };
    let mut pragmas = format!(
        "PRAGMA foreign_keys = ON; PRAGMA cache_size = -{cache_kib}; PRAGMA temp_store = MEMORY;"
    );
    if opts.secure_delete {
        pragmas.push_str(" PRAGMA secure_delete = ON;");
    }
    if !read_only {
        pragmas.push_str(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = {};
             PRAGMA journal_size_limit = {};",
            opts.wal_autocheckpoint_pages, WAL_SIZE_LIMIT
        ));
    }
    conn.execute_batch(&pragmas).map_err(open_err)?;
    // mmap is best effort: some file systems refuse it, and that is fine.
    // Only readers map the file: the writer works through its page cache (its reads are the hot
    // index pages already cached), and a second mapping of the same file would count twice in
    // the process's resident memory.
    let mmap = if read_only { opts.mmap_bytes } else { 0 };
    let _ = conn.execute_batch(&format!("PRAGMA mmap_size = {mmap};"));
    Ok(conn)
}

/// A JSON text column as `T`; a value that does not parse is a conversion failure of that
/// column (the caller reports the store as damaged).
pub(crate) fn json_column<T: serde::de::DeserializeOwned>(
    row: &rusqlite::Row<'_>,
    i: usize,
) -> rusqlite::Result<T> {
    let s: String = row.get(i)?;
    serde_json::from_str(&s).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// A stored value that no longer parses: its table, row and column, and why. Row mappers return
/// it as a conversion failure ([`DamagedValue::into_sql`]); the store's owner reports every
/// conversion failure as damage with its own `*_CORRUPT` code (kind `Corrupt`), never as a
/// failed query ([`damaged`]).
#[derive(Debug, thiserror::Error)]
#[error("{table} row {row}, column {column}: {detail}")]
pub(crate) struct DamagedValue {
    /// The table.
    pub(crate) table: &'static str,
    /// The row's id.
    pub(crate) row: i64,
    /// The column.
    pub(crate) column: &'static str,
    /// Why it does not parse.
    pub(crate) detail: String,
}

impl DamagedValue {
    /// The conversion failure of column `i` that carries this.
    pub(crate) fn into_sql(self, i: usize) -> rusqlite::Error {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(self))
    }
}

/// A JSON text column of `table` row `row` as `T`; text that does not parse is a
/// [`DamagedValue`] naming the table, row and column.
pub(crate) fn json_text<T: serde::de::DeserializeOwned>(
    text: &str,
    i: usize,
    table: &'static str,
    row: i64,
    column: &'static str,
) -> rusqlite::Result<T> {
    serde_json::from_str(text)
        .map_err(|e| DamagedValue { table, row, column, detail: e.to_string() }.into_sql(i))
}

/// What is damaged, when `e` is a stored value that no longer converts (a [`DamagedValue`], or
/// any other conversion failure, such as text that is not UTF-8); `None` for every other error.
pub(crate) fn damaged(e: &rusqlite::Error) -> Option<String> {
    match e {
        rusqlite::Error::FromSqlConversionFailure(_, _, inner) => {
            Some(match inner.downcast_ref::<DamagedValue>() {
                Some(d) => d.to_string(),
                None => e.to_string(),
            })
        }
        _ => None,
    }
}

/// One SQLite file: a single writer connection and a bounded pool of readers (WAL lets them run
/// alongside the writer). Write paths get a `&Transaction`, read paths a `&Connection`.
pub struct Database {
    path: PathBuf,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
    opts: OpenOptions,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Database {
    /// Opens (creating if needed) the file at `path` and brings it to the newest version of
    /// `schema`.
    pub(crate) fn open(path: &Path, schema: &Schema, opts: OpenOptions) -> StoreResult<Self> {
        let mut writer = open_connection(path, &opts, false)?;
        schema.migrate(path, &mut writer)?;
        Ok(Self {
            path: path.to_path_buf(),
            writer: Mutex::new(writer),
            readers: Mutex::new(Vec::new()),
            opts,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock_writer(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the writer cannot leave a half-applied transaction behind
        // (rusqlite rolls back on drop), so a poisoned lock is safe to reuse.
        self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `f` in one immediate transaction on the writer, committing when it returns `Ok`.
    pub(crate) fn write<T, E>(
        &self,
        f: impl FnOnce(&Transaction<'_>) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let mut conn = self.lock_writer();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| StoreError::query("begin transaction", e))?;
        let out = f(&tx)?;
        tx.commit().map_err(|e| StoreError::query("commit", e))?;
        Ok(out)
    }

    /// Runs `f` on the writer connection outside an explicit transaction: each statement it runs
    /// commits on its own (SQLite autocommit). For single-statement writes, where BEGIN and COMMIT
    /// would be two more statements on a hot path (the audit insert).
    pub(crate) fn write_autocommit<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E>,
    ) -> Result<T, E> {
        let conn = self.lock_writer();
        f(&conn)
    }

    /// Runs `f` on a pooled read connection (opened on demand, at most `readers` kept).
    pub(crate) fn read<T, E>(&self, f: impl FnOnce(&Connection) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let pooled = self.readers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
        let conn = match pooled {
            Some(c) => c,
            None => open_connection(&self.path, &self.opts, true)?,
        };
        let out = f(&conn);
        let mut pool = self.readers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if pool.len() < self.opts.readers {
            pool.push(conn);
        }
        out
    }

    /// Copies the WAL into the database and truncates it, then returns the writer's page cache
    /// to the allocator (after a large write, before other work such as indexing runs).
    pub fn checkpoint(&self) -> StoreResult<()> {
        let conn = self.lock_writer();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(|e| StoreError::query("wal_checkpoint", e))?;
        conn.execute_batch("PRAGMA shrink_memory")
            .map_err(|e| StoreError::query("shrink_memory", e))
    }

    /// Runs `PRAGMA integrity_check` and returns `Ok` only when SQLite answers "ok".
    pub fn integrity_check(&self) -> StoreResult<()> {
        let conn = self.lock_writer();
        let detail: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(|e| StoreError::query("integrity_check", e))?;
        if detail == "ok" {
            Ok(())
        } else {
            Err(StoreError::Corrupt { path: self.path.clone(), detail })
        }
    }

    /// The SQLite version and the sqlite-vec version linked into this build.
    pub fn versions(&self) -> StoreResult<(String, String)> {
        self.read(|c| {
            c.query_row("SELECT sqlite_version(), vec_version()", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(|e| StoreError::query("versions", e))
        })
    }
}

/// Makes a store holding the person's content owner-only (best effort on its WAL files too).
pub(crate) fn restrict_file(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for suffix in ["", "-wal", "-shm"] {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            if let Err(e) = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
                && suffix.is_empty()
            {
                tracing::warn!(error = %e, path = %path.display(), "cannot make a store owner-only");
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}
