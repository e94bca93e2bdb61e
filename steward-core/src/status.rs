//! What a status screen shows: each store readable and writable, free disk space, the text
//! index against the mirror, the embedder, the last ingest, the watch engine, the audit trail
//! and the journal — each `ok`, `warning`, `error` or `unknown`.
//!
//! Observational only: it reads file metadata and a few rows, never opens a store that is not
//! open yet in a way that would create or migrate it, never starts a sync, a poll or a
//! request to an endpoint.

use std::path::Path;

use serde::Serialize;

use crate::{Steward, index::LexicalIndex, time::now_secs};

/// Free space below this is a warning.
/// Fixed (not a setting).
pub const LOW_DISK_WARNING_BYTES: u64 = 1 << 30;
/// Free space below this is an error (SQLite cannot be relied on to commit).
/// Fixed (not a setting).
pub const LOW_DISK_ERROR_BYTES: u64 = 100 << 20;
/// An ingest run still unfinished after this long probably died.
/// Fixed (not a setting).
pub const STALE_RUN_SECS: i64 = 3_600;

/// The state of one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// Nothing to report (not configured, not created yet, cannot be checked here).
    Unknown,
    /// Fine.
    Ok,
    /// Works, but needs attention.
    Warning,
    /// Broken.
    Error,
}

impl Health {
    /// `unknown`, `ok`, `warning` or `error` (the serialized name).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Ok => "ok",
            Self::Warning => "warning",
            Self::Error => "error",
        }
    }
}

/// One checked item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct StatusItem {
    /// `store.mirror`, `disk`, `index.lexical`, `embedder`, `ingest`, `watches`, `audit`,
    /// `journal`, …
    pub name: String,
    /// Its state.
    pub status: Health,
    /// For a person.
    pub detail: String,
}

/// The whole status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SystemStatus {
    /// The worst state among the items.
    pub status: Health,
    /// Unix seconds.
    pub checked_at: i64,
    /// The items, in a fixed order.
    pub items: Vec<StatusItem>,
}

fn item(name: &str, status: Health, detail: impl Into<String>) -> StatusItem {
    StatusItem { name: name.to_owned(), status, detail: detail.into() }
}

fn store_item(name: &str, path: &Path, required: bool) -> StatusItem {
    let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("?");
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if required {
                item(name, Health::Error, format!("{file} is missing"))
            } else {
                item(name, Health::Unknown, format!("{file} not created yet"))
            }
        }
        Err(e) => item(name, Health::Error, format!("{file}: {e}")),
        Ok(_) => {
            let readable = std::fs::File::open(path).is_ok();
            let writable = std::fs::OpenOptions::new().write(true).open(path).is_ok();
            match (readable, writable) {
                (true, true) => item(name, Health::Ok, format!("{file} readable and writable")),
                (true, false) => item(name, Health::Error, format!("{file} is read-only")),
                _ => item(name, Health::Error, format!("{file} cannot be read")),
            }
        }
    }
}

#[cfg(unix)]
fn free_bytes(path: &Path) -> Option<u64> {
    rustix::fs::statvfs(path).ok().map(|s| s.f_bavail.saturating_mul(s.f_frsize))
}

#[cfg(not(unix))]
fn free_bytes(_path: &Path) -> Option<u64> {
    None
}

fn when(secs: i64) -> String {
    crate::time::CivilTime::from_unix(secs).rfc3339()
}

impl Steward {
    /// The embedding queue's state for the configured model (no call to the endpoint: its
    /// reachability shows in the next drain's report).
    fn embedder_item(&self) -> StatusItem {
        let Some(model) = self.embed_model() else {
            return item("embedder", Health::Unknown, "not configured: lexical search only");
        };
        let summary = self
            .vectors()
            .map_err(|e| e.to_string())
            .and_then(|v| v.embed_summary(model).map_err(|e| e.to_string()));
        let live = self.mirror().live_message_count();
        match (summary, live) {
            (Err(e), _) => item("embedder", Health::Error, format!("vector store unreadable: {e}")),
            (_, Err(e)) => item("embedder", Health::Error, format!("mirror unreadable: {e}")),
            (Ok((embedded, failing, last)), Ok(live)) => {
                let mut detail = format!("{model}: {embedded} of {live} messages embedded");
                if failing > 0 {
                    detail.push_str(&format!(
                        "; {failing} failing (last: {})",
                        last.unwrap_or_default()
                    ));
                }
                let health =
                    if failing == 0 && embedded >= live { Health::Ok } else { Health::Warning };
                item("embedder", health, detail)
            }
        }
    }

