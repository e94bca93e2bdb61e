//! Watches across the FFI: create from a definition, list, stop, poll, read queued events.

use steward_core::{
    WatchProposal,
    watch::{PollReport, QueuedEvent, WatchDefinition, WatchEventQuery, WatchQuery, WatchSummary},
};

use crate::{FfiError, Steward};

/// A watch as a list shows it.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct WatchInfo {
    /// Its id.
    pub id: i64,
    /// The source (`time`, `train`).
    pub source: String,
    /// What it watches.
    pub resource_ref: String,
    /// The person's words.
    pub instruction: String,
    /// Its state.
    pub status: crate::states::WatchStatus,
    /// Unix seconds.
    pub expires_at: i64,
    /// The last source failure, until a check succeeds.
    pub last_error: Option<String>,
    /// The person's approval of its grants, when it has any.
    pub approval_id: Option<i64>,
}

/// What proposing a watch did: started it, or asked for the approval that will.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct WatchProposalInfo {
    /// The watch, when it had no grants and started.
    pub watch: Option<WatchInfo>,
    /// The approval request that starts it, when its rules grant actions.
    pub approval_id: Option<i64>,
    /// The card's words for what the watch may do.
    pub summary: Option<String>,
}

impl From<WatchSummary> for WatchInfo {
    fn from(w: WatchSummary) -> Self {
        Self {
            id: w.id,
            source: w.source,
            resource_ref: w.resource_ref,
            instruction: w.instruction,
            status: w.status.into(),
            expires_at: w.expires_at,
            last_error: w.last_error,
            approval_id: w.approval_id,
        }
    }
}

/// A queued watch event.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct WatchEventInfo {
    /// Its id.
    pub id: i64,
    /// The watch.
    pub watch_id: i64,
    /// `time.reached`, `watch.expired`, …
    pub event_type: String,
    /// The rules it matched.
    pub matched_rules: Vec<String>,
    /// The deterministic text.
    pub text: String,
    /// Its state.
    pub status: crate::states::WatchEventStatus,
}

impl From<QueuedEvent> for WatchEventInfo {
    fn from(e: QueuedEvent) -> Self {
        Self {
            id: e.id,
            watch_id: e.watch_id,
            event_type: e.event.kind,
            matched_rules: e.matched_rules,
            text: e.event.fallback_text,
            status: e.status.into(),
        }
    }
}

/// What one poll did.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct PollSummary {
    /// Watches checked.
    pub checked: u64,
    /// Events queued.
    pub queued: u64,
    /// Watches that expired.
    pub expired: u64,
    /// Checks that failed at their source.
    pub failed: u64,
    /// Seconds until the next poll is due.
    pub next_poll_secs: u64,
}

impl From<PollReport> for PollSummary {
    fn from(r: PollReport) -> Self {
        Self {
            checked: r.checked as u64,
            queued: r.queued as u64,
            expired: r.expired as u64,
            failed: r.failed as u64,
            next_poll_secs: r.next_poll_secs,
        }
    }
}

fn ffi(e: &steward_core::watch::WatchError) -> FfiError {
    FfiError::from_core(e)
}

#[uniffi::export]
impl Steward {
    /// Creates a watch from its JSON definition (`source`, `resource_ref`, `instruction`,
    /// `rules`, …: the same document `POST /watches` takes).
    pub fn create_watch(&self, definition_json: String) -> Result<WatchInfo, FfiError> {
        let def = WatchDefinition::from_json(&definition_json).map_err(|e| ffi(&e))?;
        let w = self.inner().create_watch(&def);
        w.map(Into::into).map_err(|e| ffi(&e))
    }

    /// Creates a watch, or — when its rules grant future actions — requests the Confirm
    /// approval (asked by `agent`, an `agent:` identity) whose approval starts it.
    pub fn propose_watch(
        &self,
        definition_json: String,
        agent: String,
    ) -> Result<WatchProposalInfo, FfiError> {
        let def = WatchDefinition::from_json(&definition_json).map_err(|e| ffi(&e))?;
        Ok(match self.inner().propose_watch(&def, &agent).map_err(|e| ffi(&e))? {
            WatchProposal::Started(w) => {
                WatchProposalInfo { watch: Some(w.into()), approval_id: None, summary: None }
            }
            WatchProposal::NeedsApproval(a) => {
                WatchProposalInfo { watch: None, approval_id: Some(a.id), summary: Some(a.summary) }
            }
        })
    }

    /// Starts the watch an approved `watch.create_agent` request describes (idempotent).
    pub fn create_approved_watch(&self, approval_id: i64) -> Result<WatchInfo, FfiError> {
        self.inner().create_approved_watch(approval_id).map(Into::into).map_err(|e| ffi(&e))
    }

    /// Watches, newest first, optionally in one state.
    pub fn watches(
        &self,
        status: Option<crate::states::WatchStatus>,
        offset: u32,
        limit: u32,
    ) -> Result<Vec<WatchInfo>, FfiError> {
        let q = WatchQuery {
            status: status.map(Into::into),
            offset: offset as usize,
            limit: Some(limit as usize),
        };
        let list = self.inner().list_watches(&q).map_err(|e| ffi(&e))?;
        Ok(list.into_iter().map(Into::into).collect())
    }

    /// Stops a watch (idempotent).
    pub fn stop_watch(&self, id: i64) -> Result<WatchInfo, FfiError> {
        let w = self.inner().stop_watch(id);
        w.map(Into::into).map_err(|e| ffi(&e))
    }

    /// Runs one poll cycle at `now` (Unix seconds; absent: the clock).
    pub fn poll_watches(&self, now: Option<i64>) -> Result<PollSummary, FfiError> {
        self.inner().poll_watches(now).map(Into::into).map_err(|e| ffi(&e))
    }

    /// [`Steward::poll_watches`] as an async call: the poll (which asks sources over the
    /// network) runs on the library's runtime.
    pub async fn poll_watches_async(&self, now: Option<i64>) -> Result<PollSummary, FfiError> {
        let steward = self.handle();
        crate::runtime::blocking(move || {
            steward.poll_watches(now).map(Into::into).map_err(|e| ffi(&e))
        })
        .await
    }

    /// Queued watch events, oldest first.
    pub fn watch_events(
        &self,
        pending: bool,
        offset: u32,
        limit: u32,
    ) -> Result<Vec<WatchEventInfo>, FfiError> {
        let q = WatchEventQuery {
            pending,
            offset: offset as usize,
            limit: Some(limit as usize),
            ..WatchEventQuery::default()
        };
        let list = self.inner().watch_events(&q).map_err(|e| ffi(&e))?;
        Ok(list.into_iter().map(Into::into).collect())
    }
}
