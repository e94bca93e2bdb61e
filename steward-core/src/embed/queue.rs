//! The mail embedding queue: one drain over the mirror (see the module docs of
//! [`crate::embed`] for the rules).

use std::{
    collections::{HashMap, HashSet},
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use rusqlite::OptionalExtension;
use sha2::{Digest as _, Sha256};

use super::{
    BACKLOG_DELAY, IDLE_DELAY, MAX_ITEM_ATTEMPTS, MAX_SOURCE_CHARS, PROBE_TEXT, REPROBE_AFTER,
    SCAN_PAGE, UNAVAILABLE_FIRST_DELAY, UNAVAILABLE_MAX_DELAY,
};
use crate::{
    error::{ErrorKind, StewardError},
    index::{EmbedError, EmbedState, EmbeddedItem, Embedder, FailedItem, VectorError, VectorStore},
    mirror::Mirror,
    store::StoreError,
};

/// Bounds of one drain.
#[derive(Debug, Clone, Copy)]
pub struct EmbedOptions<'a> {
    /// Messages sent to the embedder at most (embedded or charged); the rest is counted as
    /// remaining.
    pub max_items: usize,
    /// Messages per request (1..=[`super::MAX_EMBED_BATCH`]); `None`: what the embedder
    /// wants ([`Embedder::batch_size`], from `[embed] batch_size`).
    pub batch_size: Option<usize>,
    /// Stops the drain after the batch in flight.
    pub cancel: Option<&'a AtomicBool>,
}

impl Default for EmbedOptions<'_> {
    fn default() -> Self {
        Self { max_items: usize::MAX, batch_size: None, cancel: None }
    }
}

/// How far a drain is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EmbedProgress {
    /// Messages the drain will look at: every live message on a full pass, else those the
    /// mirror wrote since the last complete drain plus failures to retry.
    pub messages: u64,
    /// Messages looked at so far.
    pub checked: u64,
    /// Embedded so far in this drain.
    pub embedded: u64,
    /// Charged a failure so far in this drain.
    pub failed: u64,
}

/// What one drain did.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, schemars::JsonSchema)]
pub struct EmbedReport {
    /// The model.
    pub model: String,
    /// The dimension the endpoint answered in (`None` when it could not be reached).
    pub dimension: Option<usize>,
    /// Live messages looked at (their source read and hashed): every live message on a full
    /// pass, else only those written since the last complete drain and failures to retry — 0
    /// when nothing changed.
    pub checked: u64,
    /// Already embedded from the same source with the same model (those not looked at
    /// included: unchanged since the last complete drain).
    pub up_to_date: u64,
    /// Embedded now.
    pub embedded: u64,
    /// Charged a failure now (retried by later drains up to the attempt limit).
    pub failed: u64,
    /// Given up: failed the attempt limit on this source and model (those not looked at
    /// included).
    pub given_up: u64,
    /// Still to embed when the drain stopped (0 after a complete drain).
    pub remaining: u64,
    /// Messages whose vectors were dropped because the model or dimension changed.
    pub reset: u64,
    /// State of messages no longer in the mirror, removed.
    pub removed: u64,
    /// Why the drain stopped early because of the endpoint (down, refusing, rate limited).
    pub unavailable: Option<String>,
    /// The endpoint's `Retry-After`, when it rate limited.
    pub retry_after_secs: Option<u64>,
    /// Stopped by the caller (cancel or the item bound).
    pub stopped: bool,
}

impl EmbedReport {
    /// The endpoint's failure as a typed error (`EMBED_UNAVAILABLE`), when it stopped the
    /// drain: for frontends that end with an error status after printing the report.
    pub fn endpoint_error(&self) -> Option<EmbedError> {
        self.unavailable.as_ref().map(|why| {
            EmbedError::Unavailable(format!("{why}; {} messages left to embed", self.remaining))
        })
    }

    /// Nothing left and the endpoint answered.
    pub fn is_done(&self) -> bool {
        self.unavailable.is_none() && self.remaining == 0
    }
}

