//! The protocol events a live frontend follows: approval transitions, write-journal transitions,
//! queued watch events and their delivery outcomes, and the agent's turn events (streamed text,
//! tool calls, approval pauses, ends), merged from their durable feeds (`approval_events` in
//! steward.db, `operation_events` in ops.db, `watch_events` and `watch_deliveries` in
//! watches.db, `events` in chats.db) under one opaque [`Cursor`].
//!
//! A client starts from a [`ProtocolSnapshot`] (the current state and the cursor it reflects),
//! then applies events after that cursor. After a reconnect it asks for the events after the
//! last cursor it saw: each feed is strictly ordered and durable, so nothing is lost and,
//! comparing per-feed positions ([`Cursor::covers`]), nothing is applied twice.
//!
//! Two kinds of event are observations rather than feed entries: the progress of a sync run
//! (which another process may be running: the mirror records it with every committed batch)
//! and transitions of the system status. They are levels, not edges: an [`Observer`] reads
//! them ([`Steward::protocol_observe`]) and reports what changed; they carry no feed position,
//! a snapshot holds their current values, and a client resuming after a reconnect is sent the
//! current [`Observation`] after its replay. Applying one twice is harmless; progress a client
//! slept through is summarized by the current value instead of replayed.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::{
    ErrorKind, Steward, StewardError,
    approval::{Approval, ApprovalError, MAX_APPROVAL_PAGE},
    journal::{JournalError, OperationSummary},
    mirror::RunProgress,
    status::{Health, SystemStatus},
    time::now_secs,
};

/// Most events one read returns.
/// Fixed (not a setting).
pub const MAX_PROTOCOL_PAGE: usize = 100;
/// Operations a snapshot lists (the newest).
/// Fixed (not a setting).
pub const SNAPSHOT_OPERATIONS: usize = 20;
/// How often a waiting [`Subscription`] re-reads the feeds.
/// Fixed (not a setting).
pub const SUBSCRIPTION_POLL: Duration = Duration::from_millis(200);
/// How often an [`Observer`] re-reads the system status.
/// Fixed (not a setting).
pub const STATUS_CHECK_INTERVAL: Duration = Duration::from_secs(5);
/// Least time between two progress events of one running sync (its start and its end are
/// always reported at once).
/// Fixed (not a setting).
pub const INGEST_PROGRESS_INTERVAL: Duration = Duration::from_millis(500);

/// Where a client is in every feed. Written
/// `a<approvals>-j<journal>-w<watches>-d<deliveries>-c<chats>`; clients treat it as opaque.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cursor {
    /// Position in the approval feed.
    pub approvals: i64,
    /// Position in the journal feed.
    pub journal: i64,
    /// Position in the watch event queue.
    pub watches: i64,
    /// Position in the watch delivery feed.
    pub deliveries: i64,
    /// Position in the chats' turn-event feed.
    pub chats: i64,
    /// Position in the memory feed (the audit trail's `memory.*` events).
    pub memory: i64,
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a{}-j{}-w{}-d{}-c{}-m{}",
            self.approvals, self.journal, self.watches, self.deliveries, self.chats, self.memory
        )
    }
}

impl std::str::FromStr for Cursor {
    type Err = ProtocolError;

    fn from_str(s: &str) -> Result<Self, ProtocolError> {
        let bad = || ProtocolError::BadCursor(s.chars().take(64).collect());
        let mut parts = s.split('-');
        let mut num = |prefix: char| -> Result<i64, ProtocolError> {
            let p = parts.next().and_then(|p| p.strip_prefix(prefix)).ok_or_else(bad)?;
            if p.is_empty() || p.len() > 18 || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            p.parse().map_err(|_| bad())
        };
        let c = Self {
            approvals: num('a')?,
            journal: num('j')?,
            watches: num('w')?,
            deliveries: num('d')?,
            chats: num('c')?,
            memory: 0,
        };
        // A cursor from before the memory feed has no `-m` part: the feed from its start.
        let memory = match parts.next() {
            None => 0,
            Some(p) => {
                let n = p.strip_prefix('m').ok_or_else(bad)?;
                if n.is_empty() || n.len() > 18 || !n.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad());
                }
                n.parse().map_err(|_| bad())?
            }
        };
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(Self { memory, ..c })
    }
}

