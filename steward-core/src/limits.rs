//! Every bound Steward enforces, as a named constant with the reference default, gathered in
//! [`Limits`], which is passed explicitly when a [`crate::Steward`] is opened (never read from a
//! global).

use std::path::Path;

/// Largest document file read, bytes (larger ones are a typed error before any byte is read).
/// Default of [`Limits::max_document_bytes`](crate::Limits) (`[limits] max_document_bytes`).
pub const MAX_DOCUMENT_BYTES: u64 = 256 * 1024 * 1024;
/// Most characters of text kept from one document; more is cut and marked truncated.
/// Default of [`Limits::max_document_chars`](crate::Limits) (`[limits] max_document_chars`).
pub const MAX_DOCUMENT_CHARS: usize = 16 * 1024 * 1024;
/// Longest one document's extraction may take, seconds.
/// Default of [`Limits::docs_extract_secs`](crate::Limits) (`[limits] docs_extract_secs`).
pub const DOCS_EXTRACT_SECS: u64 = 30;
/// Size of the extracted-text cache (`docs.db`), MB; least recently used out first.
/// Default of [`Limits::docs_cache_mb`](crate::Limits) (`[limits] docs_cache_mb`).
pub const DOCS_CACHE_MB: u64 = 256;
/// Longest a command of `shell.run` or `shell.exec` may run, seconds; then it is stopped.
/// Default of [`Limits::shell_timeout_secs`](crate::Limits) (`[limits] shell_timeout_secs`).
pub const SHELL_TIMEOUT_SECS: u64 = 10;
/// Most standard output kept of one command, KiB (a quarter of it for standard error).
/// Default of [`Limits::shell_output_kib`](crate::Limits) (`[limits] shell_output_kib`).
pub const SHELL_OUTPUT_KIB: u64 = 64;
/// Days a memory proposal waits in the inbox unreviewed before it expires.
/// Default of [`Limits::memory_proposal_days`](crate::Limits) (`[limits] memory_proposal_days`).
pub const MEMORY_PROPOSAL_DAYS: u64 = 30;
/// Model calls one mail → memory promotion pass makes at most (one per thread); the rest wait
/// for the next pass.
/// Default of [`Limits::memory_promotion_calls`](crate::Limits) (`[limits] memory_promotion_calls`).
pub const MEMORY_PROMOTION_CALLS: usize = 20;
/// Messages parsed and written per ingest transaction.
/// Default of [`Limits::ingest_batch`](crate::Limits) (`[limits] ingest_batch`).
pub const INGEST_BATCH: usize = 1024;
/// Files to ingest at or above which a run into a mirror no larger than the import is a bulk
/// load: lookup-only indexes are dropped and built once at the end.
/// Default of [`Limits::bulk_load_min_files`](crate::Limits) (`[limits] bulk_load_min_files`).
pub const BULK_LOAD_MIN_FILES: usize = 10_000;
/// Parser threads used by an ingest (0 = number of CPUs).
/// Default of [`Limits::ingest_threads`](crate::Limits) (`[limits] ingest_threads`).
pub const INGEST_THREADS: usize = 0;
/// Largest single message file (or mbox message) that is parsed; larger ones become a per-file error.
/// Default of [`Limits::max_message_bytes`](crate::Limits) (`[limits] max_message_bytes`).
pub const MAX_MESSAGE_BYTES: u64 = 64 * 1024 * 1024;
/// Largest header block accepted before a message is rejected as a header bomb.
/// Default of [`Limits::max_header_bytes`](crate::Limits) (`[limits] max_header_bytes`).
pub const MAX_HEADER_BYTES: usize = 1024 * 1024;
/// Largest body text stored for one message (characters beyond are cut at a char boundary).
/// Default of [`Limits::max_body_chars`](crate::Limits) (`[limits] max_body_chars`).
pub const MAX_BODY_CHARS: usize = 1024 * 1024;
/// Most addresses kept per recipient field of one message.
/// Default of [`Limits::max_addresses_per_field`](crate::Limits) (`[limits] max_addresses_per_field`).
pub const MAX_ADDRESSES_PER_FIELD: usize = 500;
/// Most references (In-Reply-To + References) kept per message.
/// Default of [`Limits::max_references`](crate::Limits) (`[limits] max_references`).
pub const MAX_REFERENCES: usize = 100;
/// Most attachments recorded per message.
/// Default of [`Limits::max_attachments`](crate::Limits) (`[limits] max_attachments`).
pub const MAX_ATTACHMENTS: usize = 256;
/// Most participants remembered on a thread row.
/// Default of [`Limits::max_thread_participants`](crate::Limits) (`[limits] max_thread_participants`).
pub const MAX_THREAD_PARTICIPANTS: usize = 64;
/// Window, in days, for the subject + participant thread fallback.
/// Default of [`Limits::thread_subject_window_days`](crate::Limits) (`[limits] thread_subject_window_days`).
pub const THREAD_SUBJECT_WINDOW_DAYS: i64 = 14;
/// Most per-file errors listed by `stats` (the count is always exact).
/// Default of [`Limits::max_errors_listed`](crate::Limits) (`[limits] max_errors_listed`).
pub const MAX_ERRORS_LISTED: usize = 1000;
/// Read connections kept open per store.
/// Default of [`Limits::reader_connections`](crate::Limits) (`[limits] reader_connections`).
pub const READER_CONNECTIONS: usize = 4;
/// SQLite busy timeout, in milliseconds.
/// Default of [`Limits::busy_timeout_ms`](crate::Limits) (`[limits] busy_timeout_ms`).
pub const BUSY_TIMEOUT_MS: u64 = 5_000;
/// SQLite page cache per connection, in KiB.
/// Default of [`Limits::page_cache_kib`](crate::Limits) (`[limits] page_cache_kib`).
pub const PAGE_CACHE_KIB: i64 = 128 * 1024;
/// WAL pages written before SQLite checkpoints automatically. Large, because a checkpoint copies
/// each page once however often it was rewritten in between: a mirror ingest rewrites its hot
/// index pages in every batch (measured: 9.5k -> 11.4k messages/s going from 1,000 to 30,000).
/// A sync checkpoints and truncates the WAL when it ends.
/// Default of [`Limits::wal_autocheckpoint_pages`](crate::Limits) (`[limits] wal_autocheckpoint_pages`).
pub const WAL_AUTOCHECKPOINT_PAGES: i64 = 30_000;
/// The same for the stores written in many small transactions (approvals, policy, the journal,
/// the audit trail): a small WAL that is checkpointed often is rewritten in place, while one that
/// keeps growing costs every commit a file extension (the kernel zeroes each new block: measured,
/// 28% of an audit insert's time, 53 → 30 µs p50).
/// Default of [`Limits::small_writes_wal_autocheckpoint_pages`](crate::Limits) (`[limits] small_writes_wal_autocheckpoint_pages`).
pub const SMALL_WRITES_WAL_AUTOCHECKPOINT_PAGES: i64 = 1_000;
/// Memory-mapped I/O per connection, in bytes (best effort).
/// Default of [`Limits::mmap_bytes`](crate::Limits) (`[limits] mmap_bytes`).
pub const MMAP_BYTES: i64 = 64 * 1024 * 1024;