/// Why a drain could not run (the endpoint failing is not an error: see
/// [`EmbedReport::unavailable`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedRunError {
    /// No embedder is configured.
    #[error(
        "no embedder is configured: set STEWARD_EMBED_ENDPOINT and STEWARD_EMBED_MODEL (or [embed] in config.toml)"
    )]
    NotConfigured,
    /// A bound out of range.
    #[error("{what} {value} is out of range (1..={max})")]
    OutOfRange {
        /// What.
        what: &'static str,
        /// The value.
        value: usize,
        /// The bound.
        max: usize,
    },
    /// The mirror failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The vector store failed.
    #[error(transparent)]
    Vectors(#[from] VectorError),
    /// The calendar store failed (embedding events).
    #[error(transparent)]
    Calendar(Box<crate::calendar::store::CalendarStoreError>),
}

impl StewardError for EmbedRunError {
    fn code(&self) -> &'static str {
        match self {
            Self::NotConfigured => "EMBED_NOT_CONFIGURED",
            Self::OutOfRange { .. } => "LIMIT_OUT_OF_RANGE",
            Self::Store(e) => e.code(),
            Self::Vectors(e) => e.code(),
            Self::Calendar(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::NotConfigured => ErrorKind::Unavailable,
            Self::OutOfRange { .. } => ErrorKind::InvalidInput,
            Self::Store(e) => e.kind(),
            Self::Vectors(e) => e.kind(),
            Self::Calendar(e) => e.kind(),
        }
    }
}

/// When to drain next, from what the last drains found.
#[derive(Debug, Clone, Default)]
pub struct EmbedSchedule {
    unavailable_streak: u32,
}

impl EmbedSchedule {
    /// The delay before the next drain after `report`.
    pub fn next_delay(&mut self, report: &EmbedReport) -> Duration {
        if report.unavailable.is_some() {
            let doubled = UNAVAILABLE_FIRST_DELAY
                .saturating_mul(1u32 << self.unavailable_streak.min(16))
                .min(UNAVAILABLE_MAX_DELAY);
            self.unavailable_streak = self.unavailable_streak.saturating_add(1);
            let asked = Duration::from_secs(report.retry_after_secs.unwrap_or(0));
            return doubled.max(asked);
        }
        self.unavailable_streak = 0;
        if report.remaining > 0 { BACKLOG_DELAY } else { IDLE_DELAY }
    }
}

/// The text embedded for a message: subject, a blank line, body, cut at `max_chars`
/// characters.
pub fn source_text(subject: &str, body: &str, max_chars: usize) -> String {
    let mut s = String::with_capacity(subject.len() + body.len() + 2);
    s.push_str(subject.trim());
    if !body.trim().is_empty() {
        s.push_str("\n\n");
        s.push_str(body.trim());
    }
    match s.char_indices().nth(max_chars) {
        Some((cut, _)) => s[..cut].to_owned(),
        None => s,
    }
}

fn hash(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

struct Pending {
    id: i64,
    hash: [u8; 32],
    text: String,
}

/// How a request or a drain step ended for the endpoint.
enum Halt {
    Unavailable(String),
    Throttled(u64),
}

impl Halt {
    /// Says in the report why the drain stopped.
    fn report(self, report: &mut EmbedReport) {
        match self {
            Self::Unavailable(why) => report.unavailable = Some(why),
            Self::Throttled(secs) => {
                report.unavailable = Some(format!("rate limited; retry in {secs} s"));
                report.retry_after_secs = Some(secs);
            }
        }
    }
}

impl From<EmbedError> for Halt {
    fn from(e: EmbedError) -> Self {
        match e {
            EmbedError::Throttled { retry_after_secs } => Self::Throttled(retry_after_secs),
            other => Self::Unavailable(other.to_string()),
        }
    }
}

struct Drain<'a> {
    store: &'a VectorStore,
    e: &'a dyn Embedder,
    model: String,
    dim: usize,
    report: EmbedReport,
}