impl Cursor {
    /// Whether a client at this cursor has already seen `event`.
    pub fn covers(&self, event: &ProtocolEvent) -> bool {
        match event {
            ProtocolEvent::Approval { seq, .. } => *seq <= self.approvals,
            ProtocolEvent::Operation { seq, .. } => *seq <= self.journal,
            ProtocolEvent::Watch { seq, .. } => *seq <= self.watches,
            ProtocolEvent::WatchDelivery { seq, .. } => *seq <= self.deliveries,
            ProtocolEvent::Chat { seq, .. } => *seq <= self.chats,
            ProtocolEvent::Memory { seq, .. } => *seq <= self.memory,
            // Observations have no feed position: always new.
            ProtocolEvent::Ingest { .. } | ProtocolEvent::Status { .. } => false,
        }
    }

    /// The cursor after applying `event`.
    pub fn after(mut self, event: &ProtocolEvent) -> Self {
        match event {
            ProtocolEvent::Approval { seq, .. } => self.approvals = self.approvals.max(*seq),
            ProtocolEvent::Operation { seq, .. } => self.journal = self.journal.max(*seq),
            ProtocolEvent::Watch { seq, .. } => self.watches = self.watches.max(*seq),
            ProtocolEvent::WatchDelivery { seq, .. } => {
                self.deliveries = self.deliveries.max(*seq);
            }
            ProtocolEvent::Chat { seq, .. } => self.chats = self.chats.max(*seq),
            ProtocolEvent::Memory { seq, .. } => self.memory = self.memory.max(*seq),
            ProtocolEvent::Ingest { .. } | ProtocolEvent::Status { .. } => {}
        }
        self
    }
}

/// One event of the protocol.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ProtocolEvent {
    /// An approval request was made, resolved, expired, cancelled, or refused an attempt
    /// (`pin_failed`, `pin_locked`, `self_resolve_denied`).
    Approval {
        /// Position in the approval feed.
        seq: i64,
        /// The request.
        approval_id: i64,
        /// `requested`, `approved`, `edited`, `denied`, `revision_requested`, `expired`, …
        event: String,
        /// Who.
        actor: String,
        /// Unix seconds.
        at: i64,
    },
    /// A journaled write operation changed state.
    Operation {
        /// Position in the journal feed.
        seq: i64,
        /// The operation.
        operation_id: i64,
        /// The state it left (absent when it was recorded).
        from: Option<String>,
        /// The state it entered.
        to: String,
        /// Unix seconds.
        at: i64,
    },
    /// A watch queued an event (a transition matched its rules, or it expired).
    Watch {
        /// Position in the watch event queue (the event's id).
        seq: i64,
        /// The watch.
        watch_id: i64,
        /// The event type (`time.reached`, `watch.expired`, …).
        event_type: String,
        /// The rules it matched.
        matched_rules: Vec<String>,
        /// The deterministic text.
        text: String,
        /// Unix seconds.
        at: i64,
    },
    /// A queued watch event was delivered, or given up after its attempts ran out.
    WatchDelivery {
        /// Position in the delivery feed.
        seq: i64,
        /// The queued event (the `seq` of its `watch` event).
        event_id: i64,
        /// The watch.
        watch_id: i64,
        /// Delivered, or given up.
        outcome: crate::watch::DeliveryResult,
        /// The notification the person was given (absent when none was composed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// Unix seconds.
        at: i64,
    },
    /// Something happened in a chat's turn (see [`crate::agent::TurnEvent`]).
    Chat {
        /// Position in the chats' event feed.
        seq: i64,
        /// The turn.
        run_id: String,
        /// The chat.
        chat_id: String,
        /// What happened.
        event: crate::agent::TurnEvent,
        /// Unix seconds.
        at: i64,
    },
    /// Memory changed: a proposal arrived (`proposed`), a person accepted, rejected or forgot
    /// (`accepted`, `rejected`, `forgotten`), a note was written after an approval
    /// (`written`), edited outside Steward (`edited_outside`), a proposal expired or a
    /// rejected fact came back and was dropped (`expired`, `suppressed`). Ids only, never
    /// the words.
    Memory {
        /// Position in the memory feed.
        seq: i64,
        /// What happened.
        event: String,
        /// The note or proposal, when the event has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// Who.
        actor: String,
        /// Unix seconds.
        at: i64,
    },
    /// A sync run started, progressed (at most every [`INGEST_PROGRESS_INTERVAL`]) or
    /// finished. An observation: no feed position.
    Ingest {
        /// How far the run is.
        progress: RunProgress,
        /// Unix seconds.
        at: i64,
    },
    /// An item of the system status changed state. An observation: no feed position.
    Status {
        /// The item (`disk`, `ingest`, `watches`, …).
        name: String,
        /// Its state before; absent for an item that appeared.
        from: Option<Health>,
        /// Its state now.
        to: Health,
        /// For a person.
        detail: String,
        /// Unix seconds.
        at: i64,
    },
}

