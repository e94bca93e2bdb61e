//! The protocol events a live frontend follows: approval transitions and write-journal
//! transitions, merged from their durable feeds (`approval_events` in steward.db,
//! `operation_events` in ops.db) under one opaque [`Cursor`].
//!
//! A client starts from a [`ProtocolSnapshot`] (the current state and the cursor it reflects),
//! then applies events after that cursor. After a reconnect it asks for the events after the
//! last cursor it saw: each feed is strictly ordered and durable, so nothing is lost and,
//! comparing per-feed positions ([`Cursor::covers`]), nothing is applied twice.

use serde::Serialize;

use crate::{
    ErrorKind, Steward, StewardError,
    approval::{Approval, ApprovalError, MAX_APPROVAL_PAGE},
    journal::{JournalError, OperationSummary},
};

/// Most events one read returns.
pub const MAX_PROTOCOL_PAGE: usize = 100;
/// Operations a snapshot lists (the newest).
pub const SNAPSHOT_OPERATIONS: usize = 20;

/// Where a client is in every feed. Written `a<approvals>-j<journal>`; clients treat it as
/// opaque.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cursor {
    /// Position in the approval feed.
    pub approvals: i64,
    /// Position in the journal feed.
    pub journal: i64,
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a{}-j{}", self.approvals, self.journal)
    }
}

impl std::str::FromStr for Cursor {
    type Err = ProtocolError;

    fn from_str(s: &str) -> Result<Self, ProtocolError> {
        let bad = || ProtocolError::BadCursor(s.chars().take(64).collect());
        let (a, j) = s.split_once('-').ok_or_else(bad)?;
        let num = |p: Option<&str>| -> Result<i64, ProtocolError> {
            let p = p.ok_or_else(bad)?;
            if p.is_empty() || p.len() > 18 || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            p.parse().map_err(|_| bad())
        };
        Ok(Self { approvals: num(a.strip_prefix('a'))?, journal: num(j.strip_prefix('j'))? })
    }
}

impl Cursor {
    /// Whether a client at this cursor has already seen `event`.
    pub fn covers(&self, event: &ProtocolEvent) -> bool {
        match event {
            ProtocolEvent::Approval { seq, .. } => *seq <= self.approvals,
            ProtocolEvent::Operation { seq, .. } => *seq <= self.journal,
        }
    }

    /// The cursor after applying `event`.
    pub fn after(mut self, event: &ProtocolEvent) -> Self {
        match event {
            ProtocolEvent::Approval { seq, .. } => self.approvals = self.approvals.max(*seq),
            ProtocolEvent::Operation { seq, .. } => self.journal = self.journal.max(*seq),
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
}

impl ProtocolEvent {
    fn at(&self) -> i64 {
        match self {
            Self::Approval { at, .. } | Self::Operation { at, .. } => *at,
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
}

/// Errors of the protocol feed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A cursor that is not `a<N>-j<N>`.
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
}

impl StewardError for ProtocolError {
    fn code(&self) -> &'static str {
        match self {
            Self::BadCursor(_) => "PROTOCOL_BAD_CURSOR",
            Self::OutOfRange(_) => "LIMIT_OUT_OF_RANGE",
            Self::Approval(e) => e.code(),
            Self::Journal(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::BadCursor(_) | Self::OutOfRange(_) => ErrorKind::InvalidInput,
            Self::Approval(e) => e.kind(),
            Self::Journal(e) => e.kind(),
        }
    }
}

impl Steward {
    /// The current state and the cursor it reflects.
    pub fn protocol_snapshot(&self) -> Result<ProtocolSnapshot, ProtocolError> {
        let journal = self.journal()?;
        let journal_at = journal.feed_position()?;
        let approvals = self.approvals()?;
        let sub = approvals.subscribe(None)?;
        debug_assert!(sub.pending.len() <= MAX_APPROVAL_PAGE);
        let operations =
            journal.list(None, 0, SNAPSHOT_OPERATIONS)?.iter().map(Into::into).collect();
        Ok(ProtocolSnapshot {
            cursor: Cursor { approvals: sub.cursor, journal: journal_at }.to_string(),
            pending_approvals: sub.pending,
            operations,
        })
    }

    /// The feeds' current positions.
    pub fn protocol_cursor(&self) -> Result<Cursor, ProtocolError> {
        let journal = self.journal()?.feed_position()?;
        let approvals = self.approvals()?.feed_position()?;
        Ok(Cursor { approvals, journal })
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
        let mut a = approvals
            .into_iter()
            .map(|e| ProtocolEvent::Approval {
                seq: e.seq,
                approval_id: e.approval_id,
                event: e.event,
                actor: e.actor,
                at: e.at,
            })
            .peekable();
        let mut o = ops
            .into_iter()
            .map(|e| ProtocolEvent::Operation {
                seq: e.seq,
                operation_id: e.operation_id,
                from: e.from,
                to: e.to,
                at: e.at,
            })
            .peekable();
        let mut out = Vec::new();
        let mut at = cursor;
        while out.len() < limit {
            let next = match (a.peek(), o.peek()) {
                (Some(x), Some(y)) if x.at() <= y.at() => a.next(),
                (Some(_), Some(_)) => o.next(),
                (Some(_), None) => a.next(),
                (None, Some(_)) => o.next(),
                (None, None) => None,
            };
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
        let c: Cursor = "a12-j7".parse().unwrap();
        assert_eq!(c, Cursor { approvals: 12, journal: 7 });
        assert_eq!(c.to_string(), "a12-j7");
        for bad in
            ["", "a-j", "a1", "j1-a2", "a1-j-2", "a1-jx", "a99999999999999999999-j1", "a1-j1 "]
        {
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
        assert_eq!(c.after(&e).to_string(), "a12-j8");
    }
}