    /// One item per background job that ever ran here (`job.<name>`): its last run, outcome
    /// and next run; `jobs` alone when none has.
    fn job_items(&self, now: i64) -> Vec<StatusItem> {
        let records = if self.home().join("steward.db").exists() {
            self.job_board().ok().map(|_| self.job_records().unwrap_or_default())
        } else {
            None
        };
        let records = records.unwrap_or_default();
        if records.is_empty() {
            return vec![item(
                "jobs",
                Health::Unknown,
                "no background job has run here (steward serve runs them; steward jobs run --once)",
            )];
        }
        records
            .into_iter()
            .map(|(job, r)| {
                use crate::runner::JobOutcome as O;
                let next = r.next_run_at.map_or_else(String::new, |n| {
                    if n <= now {
                        "; next run due now".to_owned()
                    } else {
                        format!("; next run {}", when(n))
                    }
                });
                let last = r.last_finished_at.map_or_else(|| "never finished".to_owned(), when);
                let (status, what) = match (r.running, r.last_outcome) {
                    (true, _) => (
                        Health::Ok,
                        format!(
                            "running since {}",
                            r.last_started_at.map_or_else(String::new, when)
                        ),
                    ),
                    (false, None) => (Health::Unknown, "started, never finished".to_owned()),
                    (false, Some(O::Ok)) => (Health::Ok, format!("last run {last}: ok")),
                    (false, Some(O::OverBudget)) => (
                        Health::Warning,
                        format!("last run {last}: over its time budget, stopped early"),
                    ),
                    (false, Some(O::Failed)) => (
                        if r.failures >= 3 { Health::Error } else { Health::Warning },
                        format!(
                            "last run {last}: failed ({} in a row): {}",
                            r.failures,
                            r.last_error.as_deref().unwrap_or("no detail")
                        ),
                    ),
                };
                item(&format!("job.{job}"), status, format!("{what}{next}"))
            })
            .collect()
    }

    /// The status of this home, item by item (see the module documentation).
    pub fn system_status(&self) -> SystemStatus {
        let home = self.home();
        let now = now_secs();
        let mut items = vec![
            store_item("store.mirror", &home.join("mirror.db"), true),
            store_item("store.steward", &home.join("steward.db"), false),
            store_item("store.ops", &home.join("ops.db"), false),
            store_item("store.audit", &home.join("audit.db"), false),
        ];
        items.push(match free_bytes(home) {
            None => item("disk", Health::Unknown, "free space cannot be read here"),
            Some(b) => {
                let status = if b < LOW_DISK_ERROR_BYTES {
                    Health::Error
                } else if b < LOW_DISK_WARNING_BYTES {
                    Health::Warning
                } else {
                    Health::Ok
                };
                item("disk", status, format!("{} MiB free", b >> 20))
            }
        });
        let last_run = self.mirror().last_finished_run();
        let stored = LexicalIndex::stored_watermark(&self.lexical_index_dir());
        items.push(match (stored.is_some(), stored.flatten(), last_run) {
            (false, _, _) => item("index.lexical", Health::Unknown, "not built yet"),
            (_, _, Err(e)) => {
                item("index.lexical", Health::Error, format!("mirror unreadable: {e}"))
            }
            (true, Some(w), Ok(r)) if w == r => {
                item("index.lexical", Health::Ok, format!("up to date with sync run {r}"))
            }
            (true, w, Ok(r)) => item(
                "index.lexical",
                Health::Warning,
                format!(
                    "at sync run {}, mirror at {r}; the next search or sync catches it up",
                    w.map_or_else(|| "none".to_owned(), |w| w.to_string())
                ),
            ),
        });
        items.push(self.embedder_item());
        items.push(match self.mirror().last_run() {
            Err(e) => item("ingest", Health::Error, format!("mirror unreadable: {e}")),
            Ok(None) => item("ingest", Health::Unknown, "never synced"),
            Ok(Some(r)) => match r.finished_at {
                None if now - r.started_at > STALE_RUN_SECS => item(
                    "ingest",
                    Health::Warning,
                    format!("the run started {} never finished", when(r.started_at)),
                ),
                None => item(
                    "ingest",
                    Health::Ok,
                    format!(
                        "a sync is running since {}: {} of {} files",
                        when(r.started_at),
                        r.files_done,
                        r.files_total
                    ),
                ),
                Some(done) if r.errors > 0 => item(
                    "ingest",
                    Health::Warning,
                    format!("last sync finished {} with {} files in error", when(done), r.errors),
                ),
                Some(done) => {
                    item("ingest", Health::Ok, format!("last sync finished {}", when(done)))
                }
            },
        });
        let watches = if home.join("watches.db").exists() { Some(self.watches()) } else { None };
        items.push(match watches.map(|w| w.and_then(crate::watch::Watches::health)) {
            None => item("watches", Health::Unknown, "not created yet"),
            Some(Err(e)) => item("watches", Health::Error, e.to_string()),
            Some(Ok(h)) if h.failing > 0 || h.failed_events > 0 => item(
                "watches",
                Health::Warning,
                format!(
                    "{} active, {} failing at their source, {} events undeliverable",
                    h.active, h.failing, h.failed_events
                ),
            ),
            Some(Ok(h)) => item(
                "watches",
                Health::Ok,
                format!("{} active, {} events to deliver", h.active, h.pending_events),
            ),
        });
        let audit = if home.join("audit.db").exists() { Some(self.audit()) } else { None };
        items.push(match audit {
            None => item("audit", Health::Unknown, "not created yet"),
            Some(Err(e)) => item("audit", Health::Error, e.to_string()),
            Some(Ok(a)) if a.failures() > 0 => item(
                "audit",
                Health::Warning,
                format!("{} audit writes failed since start", a.failures()),
            ),
            Some(Ok(_)) => item("audit", Health::Ok, "recording"),
        });
        let review = if home.join("ops.db").exists() {
            self.journal().and_then(|j| j.count_in(crate::journal::OpState::NeedsReview))
        } else {
            Ok(0)
        };
        items.push(match review {
            Err(e) => item("journal", Health::Error, e.to_string()),
            Ok(0) => item("journal", Health::Ok, "nothing needs review"),
            Ok(n) => item("journal", Health::Warning, format!("{n} sent operations need review")),
        });
        items.extend(self.job_items(now));
        let status = items.iter().map(|i| i.status).max().unwrap_or(Health::Unknown);
        SystemStatus { status, checked_at: now, items }
    }
}