/// The bounds in force for one [`crate::Steward`] handle. `Default` gives the reference values.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// See [`INGEST_BATCH`].
    pub ingest_batch: usize,
    /// See [`INGEST_THREADS`].
    pub ingest_threads: usize,
    /// See [`BULK_LOAD_MIN_FILES`].
    pub bulk_load_min_files: usize,
    /// See [`MAX_MESSAGE_BYTES`].
    pub max_message_bytes: u64,
    /// See [`MAX_HEADER_BYTES`].
    pub max_header_bytes: usize,
    /// See [`MAX_BODY_CHARS`].
    pub max_body_chars: usize,
    /// See [`MAX_ADDRESSES_PER_FIELD`].
    pub max_addresses_per_field: usize,
    /// See [`MAX_REFERENCES`].
    pub max_references: usize,
    /// See [`MAX_ATTACHMENTS`].
    pub max_attachments: usize,
    /// See [`MAX_THREAD_PARTICIPANTS`].
    pub max_thread_participants: usize,
    /// See [`THREAD_SUBJECT_WINDOW_DAYS`].
    pub thread_subject_window_days: i64,
    /// See [`MAX_ERRORS_LISTED`].
    pub max_errors_listed: usize,
    /// See [`READER_CONNECTIONS`].
    pub reader_connections: usize,
    /// See [`BUSY_TIMEOUT_MS`].
    pub busy_timeout_ms: u64,
    /// See [`PAGE_CACHE_KIB`].
    pub page_cache_kib: i64,
    /// See [`MMAP_BYTES`].
    pub mmap_bytes: i64,
    /// See [`WAL_AUTOCHECKPOINT_PAGES`].
    pub wal_autocheckpoint_pages: i64,
    /// See [`SMALL_WRITES_WAL_AUTOCHECKPOINT_PAGES`].
    pub small_writes_wal_autocheckpoint_pages: i64,
    /// See [`crate::approval::SUBSCRIPTION_POLL_MS`].
    pub approval_poll_ms: u64,
    /// See [`MAX_DOCUMENT_BYTES`].
    pub max_document_bytes: u64,
    /// See [`MAX_DOCUMENT_CHARS`].
    pub max_document_chars: usize,
    /// See [`DOCS_EXTRACT_SECS`].
    pub docs_extract_secs: u64,
    /// See [`DOCS_CACHE_MB`].
    pub docs_cache_mb: u64,
    /// See [`SHELL_TIMEOUT_SECS`].
    pub shell_timeout_secs: u64,
    /// See [`SHELL_OUTPUT_KIB`].
    pub shell_output_kib: u64,
    /// See [`MEMORY_PROPOSAL_DAYS`].
    pub memory_proposal_days: u64,
    /// See [`MEMORY_PROMOTION_CALLS`].
    pub memory_promotion_calls: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            ingest_batch: INGEST_BATCH,
            ingest_threads: INGEST_THREADS,
            bulk_load_min_files: BULK_LOAD_MIN_FILES,
            max_message_bytes: MAX_MESSAGE_BYTES,
            max_header_bytes: MAX_HEADER_BYTES,
            max_body_chars: MAX_BODY_CHARS,
            max_addresses_per_field: MAX_ADDRESSES_PER_FIELD,
            max_references: MAX_REFERENCES,
            max_attachments: MAX_ATTACHMENTS,
            max_thread_participants: MAX_THREAD_PARTICIPANTS,
            thread_subject_window_days: THREAD_SUBJECT_WINDOW_DAYS,
            max_errors_listed: MAX_ERRORS_LISTED,
            reader_connections: READER_CONNECTIONS,
            busy_timeout_ms: BUSY_TIMEOUT_MS,
            page_cache_kib: PAGE_CACHE_KIB,
            mmap_bytes: MMAP_BYTES,
            wal_autocheckpoint_pages: WAL_AUTOCHECKPOINT_PAGES,
            small_writes_wal_autocheckpoint_pages: SMALL_WRITES_WAL_AUTOCHECKPOINT_PAGES,
            approval_poll_ms: crate::approval::SUBSCRIPTION_POLL_MS,
            max_document_bytes: MAX_DOCUMENT_BYTES,
            max_document_chars: MAX_DOCUMENT_CHARS,
            docs_extract_secs: DOCS_EXTRACT_SECS,
            docs_cache_mb: DOCS_CACHE_MB,
            shell_timeout_secs: SHELL_TIMEOUT_SECS,
            shell_output_kib: SHELL_OUTPUT_KIB,
            memory_proposal_days: MEMORY_PROPOSAL_DAYS,
            memory_promotion_calls: MEMORY_PROMOTION_CALLS,
        }
    }
}

