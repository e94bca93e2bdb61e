//! The mail embedding queue: one drain over the mirror (see the module docs of
//! [`crate::embed`] for the rules).

use std::{
    collections::{HashMap, HashSet},
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use sha2::{Digest as _, Sha256};

use super::{
    BACKLOG_DELAY, IDLE_DELAY, MAX_ITEM_ATTEMPTS, MAX_SOURCE_CHARS, PROBE_TEXT, SCAN_PAGE,
    UNAVAILABLE_FIRST_DELAY, UNAVAILABLE_MAX_DELAY,
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
    /// Live messages in the mirror when the drain started.
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
    /// Live messages looked at.
    pub checked: u64,
    /// Already embedded from the same source with the same model.
    pub up_to_date: u64,
    /// Embedded now.
    pub embedded: u64,
    /// Charged a failure now (retried by later drains up to the attempt limit).
    pub failed: u64,
    /// Given up: failed the attempt limit on this source and model.
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
}

impl StewardError for EmbedRunError {
    fn code(&self) -> &'static str {
        match self {
            Self::NotConfigured => "EMBED_NOT_CONFIGURED",
            Self::OutOfRange { .. } => "LIMIT_OUT_OF_RANGE",
            Self::Store(e) => e.code(),
            Self::Vectors(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::NotConfigured => ErrorKind::Unavailable,
            Self::OutOfRange { .. } => ErrorKind::InvalidInput,
            Self::Store(e) => e.kind(),
            Self::Vectors(e) => e.kind(),
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

/// One drain of the mail embedding queue: embeds every live message whose source changed or
/// was never embedded with `embedder`'s model, within `opts`, reporting progress after each
/// batch.
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
    let mut d = Drain {
        store,
        e: embedder,
        model: model.clone(),
        dim: 0,
        report: EmbedReport { model, ..EmbedReport::default() },
    };
    let mut halted = match d.probe() {
        Ok(dim) => {
            d.dim = dim;
            d.report.dimension = Some(dim);
            d.report.reset = store.reset_incompatible(&d.model, dim)?;
            None
        }
        Err(h) => Some(h),
    };
    let states: HashMap<i64, EmbedState> = store.embed_states()?;
    if halted.is_some() {
        // The endpoint is down: count what is up to date against the dimension stored.
        d.dim = states
            .values()
            .filter(|s| s.model == d.model && s.embedded_at.is_some())
            .find_map(|s| s.dimension)
            .unwrap_or(0);
    }
    let mut seen: HashSet<i64> = HashSet::with_capacity(states.len());
    let mut p =
        EmbedProgress { messages: mirror.live_message_count()?, ..EmbedProgress::default() };
    let mut sent = 0usize;
    let mut after = 0i64;
    loop {
        let page = mirror.embed_sources(after, SCAN_PAGE, MAX_SOURCE_CHARS)?;
        let Some(last) = page.last() else { break };
        after = last.0;
        let mut pending = Vec::new();
        for (id, subject, body) in page {
            seen.insert(id);
            d.report.checked += 1;
            let text = source_text(&subject, &body, MAX_SOURCE_CHARS);
            let h = hash(&text);
            match covered(states.get(&id), &d.model, d.dim, &h) {
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
    // State of messages deleted from the mirror (or never in it) goes with their vectors.
    let orphans: Vec<i64> = states.keys().filter(|id| !seen.contains(id)).copied().collect();
    for chunk in orphans.chunks(crate::index::MAX_VECTOR_BATCH) {
        store.remove(chunk)?;
    }
    d.report.removed = orphans.len() as u64;
    match halted {
        Some(Halt::Unavailable(why)) => d.report.unavailable = Some(why),
        Some(Halt::Throttled(secs)) => {
            d.report.unavailable = Some(format!("rate limited; retry in {secs} s"));
            d.report.retry_after_secs = Some(secs);
        }
        None => {}
    }
    Ok(d.report)
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