impl ProtocolEvent {
    fn at(&self) -> i64 {
        match self {
            Self::Approval { at, .. }
            | Self::Operation { at, .. }
            | Self::Watch { at, .. }
            | Self::WatchDelivery { at, .. }
            | Self::Chat { at, .. }
            | Self::Memory { at, .. }
            | Self::Ingest { at, .. }
            | Self::Status { at, .. } => *at,
        }
    }
}

/// The current values of the observed levels.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Observation {
    /// The newest sync run (absent before the first).
    pub ingest: Option<RunProgress>,
    /// The system status.
    pub system: SystemStatus,
}

/// Follows the observed levels between calls of [`Steward::protocol_observe`].
#[derive(Debug)]
pub struct Observer {
    started: bool,
    ingest: Option<RunProgress>,
    ingest_reported: Option<Instant>,
    status: Vec<(String, Health)>,
    status_checked: Option<Instant>,
    status_interval: Duration,
}

impl Default for Observer {
    fn default() -> Self {
        Self::new(STATUS_CHECK_INTERVAL)
    }
}

impl Observer {
    /// An observer that re-reads the system status at most every `status_interval`.
    pub fn new(status_interval: Duration) -> Self {
        Self {
            started: false,
            ingest: None,
            ingest_reported: None,
            status: Vec::new(),
            status_checked: None,
            status_interval,
        }
    }
}

/// An event and the cursor a client is at once it has applied it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Envelope {
    /// The cursor after this event.
    pub cursor: String,
    /// The event.
    #[serde(flatten)]
    pub event: ProtocolEvent,
}

/// The state a new subscriber starts from.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ProtocolSnapshot {
    /// The feeds' positions, read before the lists (an event may repeat, none is lost).
    pub cursor: String,
    /// Requests waiting for a person, newest first.
    pub pending_approvals: Vec<Approval>,
    /// The newest journaled operations.
    pub operations: Vec<OperationSummary>,
    /// The observed levels now.
    #[serde(flatten)]
    pub observation: Observation,
}

