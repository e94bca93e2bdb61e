//! Event vectors, for hybrid event search like mail's: each live event's text (title,
//! location, description, attendees, cut at [`MAX_EVENT_EMBED_CHARS`]) is embedded into a
//! vector store of its own (`<home>/calendar-index/vectors.db`, keyed by the event's row), and
//! a search fuses BM25 with the nearest events (reciprocal rank fusion). The nearest events
//! count only within the embedder's distance ceiling and when they stand out from the
//! calibration probes, so a topic the calendar does not hold finds nothing.
//!
//! A drain ([`Steward::embed_events`]) compares every live event's text hash with what the
//! store recorded: new and changed events are embedded in batches, events gone lose their
//! vectors, unchanged ones cost nothing. An endpoint that fails stops the drain; the next one
//! picks up where it stopped.

use serde::Serialize;

use crate::{Steward, embed::EmbedRunError};

/// Longest text of one event embedded, characters.
/// Fixed (not a setting).
pub const MAX_EVENT_EMBED_CHARS: usize = 2_000;
/// Events embedded per request.
/// Fixed (not a setting).
pub const EVENT_EMBED_BATCH: usize = 32;
/// Nearest events a search looks at.
/// Fixed (not a setting).
pub const EVENT_VECTOR_CANDIDATES: usize = 50;

/// What one drain of the event embedding queue did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EventEmbedReport {
    /// Events embedded now (new or changed).
    pub embedded: usize,
    /// Events whose vectors were already current.
    pub unchanged: usize,
    /// Events gone whose vectors were dropped.
    pub removed: usize,
    /// Nothing was looked at: no event changed since the last drain that finished.
    pub up_to_date: bool,
    /// Why the drain stopped early (the endpoint failing), if it did.
    pub error: Option<String>,
}

fn hash(text: &str) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(text.as_bytes()).into()
}

impl Steward {
    /// Embeds the live events whose text is new or changed and drops the vectors of events
    /// gone (see the module's documentation); stops between batches when `cancel` is set.
    /// When no event changed since the last drain that finished, nothing is read.
    pub fn embed_events(
        &self,
        cancel: Option<&std::sync::atomic::AtomicBool>,
    ) -> Result<EventEmbedReport, EmbedRunError> {
        let e = self.embedder_ref().ok_or(EmbedRunError::NotConfigured)?;
        let store = self.calendar_store().map_err(|x| EmbedRunError::Calendar(Box::new(x)))?;
        let generation = store.generation().map_err(|x| EmbedRunError::Calendar(Box::new(x)))?;
        let done = (e.model().to_owned(), generation);
        if self.events_embedded.lock().is_ok_and(|d| d.as_ref() == Some(&done)) {
            return Ok(EventEmbedReport { up_to_date: true, ..EventEmbedReport::default() });
        }
        let vectors = self.event_vectors()?;
        let live = store
            .embed_sources(MAX_EVENT_EMBED_CHARS)
            .map_err(|x| EmbedRunError::Calendar(Box::new(x)))?;
        let states = vectors.embed_states()?;
        let mut report = EventEmbedReport::default();
        let keep: std::collections::HashSet<i64> = live.iter().map(|(id, _)| *id).collect();
        let gone: Vec<i64> = states.keys().copied().filter(|id| !keep.contains(id)).collect();
        if !gone.is_empty() {
            vectors.remove(&gone)?;
            report.removed = gone.len();
        }
        let todo: Vec<(i64, String, [u8; 32])> = live
            .into_iter()
            .filter_map(|(id, text)| {
                let h = hash(&text);
                let current = states.get(&id).is_some_and(|s| {
                    s.model == e.model() && s.source_hash == h && s.embedded_at.is_some()
                });
                if current {
                    report.unchanged += 1;
                    None
                } else {
                    Some((id, text, h))
                }
            })
            .collect();
        let (embedded, error) =
            crate::index::embed_in_batches(e, vectors, &todo, EVENT_EMBED_BATCH, cancel)?;
        report.embedded += embedded;
        report.error = error;
        if report.error.is_none()
            && let Ok(mut d) = self.events_embedded.lock()
        {
            *d = Some(done);
        }
        Ok(report)
    }

    /// The rows of the events nearest to `text`, nearest first: within the embedder's
    /// distance ceiling and standing out from the calibration probes. Empty without an
    /// embedder or event vectors, and when the embedder fails (the search is lexical then).
    pub(crate) fn near_events(&self, text: &str) -> Vec<i64> {
        let Some(e) = self.embedder_ref() else { return Vec::new() };
        let Ok(vectors) = self.event_vectors() else { return Vec::new() };
        crate::index::near_standing_out(e, vectors, text, EVENT_VECTOR_CANDIDATES, "event")
            .unwrap_or_else(|why| {
                tracing::warn!(why, "event search is lexical");
                Vec::new()
            })
    }
}