/// Why a vector cannot be stored, or `None` when it can.
fn defect(v: &[f32], dim: usize) -> Option<String> {
    if v.is_empty() {
        Some("the answer had no vector for this input".into())
    } else if v.len() != dim {
        Some(format!("a {}-d vector where the endpoint answers {dim}-d", v.len()))
    } else if v.iter().any(|x| !x.is_finite()) || v.iter().all(|x| *x == 0.0) {
        Some("a vector that is not finite or all zeros".into())
    } else {
        None
    }
}

impl Drain<'_> {
    /// The probe: one short text. `Ok(dimension)` when the endpoint answers with a usable
    /// vector.
    fn probe(&self) -> Result<usize, Halt> {
        let v = self.e.embed(&[PROBE_TEXT]).map_err(Halt::from)?;
        let v = v.into_iter().next().unwrap_or_default();
        let dim = v.len();
        if let Some(expected) = self.e.dimension()
            && dim != expected
        {
            return Err(Halt::Unavailable(format!(
                "the endpoint answers {dim}-d vectors; {expected} are configured"
            )));
        }
        match defect(&v, dim) {
            None if dim.is_multiple_of(8) && dim <= crate::index::MAX_DIMENSION => Ok(dim),
            None => Err(Halt::Unavailable(format!("the endpoint answers {dim}-d vectors"))),
            Some(d) => Err(Halt::Unavailable(format!("the probe failed: {d}"))),
        }
    }

    /// Embeds one batch; writes what succeeded and charges what failed alone. On a halt, the
    /// members left unresolved are counted as remaining.
    fn batch(&mut self, items: Vec<Pending>) -> Result<Result<(), Halt>, EmbedRunError> {
        let texts: Vec<&str> = items.iter().map(|p| p.text.as_str()).collect();
        let mut good = Vec::new();
        let mut alone = Vec::new();
        match self.e.embed(&texts) {
            Ok(vs) if vs.len() == items.len() => {
                for (p, v) in items.into_iter().zip(vs) {
                    match defect(&v, self.dim) {
                        None => {
                            good.push(EmbeddedItem { id: p.id, source_hash: p.hash, vector: v })
                        }
                        Some(_) => alone.push(p),
                    }
                }
            }
            Err(EmbedError::Throttled { retry_after_secs }) => {
                self.report.remaining += items.len() as u64;
                return Ok(Err(Halt::Throttled(retry_after_secs)));
            }
            Ok(_) | Err(_) => {
                // The batch as a whole failed: down, or one member poisons it?
                if let Err(h) = self.probe() {
                    self.report.remaining += items.len() as u64;
                    return Ok(Err(h));
                }
                alone = items;
            }
        }
        self.store_good(&good)?;
        let mut failed = Vec::new();
        let mut halt = None;
        for p in alone {
            if halt.is_some() {
                self.report.remaining += 1;
                continue;
            }
            match self.e.embed(&[p.text.as_str()]) {
                Ok(v) => {
                    let v = v.into_iter().next().unwrap_or_default();
                    match defect(&v, self.dim) {
                        None => self.store_good(&[EmbeddedItem {
                            id: p.id,
                            source_hash: p.hash,
                            vector: v,
                        }])?,
                        Some(d) => {
                            failed.push(FailedItem { id: p.id, source_hash: p.hash, error: d })
                        }
                    }
                }
                Err(EmbedError::Rejected(m)) => {
                    failed.push(FailedItem { id: p.id, source_hash: p.hash, error: m });
                }
                Err(EmbedError::Throttled { retry_after_secs }) => {
                    self.report.remaining += 1;
                    halt = Some(Halt::Throttled(retry_after_secs));
                }
                Err(other) => match self.probe() {
                    // The endpoint is up: this input breaks it.
                    Ok(_) => {
                        failed.push(FailedItem {
                            id: p.id,
                            source_hash: p.hash,
                            error: other.to_string(),
                        });
                    }
                    Err(h) => {
                        self.report.remaining += 1;
                        halt = Some(h);
                    }
                },
            }
        }
        if !failed.is_empty() {
            self.store.record_embed_failures(&self.model, &failed)?;
            self.report.failed += failed.len() as u64;
        }
        Ok(halt.map_or(Ok(()), Err))
    }

    fn store_good(&mut self, good: &[EmbeddedItem]) -> Result<(), EmbedRunError> {
        if !good.is_empty() {
            self.store.store_embedded(&self.model, self.dim, good)?;
            self.report.embedded += good.len() as u64;
        }
        Ok(())
    }
}