/// Errors of the protocol feed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A cursor that is not `a<N>-j<N>-w<N>-d<N>-c<N>-m<N>` (or, from before the memory
    /// feed, without `-m<N>`).
    #[error("{0:?} is not a protocol cursor (expected the cursor of a snapshot or event)")]
    BadCursor(String),
    /// A page size out of range.
    #[error("limit {0} is out of range (1..={MAX_PROTOCOL_PAGE})")]
    OutOfRange(usize),
    /// The approval feed failed.
    #[error(transparent)]
    Approval(#[from] ApprovalError),
    /// The journal feed failed.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The watch feed failed.
    #[error(transparent)]
    Watch(#[from] crate::watch::WatchError),
    /// The mirror could not be read.
    #[error(transparent)]
    Mirror(crate::store::StoreError),
    /// The chats' event feed failed.
    #[error(transparent)]
    Chats(Box<crate::agent::AgentError>),
    /// The memory feed (the audit trail) failed.
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
}

impl From<crate::agent::AgentError> for ProtocolError {
    fn from(e: crate::agent::AgentError) -> Self {
        Self::Chats(Box::new(e))
    }
}

impl StewardError for ProtocolError {
    fn code(&self) -> &'static str {
        match self {
            Self::BadCursor(_) => "PROTOCOL_BAD_CURSOR",
            Self::OutOfRange(_) => "LIMIT_OUT_OF_RANGE",
            Self::Approval(e) => e.code(),
            Self::Journal(e) => e.code(),
            Self::Watch(e) => e.code(),
            Self::Mirror(e) => e.code(),
            Self::Chats(e) => e.code(),
            Self::Audit(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::BadCursor(_) | Self::OutOfRange(_) => ErrorKind::InvalidInput,
            Self::Approval(e) => e.kind(),
            Self::Journal(e) => e.kind(),
            Self::Watch(e) => e.kind(),
            Self::Mirror(e) => e.kind(),
            Self::Chats(e) => e.kind(),
            Self::Audit(e) => e.kind(),
        }
    }
}

/// A subscriber's position in the protocol: the feeds' cursor and the observed levels. What a
/// frontend without a server (the FFI's callback streams) follows; see
/// [`Steward::protocol_subscribe`].
#[derive(Debug)]
pub struct Subscription {
    cursor: Cursor,
    observer: Observer,
}

impl Subscription {
    /// The cursor of the last event returned (or of the snapshot).
    pub fn cursor(&self) -> Cursor {
        self.cursor
    }

    /// The next events: the feeds' entries after the cursor and any change of the observed
    /// levels, waiting up to `timeout` (re-reading every [`SUBSCRIPTION_POLL`]) while there are
    /// none (a zero `timeout` makes one pass). Returns early, possibly empty, once `cancelled`
    /// says so.
    pub fn next(
        &mut self,
        steward: &Steward,
        timeout: Duration,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<Envelope>, ProtocolError> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut out = steward.protocol_after(self.cursor, MAX_PROTOCOL_PAGE)?;
            for e in &out {
                self.cursor = self.cursor.after(&e.event);
            }
            for event in steward.protocol_observe(&mut self.observer)? {
                out.push(Envelope { cursor: self.cursor.to_string(), event });
            }
            let now = Instant::now();
            if !out.is_empty() || now >= deadline || cancelled() {
                return Ok(out);
            }
            std::thread::sleep(SUBSCRIPTION_POLL.min(deadline - now));
        }
    }
}

impl Steward {
    /// Starts following the protocol. Without `after`: the current state (a snapshot) and a
    /// subscription from its cursor. With the cursor of the last event a subscriber applied: no
    /// snapshot, and the subscription returns what happened since (each feed durable, so
    /// nothing is lost or repeated); the levels are then in [`Steward::protocol_observation`].
    pub fn protocol_subscribe(
        &self,
        after: Option<Cursor>,
    ) -> Result<(Option<ProtocolSnapshot>, Subscription), ProtocolError> {
        let mut observer = Observer::default();
        // The baseline of the levels: a change after it is reported.
        self.protocol_observe(&mut observer)?;
        let (snapshot, cursor) = match after {
            Some(c) => (None, c),
            None => {
                let snap = self.protocol_snapshot()?;
                let cursor = snap.cursor.parse()?;
                (Some(snap), cursor)
            }
        };
        Ok((snapshot, Subscription { cursor, observer }))
    }

    /// The current state and the cursor it reflects.
    pub fn protocol_snapshot(&self) -> Result<ProtocolSnapshot, ProtocolError> {
        let journal = self.journal()?;
        let journal_at = journal.feed_position()?;
        let watches_at = self.watches()?.feed_position()?;
        let deliveries_at = self.watches()?.delivery_position()?;
        let chats_at = self.chat_store()?.event_position(None)?;
        let approvals = self.approvals()?;
        let sub = approvals.subscribe(None)?;
        debug_assert!(sub.pending.len() <= MAX_APPROVAL_PAGE);
        let operations =
            journal.list(None, 0, SNAPSHOT_OPERATIONS)?.iter().map(Into::into).collect();
        Ok(ProtocolSnapshot {
            cursor: Cursor {
                approvals: sub.cursor,
                journal: journal_at,
                watches: watches_at,
                deliveries: deliveries_at,
                chats: chats_at,
                memory: self.audit()?.position()?,
            }
            .to_string(),
            pending_approvals: sub.pending,
            operations,
            observation: self.protocol_observation()?,
        })
    }

    /// The observed levels now: the newest sync run and the system status.
    pub fn protocol_observation(&self) -> Result<Observation, ProtocolError> {
        let ingest = self.mirror().last_run().map_err(ProtocolError::Mirror)?;
        Ok(Observation { ingest, system: self.system_status() })
    }