impl Limits {
    /// Checks that every bound is usable; returns the name of the first one that is not.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.ingest_batch == 0 || self.ingest_batch > 100_000 {
            return Err("ingest_batch");
        }
        if self.max_message_bytes == 0 {
            return Err("max_message_bytes");
        }
        if self.max_header_bytes == 0 {
            return Err("max_header_bytes");
        }
        if self.reader_connections == 0 || self.reader_connections > 64 {
            return Err("reader_connections");
        }
        if self.small_writes_wal_autocheckpoint_pages < 0 {
            return Err("small_writes_wal_autocheckpoint_pages");
        }
        if self.wal_autocheckpoint_pages < 0 {
            return Err("wal_autocheckpoint_pages");
        }
        if self.thread_subject_window_days < 0 {
            return Err("thread_subject_window_days");
        }
        if self.approval_poll_ms == 0 {
            return Err("approval_poll_ms");
        }
        if self.ingest_threads > 1_024 {
            return Err("ingest_threads");
        }
        if self.bulk_load_min_files == 0 {
            return Err("bulk_load_min_files");
        }
        if self.max_body_chars == 0 {
            return Err("max_body_chars");
        }
        if !(0..=1 << 40).contains(&self.mmap_bytes) {
            return Err("mmap_bytes");
        }
        if !(0..=64 * 1024 * 1024).contains(&self.page_cache_kib) {
            return Err("page_cache_kib");
        }
        if self.busy_timeout_ms > 600_000 {
            return Err("busy_timeout_ms");
        }
        if !(1024..=4 << 30).contains(&self.max_document_bytes) {
            return Err("max_document_bytes");
        }
        if !(1_000..=256 << 20).contains(&self.max_document_chars) {
            return Err("max_document_chars");
        }
        if !(1..=3_600).contains(&self.docs_extract_secs) {
            return Err("docs_extract_secs");
        }
        if self.docs_cache_mb > 1 << 20 {
            return Err("docs_cache_mb");
        }
        if !(1..=600).contains(&self.shell_timeout_secs) {
            return Err("shell_timeout_secs");
        }
        if !(1..=16 * 1024).contains(&self.shell_output_kib) {
            return Err("shell_output_kib");
        }
        if !(1..=3_650).contains(&self.memory_proposal_days) {
            return Err("memory_proposal_days");
        }
        if self.memory_promotion_calls > 1_000 {
            return Err("memory_promotion_calls");
        }
        Ok(())
    }

    /// The parser thread count actually used.
    pub fn effective_ingest_threads(&self) -> usize {
        if self.ingest_threads == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            self.ingest_threads
        }
    }
}