/// Whether `state` already covers a message whose source hashes to `hash`: `Some(true)` up to
/// date, `Some(false)` given up, `None` pending.
fn covered(state: Option<&EmbedState>, model: &str, dim: usize, hash: &[u8; 32]) -> Option<bool> {
    let s = state?;
    if s.model != model || &s.source_hash != hash {
        return None;
    }
    match (s.embedded_at, s.dimension) {
        (Some(_), Some(d)) if d == dim => Some(true),
        (None, _) if s.attempts >= MAX_ITEM_ATTEMPTS => Some(false),
        _ => None,
    }
}

/// Where the embedding queue's last complete drain left off, kept in `vectors.db`
/// (`embed_watermark`, one row): the next drain examines only what the mirror wrote since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EmbedWatermark {
    /// The model of that drain.
    pub(crate) model: String,
    /// The dimension the endpoint answered in.
    pub(crate) dimension: usize,
    /// Every sync run up to this id had finished before that drain read any message, so
    /// everything they wrote was examined.
    pub(crate) settled_run: i64,
    /// The newest sync run then (0 for none): a mirror without this run (or with another run
    /// of this id) is not the one the watermark was taken on.
    pub(crate) seen_run: i64,
    /// `started_at` of `seen_run` (0 for none).
    pub(crate) seen_started: i64,
    /// When the endpoint last answered a probe (Unix seconds).
    pub(crate) probed_at: i64,
}

/// Where the mirror's sync runs stand, read before a drain reads any message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Runs {
    /// Every run up to this id had finished.
    settled: i64,
    /// The newest run (0 for none).
    seen: i64,
    /// Its `started_at`.
    seen_started: i64,
}

impl Runs {
    fn of(w: &EmbedWatermark) -> Self {
        Self { settled: w.settled_run, seen: w.seen_run, seen_started: w.seen_started }
    }
}

/// The runs of the whole mirror (a full pass; reads `sync_runs`, not messages).
fn runs_now(mirror: &Mirror) -> Result<Runs, StoreError> {
    mirror.db().read(|c| {
        c.query_row(
            "SELECT coalesce((SELECT min(id) FROM sync_runs WHERE finished_at IS NULL) - 1,
                             (SELECT max(id) FROM sync_runs), 0),
                    coalesce((SELECT max(id) FROM sync_runs), 0),
                    coalesce((SELECT started_at FROM sync_runs ORDER BY id DESC LIMIT 1), 0)",
            [],
            |r| Ok(Runs { settled: r.get(0)?, seen: r.get(1)?, seen_started: r.get(2)? }),
        )
        .map_err(|e| StoreError::query("sync runs", e))
    })
}