    /// What changed in the observed levels since the observer's last call: a sync run that
    /// started, progressed or finished, and each status item whose state changed (the status
    /// is re-read at the observer's interval, [`STATUS_CHECK_INTERVAL`] by default). The first
    /// call only records where things are (a subscriber's snapshot carries the current values).
    pub fn protocol_observe(
        &self,
        observer: &mut Observer,
    ) -> Result<Vec<ProtocolEvent>, ProtocolError> {
        let now = Instant::now();
        let at = now_secs();
        let mut out = Vec::new();
        let run = self.mirror().last_run().map_err(ProtocolError::Mirror)?;
        if run != observer.ingest {
            let milestone = match (&run, &observer.ingest) {
                (Some(r), Some(p)) => {
                    r.run_id != p.run_id
                        || r.finished_at != p.finished_at
                        || (r.files_done == r.files_total) != (p.files_done == p.files_total)
                }
                _ => true,
            };
            let due = observer
                .ingest_reported
                .is_none_or(|t| now.duration_since(t) >= INGEST_PROGRESS_INTERVAL);
            if observer.started && (milestone || due) {
                if let Some(progress) = run.clone() {
                    out.push(ProtocolEvent::Ingest { progress, at });
                }
                observer.ingest_reported = Some(now);
            }
            // A throttled change stays unrecorded, so a later call reports it.
            if !observer.started || milestone || due {
                observer.ingest = run;
            }
        }
        if observer.status_checked.is_none_or(|t| now.duration_since(t) >= observer.status_interval)
        {
            let status = self.system_status();
            for i in &status.items {
                let before = observer.status.iter().find(|(n, _)| *n == i.name).map(|(_, h)| *h);
                if observer.started && before != Some(i.status) {
                    out.push(ProtocolEvent::Status {
                        name: i.name.clone(),
                        from: before,
                        to: i.status,
                        detail: i.detail.clone(),
                        at,
                    });
                }
            }
            observer.status = status.items.into_iter().map(|i| (i.name, i.status)).collect();
            observer.status_checked = Some(now);
        }
        observer.started = true;
        Ok(out)
    }

    /// The feeds' current positions.
    pub fn protocol_cursor(&self) -> Result<Cursor, ProtocolError> {
        let journal = self.journal()?.feed_position()?;
        let approvals = self.approvals()?.feed_position()?;
        let watches = self.watches()?.feed_position()?;
        let deliveries = self.watches()?.delivery_position()?;
        let chats = self.chat_store()?.event_position(None)?;
        let memory = self.audit()?.position()?;
        Ok(Cursor { approvals, journal, watches, deliveries, chats, memory })
    }

