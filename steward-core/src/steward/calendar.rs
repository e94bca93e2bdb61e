//! The facade's calendars: `calendar.db` (filled by the connectors' reconcile), the agenda,
//! free/busy and event search in the person's zone.

use chrono::{DateTime, Utc};

use super::Steward;
use crate::calendar::{
    CalendarSettings, FreeBusy, MAX_INSTANCES,
    store::{CalendarStore, CalendarStoreError, EventHit, EventQuery, StoredOccurrence},
};

impl Steward {
    /// `calendar.db`, opened on first use (the connectors reconcile sources into it).
    pub fn calendar_store(&self) -> Result<&CalendarStore, CalendarStoreError> {
        self.open_once(&self.calendar, || CalendarStore::open(&self.home, &self.limits))
    }

    /// The person's zone, addresses and working hours.
    pub fn calendar_settings(&self) -> &CalendarSettings {
        &self.calendar_settings
    }

    /// The occurrences of every calendar in `[from, to)`, by start (at most 366 days and
    /// 1,000 occurrences, else a typed error).
    pub fn agenda(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<StoredOccurrence>, CalendarStoreError> {
        self.calendar_store()?.agenda(self.calendar_settings.zone, from, to, MAX_INSTANCES)
    }

    /// The busy time and the free slots of at least `min_minutes` inside the person's working
    /// hours in `[from, to)`.
    pub fn free_busy(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        min_minutes: i64,
    ) -> Result<FreeBusy, CalendarStoreError> {
        let s = &self.calendar_settings;
        self.calendar_store()?.free_busy(s.zone, from, to, min_minutes, &s.hours, &s.me)
    }

    /// Events matching `q` (BM25 over summary, location, description and attendees, fused
    /// with the nearest events by their vectors when an embedder is set; an absent topic finds
    /// nothing), or the window's events when it has no words.
    pub fn search_events(&self, q: &EventQuery) -> Result<Vec<EventHit>, CalendarStoreError> {
        let store = self.calendar_store()?;
        let near = match q.text.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            Some(t) => self.near_events(t),
            None => Vec::new(),
        };
        store.search_near(self.calendar_settings.zone, q, &near)
    }
}