/// The runs after the watermark `w` (read by primary key: none when nothing ran since): where
/// they stand, and the earliest time any of them wrote at — every message a run writes gets
/// `updated_at` = the run's `started_at`, so the messages with `updated_at` at or after it are
/// all that changed. `None` when this is not the mirror the watermark was taken on.
fn runs_since(
    mirror: &Mirror,
    w: &EmbedWatermark,
) -> Result<Option<(Runs, Option<i64>)>, StoreError> {
    mirror.db().read(|c| {
        let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
        if w.seen_run > 0 {
            let started: Option<i64> = c
                .prepare_cached("SELECT started_at FROM sync_runs WHERE id = ?1")
                .and_then(|mut s| s.query_row([w.seen_run], |r| r.get(0)).optional())
                .map_err(q("sync run"))?;
            if started != Some(w.seen_started) {
                return Ok(None);
            }
        }
        let after: Vec<(i64, i64, bool)> = c
            .prepare_cached(
                "SELECT id, started_at, finished_at IS NOT NULL FROM sync_runs
                 WHERE id > ?1 ORDER BY id",
            )
            .and_then(|mut s| {
                s.query_map([w.settled_run], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect()
            })
            .map_err(q("sync runs"))?;
        let mut runs = Runs::of(w);
        let (mut open, mut since) = (false, None::<i64>);
        for (id, started, finished) in after {
            // The settled prefix stops at the first run still going (or killed: the next run
            // of its account closes it).
            open |= !finished;
            if !open {
                runs.settled = id;
            }
            since = Some(since.map_or(started, |s| s.min(started)));
            runs.seen = id;
            runs.seen_started = started;
        }
        Ok(Some((runs, since)))
    })
}

/// Messages (live or soft-deleted) the mirror wrote at or after `since`, in id order.
fn changed_since(mirror: &Mirror, since: i64) -> Result<Vec<i64>, StoreError> {
    mirror.db().read(|c| {
        c.prepare_cached("SELECT id FROM messages WHERE updated_at >= ?1 ORDER BY id")
            .and_then(|mut s| s.query_map([since], |r| r.get(0))?.collect())
            .map_err(|e| StoreError::query("changed messages", e))
    })
}

/// The source (subject, start of the body) of each of `ids`, `None` when it is not live: what
/// [`Mirror::embed_sources`] reads, by id.
fn sources_of(mirror: &Mirror, ids: &[i64]) -> Result<Vec<(i64, Option<Source>)>, StoreError> {
    let chars = i64::try_from(MAX_SOURCE_CHARS).unwrap_or(i64::MAX);
    mirror.db().read(|c| {
        let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
        let mut s = c
            .prepare_cached(
                "SELECT m.deleted_at IS NULL, m.subject, substr(coalesce(b.body_text, ''), 1, ?2)
                 FROM messages m LEFT JOIN message_bodies b ON b.message_id = m.id
                 WHERE m.id = ?1",
            )
            .map_err(q("prepare embed source"))?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let row: Option<(bool, String, String)> = s
                .query_row(rusqlite::params![id, chars], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()
                .map_err(q("embed source"))?;
            out.push((*id, row.and_then(|(live, subject, body)| live.then_some((subject, body)))));
        }
        Ok(out)
    })
}

/// A message's subject and the start of its body.
type Source = (String, String);

/// What a drain reads: every live message in pages, or the listed ones.
enum Scan {
    Full { after: i64 },
    Listed { ids: Vec<i64>, next: usize },
}

impl Scan {
    fn page(&mut self, mirror: &Mirror) -> Result<Vec<(i64, Option<Source>)>, StoreError> {
        match self {
            Self::Full { after } => {
                let page = mirror.embed_sources(*after, SCAN_PAGE, MAX_SOURCE_CHARS)?;
                if let Some(last) = page.last() {
                    *after = last.0;
                }
                Ok(page.into_iter().map(|(id, s, b)| (id, Some((s, b)))).collect())
            }
            Self::Listed { ids, next } => {
                let end = (*next + SCAN_PAGE).min(ids.len());
                let page = sources_of(mirror, &ids[*next..end])?;
                *next = end;
                Ok(page)
            }
        }
    }
}

/// The sorted union of two id lists sorted ascending.
fn union(a: Vec<i64>, b: &[i64]) -> Vec<i64> {
    if b.is_empty() {
        return a;
    }
    let mut out = a;
    out.extend_from_slice(b);
    out.sort_unstable();
    out.dedup();
    out
}

/// One drain of the mail embedding queue: embeds every live message whose source changed or
/// was never embedded with `embedder`'s model, within `opts`, reporting progress after each
/// batch.
///
/// A drain after a complete one (same model and dimension, same mirror) looks only at the
/// messages the mirror wrote since (found through its sync runs) and at
/// failures to retry; when there are none it reads no message, asks the endpoint nothing
/// (unless its last probe is older than [`REPROBE_AFTER`]) and reports from stored counts.
/// Otherwise — no watermark, another model or configured dimension, another mirror, the probe
/// answering another dimension, or [`VectorStore::forget_embed_watermark`] — it reads and
/// hashes every live message.
pub fn drain(
    mirror: &Mirror,
    store: &VectorStore,
    embedder: &dyn Embedder,
    opts: &EmbedOptions<'_>,
    progress: &mut dyn FnMut(EmbedProgress),
) -> Result<EmbedReport, EmbedRunError> {
    let batch_size = opts.batch_size.unwrap_or_else(|| embedder.batch_size());
    if !(1..=super::MAX_EMBED_BATCH).contains(&batch_size) {
        return Err(EmbedRunError::OutOfRange {
            what: "embedding batch",
            value: batch_size,
            max: super::MAX_EMBED_BATCH,
        });
    }
    let model = embedder.model().to_owned();
    let now = crate::time::now_secs();
    let mut d = Drain {
        store,
        e: embedder,
        model: model.clone(),
        dim: 0,
        report: EmbedReport { model, ..EmbedReport::default() },
    };
    // What to look at, decided before any message is read (and without the endpoint).
    let mark = store.embed_watermark()?.filter(|w| {
        w.model == d.model && embedder.dimension().is_none_or(|dim| dim == w.dimension)
    });
    let since = match &mark {
        Some(w) => runs_since(mirror, w)?,
        None => None,
    };
    let (mut runs, mut listed) = match (&mark, since) {
        (Some(w), Some((runs, since))) => {
            let changed = match since {
                Some(t) => changed_since(mirror, t)?,
                None => Vec::new(),
            };
            let retry = store.retryable_failures(&d.model, MAX_ITEM_ATTEMPTS)?;
            (runs, Some((w, union(changed, &retry))))
        }
        _ => (runs_now(mirror)?, None),
    };
    // Nothing changed and the endpoint answered lately: nothing to do, nothing to ask.
    if let Some((w, ids)) = &listed
        && ids.is_empty()
        && now.saturating_sub(w.probed_at) < i64::try_from(REPROBE_AFTER.as_secs()).unwrap_or(0)
    {
        return idle(store, &mut d, w, runs, w.probed_at);
    }
    let mut halted = match d.probe() {
        Ok(dim) => {
            d.dim = dim;
            d.report.dimension = Some(dim);
            if let Some((w, ids)) = &listed
                && w.dimension == dim
            {
                if ids.is_empty() {
                    return idle(store, &mut d, w, runs, now);
                }
            } else {
                // A full pass (the endpoint may answer in another dimension than the
                // watermark's): from where the whole mirror stands now.
                if listed.take().is_some() {
                    runs = runs_now(mirror)?;
                }
                d.report.reset = store.reset_incompatible(&d.model, dim)?;
            }
            None
        }
        Err(h) => {
            if let Some((w, ids)) = &listed {
                if ids.is_empty() {
                    // Only the periodic probe was due, and it failed: nothing is pending.
                    h.report(&mut d.report);
                    return Ok(d.report);
                }
                d.dim = w.dimension;
            }
            Some(h)
        }
    };
    let (all_states, totals) = match &listed {
        // A full pass reads every state; a listed one those of its page, and counts.
        None => (Some(store.embed_states()?), None),
        Some(_) => (None, Some(store.embed_totals(&d.model, MAX_ITEM_ATTEMPTS)?)),
    };
    if halted.is_some() && listed.is_none() {
        // The endpoint is down: count what is up to date against the dimension stored.
        d.dim = all_states
            .iter()
            .flat_map(HashMap::values)
            .filter(|s| s.model == d.model && s.embedded_at.is_some())
            .find_map(|s| s.dimension)
            .unwrap_or(0);
    }
    let mut p = EmbedProgress::default();
    let mut scan = match listed.take() {
        Some((_, ids)) => {
            p.messages = ids.len() as u64;
            Scan::Listed { ids, next: 0 }
        }
        None => {
            p.messages = mirror.live_message_count()?;
            Scan::Full { after: 0 }
        }
    };
    let full = matches!(scan, Scan::Full { .. });
    let mut seen: HashSet<i64> =
        HashSet::with_capacity(all_states.as_ref().map_or(0, HashMap::len));
    let mut orphans: Vec<i64> = Vec::new();
    // A listed pass: what the states of the messages it looks at counted before.
    let (mut was_up_to_date, mut was_given_up) = (0u64, 0u64);
    let mut sent = 0usize;
    loop {
        let page = scan.page(mirror)?;
        if page.is_empty() {
            break;
        }
        let page_states;
        let states = match &all_states {
            Some(all) => all,
            None => {
                let ids: Vec<i64> = page.iter().map(|(id, _)| *id).collect();
                page_states = store.embed_states_of(&ids)?;
                &page_states
            }
        };
        let mut pending = Vec::new();
        for (id, source) in page {
            let state = states.get(&id);
            if !full && let Some(s) = state.filter(|s| s.model == d.model) {
                match (s.embedded_at, s.dimension) {
                    (Some(_), Some(dim)) if dim == d.dim => was_up_to_date += 1,
                    (None, _) if s.attempts >= MAX_ITEM_ATTEMPTS => was_given_up += 1,
                    _ => {}
                }
            }
            let Some((subject, body)) = source else {
                // Soft-deleted (or gone) since: its state and vectors go.
                if state.is_some() {
                    orphans.push(id);
                }
                continue;
            };
            if full {
                seen.insert(id);
            }
            d.report.checked += 1;
            let text = source_text(&subject, &body, MAX_SOURCE_CHARS);
            let h = hash(&text);
            match covered(state, &d.model, d.dim, &h) {
                Some(true) => d.report.up_to_date += 1,
                Some(false) => d.report.given_up += 1,
                None => pending.push(Pending { id, hash: h, text }),
            }
        }
        let mut rest = pending.into_iter().peekable();
        while rest.peek().is_some() {
            let cancelled = opts.cancel.is_some_and(|c| c.load(Ordering::Relaxed));
            if halted.is_some() || cancelled || sent >= opts.max_items {
                d.report.stopped |= halted.is_none();
                d.report.remaining += rest.count() as u64;
                break;
            }
            let n = batch_size.min(opts.max_items - sent);
            let batch: Vec<Pending> = rest.by_ref().take(n).collect();
            sent += batch.len();
            if let Err(h) = d.batch(batch)? {
                halted = Some(h);
            }
            p.embedded = d.report.embedded;
            p.failed = d.report.failed;
            p.checked = d.report.checked;
            progress(p);
        }
        p.checked = d.report.checked;
        progress(p);
    }
    if let Some(all) = &all_states {
        // State of messages deleted from the mirror (or never in it) goes with their vectors.
        orphans = all.keys().filter(|id| !seen.contains(id)).copied().collect();
    }
    for chunk in orphans.chunks(crate::index::MAX_VECTOR_BATCH) {
        store.remove(chunk)?;
    }
    d.report.removed = orphans.len() as u64;
    if let Some((embedded, given_up)) = totals {
        // The messages not looked at are as the last complete drain left them.
        d.report.up_to_date += embedded.saturating_sub(was_up_to_date);
        d.report.given_up += given_up.saturating_sub(was_given_up);
    }
    let complete = halted.is_none() && !d.report.stopped && d.report.remaining == 0;
    match halted {
        Some(h) => h.report(&mut d.report),
        None if complete => store.set_embed_watermark(&EmbedWatermark {
            model: d.model.clone(),
            dimension: d.dim,
            settled_run: runs.settled,
            seen_run: runs.seen,
            seen_started: runs.seen_started,
            probed_at: now,
        })?,
        None => {}
    }
    Ok(d.report)
}

/// The report of a drain with nothing to look at: the stored counts; the watermark moves past
/// the runs that wrote nothing (and records the probe, if one was made).
fn idle(
    store: &VectorStore,
    d: &mut Drain<'_>,
    w: &EmbedWatermark,
    runs: Runs,
    probed_at: i64,
) -> Result<EmbedReport, EmbedRunError> {
    let (embedded, given_up) = store.embed_totals(&d.model, MAX_ITEM_ATTEMPTS)?;
    if runs != Runs::of(w) || probed_at != w.probed_at {
        store.set_embed_watermark(&EmbedWatermark {
            settled_run: runs.settled,
            seen_run: runs.seen,
            seen_started: runs.seen_started,
            probed_at,
            ..w.clone()
        })?;
    }
    d.report.dimension = Some(w.dimension);
    d.report.up_to_date = embedded;
    d.report.given_up = given_up;
    Ok(std::mem::take(&mut d.report))
}

/// Drains on the [`EmbedSchedule`] until nothing is left, or until the next wait would end
/// after `within` (or `opts.cancel` is set); returns the last drain's report. Waits while the
/// endpoint is unavailable, backing off.
pub fn drain_until_done(
    mirror: &Mirror,
    store: &VectorStore,
    embedder: &dyn Embedder,
    opts: &EmbedOptions<'_>,
    within: Duration,
    progress: &mut dyn FnMut(EmbedProgress),
) -> Result<EmbedReport, EmbedRunError> {
    let deadline = std::time::Instant::now() + within;
    let cancelled = || opts.cancel.is_some_and(|c| c.load(Ordering::Relaxed));
    let mut schedule = EmbedSchedule::default();
    loop {
        let report = drain(mirror, store, embedder, opts, progress)?;
        let delay = schedule.next_delay(&report);
        if report.is_done() || cancelled() || std::time::Instant::now() + delay > deadline {
            return Ok(report);
        }
        if let Some(why) = &report.unavailable {
            tracing::warn!(retry_in = ?delay, "embedding endpoint unavailable: {why}");
        }
        // Sleep in short steps so a cancel is seen.
        let until = std::time::Instant::now() + delay;
        while std::time::Instant::now() < until && !cancelled() {
            std::thread::sleep(Duration::from_millis(200).min(until - std::time::Instant::now()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_source_is_subject_then_body_cut_on_a_character() {
        assert_eq!(source_text(" Hi ", "body\n", 100), "Hi\n\nbody");
        assert_eq!(source_text("Hi", "  ", 100), "Hi");
        let long = "è".repeat(3_000);
        let s = source_text("", &long, MAX_SOURCE_CHARS);
        assert_eq!(s.chars().count(), MAX_SOURCE_CHARS);
    }

    #[test]
    fn the_schedule_backs_off_and_recovers() {
        let mut s = EmbedSchedule::default();
        let down = EmbedReport { unavailable: Some("down".into()), ..EmbedReport::default() };
        let delays: Vec<Duration> = (0..8).map(|_| s.next_delay(&down)).collect();
        assert_eq!(delays[0], UNAVAILABLE_FIRST_DELAY);
        assert_eq!(delays[1], UNAVAILABLE_FIRST_DELAY * 2);
        assert_eq!(*delays.last().unwrap(), UNAVAILABLE_MAX_DELAY);
        let throttled = EmbedReport { retry_after_secs: Some(3_000), ..down.clone() };
        assert_eq!(s.next_delay(&throttled), Duration::from_secs(3_000));
        let backlog = EmbedReport { remaining: 5, ..EmbedReport::default() };
        assert_eq!(s.next_delay(&backlog), BACKLOG_DELAY);
        assert_eq!(s.next_delay(&EmbedReport::default()), IDLE_DELAY);
        assert_eq!(s.next_delay(&down), UNAVAILABLE_FIRST_DELAY, "the streak restarted");
    }
}