/// `[limits]` of `config.toml`: any field of [`Limits`], by its name.
macro_rules! limits_section {
    ($($field:ident: $ty:ty),* $(,)?) => {
        #[derive(Debug, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct LimitsSection {
            $($field: Option<$ty>,)*
        }

        impl LimitsSection {
            fn apply(self, limits: &mut Limits) {
                $(if let Some(v) = self.$field {
                    limits.$field = v;
                })*
            }
        }
    };
}

limits_section!(
    ingest_batch: usize,
    ingest_threads: usize,
    bulk_load_min_files: usize,
    max_message_bytes: u64,
    max_header_bytes: usize,
    max_body_chars: usize,
    max_addresses_per_field: usize,
    max_references: usize,
    max_attachments: usize,
    max_thread_participants: usize,
    thread_subject_window_days: i64,
    max_errors_listed: usize,
    reader_connections: usize,
    busy_timeout_ms: u64,
    page_cache_kib: i64,
    mmap_bytes: i64,
    wal_autocheckpoint_pages: i64,
    small_writes_wal_autocheckpoint_pages: i64,
    approval_poll_ms: u64,
    max_document_bytes: u64,
    max_document_chars: usize,
    docs_extract_secs: u64,
    docs_cache_mb: u64,
    shell_timeout_secs: u64,
    shell_output_kib: u64,
    memory_proposal_days: u64,
    memory_promotion_calls: usize,
);

#[derive(Debug, Default, serde::Deserialize)]
struct ConfigFile {
    #[serde(default)]
    limits: Option<LimitsSection>,
}

impl Limits {
    /// These limits with `[limits]` of `<home>/config.toml` over them, every key a field of
    /// [`Limits`] by its name (`ingest_batch = 2048`); no file or no section changes nothing.
    /// An unknown key, a value of the wrong type or out of range is an error that names it.
    pub fn with_config(mut self, home: &Path) -> Result<Self, String> {
        let path = home.join(crate::embed::CONFIG_FILE);
        let file: ConfigFile = match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ConfigFile::default(),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        if let Some(section) = file.limits {
            section.apply(&mut self);
        }
        self.validate().map_err(|name| format!("[limits] {name} is out of range"))?;
        Ok(self)
    }
}