    /// Up to `limit` events after `cursor`, in time order (each feed in its own order).
    pub fn protocol_after(
        &self,
        cursor: Cursor,
        limit: usize,
    ) -> Result<Vec<Envelope>, ProtocolError> {
        if limit == 0 || limit > MAX_PROTOCOL_PAGE {
            return Err(ProtocolError::OutOfRange(limit));
        }
        let approvals = self.approvals()?.events_after(cursor.approvals, limit)?;
        let ops = self.journal()?.events_after(cursor.journal, limit)?;
        let watch_events = self.watches()?.events_after(cursor.watches, limit)?;
        let deliveries = self.watches()?.deliveries_after(cursor.deliveries, limit)?;
        let chat_events = self.chat_store()?.events_after(None, cursor.chats, limit)?;
        let memory_events = self.audit()?.memory_after(cursor.memory, limit)?;
        let approvals = approvals.into_iter().map(|e| ProtocolEvent::Approval {
            seq: e.seq,
            approval_id: e.approval_id,
            event: e.event,
            actor: e.actor,
            at: e.at,
        });
        let ops = ops.into_iter().map(|e| ProtocolEvent::Operation {
            seq: e.seq,
            operation_id: e.operation_id,
            from: e.from,
            to: e.to,
            at: e.at,
        });
        let watches = watch_events.into_iter().map(|e| ProtocolEvent::Watch {
            seq: e.id,
            watch_id: e.watch_id,
            event_type: e.event.kind,
            matched_rules: e.matched_rules,
            text: e.event.fallback_text,
            at: e.created_at,
        });
        let deliveries = deliveries.into_iter().map(|d| ProtocolEvent::WatchDelivery {
            seq: d.seq,
            event_id: d.event_id,
            watch_id: d.watch_id,
            outcome: d.outcome,
            text: d.text,
            at: d.at,
        });
        let chats = chat_events.into_iter().map(|e| ProtocolEvent::Chat {
            seq: e.seq,
            run_id: e.run_id,
            chat_id: e.chat_id,
            event: e.event,
            at: e.at,
        });
        let memory = memory_events.into_iter().map(|(seq, at, actor, event, payload)| {
            ProtocolEvent::Memory {
                seq,
                event: event.strip_prefix("memory.").unwrap_or(&event).to_owned(),
                id: payload.get("id").and_then(|v| v.as_str()).map(str::to_owned),
                actor,
                at,
            }
        });
        // Each feed is in order; merging by time keeps every feed's order (ties: approvals,
        // then the journal, then watches, then deliveries, then chats, then memory).
        let mut feeds: Vec<std::iter::Peekable<Box<dyn Iterator<Item = ProtocolEvent>>>> = vec![
            (Box::new(approvals) as Box<dyn Iterator<Item = ProtocolEvent>>).peekable(),
            (Box::new(ops) as Box<dyn Iterator<Item = ProtocolEvent>>).peekable(),
            (Box::new(watches) as Box<dyn Iterator<Item = ProtocolEvent>>).peekable(),
            (Box::new(deliveries) as Box<dyn Iterator<Item = ProtocolEvent>>).peekable(),
            (Box::new(chats) as Box<dyn Iterator<Item = ProtocolEvent>>).peekable(),
            (Box::new(memory) as Box<dyn Iterator<Item = ProtocolEvent>>).peekable(),
        ];
        let mut out = Vec::new();
        let mut at = cursor;
        while out.len() < limit {
            let next = feeds
                .iter_mut()
                .enumerate()
                .filter_map(|(i, f)| f.peek().map(|e| (e.at(), i)))
                .min()
                .and_then(|(_, i)| feeds[i].next());
            let Some(event) = next else { break };
            at = at.after(&event);
            out.push(Envelope { cursor: at.to_string(), event });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_bad_ones_are_typed() {
        let c: Cursor = "a12-j7-w3-d2-c5-m4".parse().unwrap();
        assert_eq!(
            c,
            Cursor { approvals: 12, journal: 7, watches: 3, deliveries: 2, chats: 5, memory: 4 }
        );
        assert_eq!(c.to_string(), "a12-j7-w3-d2-c5-m4");
        // A cursor from before the memory feed: the feed from its start.
        let old: Cursor = "a12-j7-w3-d2-c5".parse().unwrap();
        assert_eq!(old.memory, 0);
        for bad in [
            "",
            "a-j-w",
            "a1",
            "a1-j2",
            "j1-a2-w3",
            "a1-j-2-w3",
            "a1-jx-w1",
            "a99999999999999999999-j1-w1",
            "a1-j1-w1",
            "a1-j1-w1-d1-c1 ",
            "a1-j1-w1-d1",
            "a1-j1-w1-d1-c1-x1",
            "a1-j1-w1-d1-x1",
            "a1-j1-w1-x1",
            "a1-j1-w1-d1-c1-m",
            "a1-j1-w1-d1-c1-mx",
            "a1-j1-w1-d1-c1-m1-x1",
        ] {
            assert_eq!(bad.parse::<Cursor>().unwrap_err().code(), "PROTOCOL_BAD_CURSOR", "{bad}");
        }
        let e = ProtocolEvent::Operation {
            seq: 8,
            operation_id: 1,
            from: None,
            to: "pending".into(),
            at: 0,
        };
        assert!(!c.covers(&e));
        assert!(c.after(&e).covers(&e));
        assert_eq!(c.after(&e).to_string(), "a12-j8-w3-d2-c5-m4");
        let turn = ProtocolEvent::Chat {
            seq: 9,
            run_id: "run_1".into(),
            chat_id: "chat_1".into(),
            event: crate::agent::TurnEvent::TextDelta { text: "Hi".into() },
            at: 0,
        };
        assert!(!c.covers(&turn));
        assert_eq!(c.after(&turn).to_string(), "a12-j7-w3-d2-c9-m4");
    }
}
