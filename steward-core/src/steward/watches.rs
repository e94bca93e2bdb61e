//! The facade's watches: what frontends call instead of the watch store.

use super::Steward;
use crate::{
    time::now_secs,
    watch::{
        ActionRun, Delivery, DeliveryReport, GrantedAction, PollReport, QueuedEvent,
        WatchDefinition, WatchError, WatchEventQuery, WatchHealth, WatchQuery, WatchSummary,
    },
};

impl Steward {
    /// Starts a watch whose rules grant nothing (one that grants actions needs a person's
    /// approval: [`Steward::propose_watch`]).
    pub fn create_watch(&self, def: &WatchDefinition) -> Result<WatchSummary, WatchError> {
        self.watches()?.create(def, now_secs())
    }

    /// A page of watches, newest first.
    pub fn list_watches(&self, query: &WatchQuery) -> Result<Vec<WatchSummary>, WatchError> {
        self.watches()?.list(query)
    }

    /// One watch.
    pub fn watch(&self, id: i64) -> Result<WatchSummary, WatchError> {
        self.watches()?.get(id)
    }

    /// Counts for a status screen: active watches, failing sources, events to deliver and
    /// events given up.
    pub fn watch_health(&self) -> Result<WatchHealth, WatchError> {
        self.watches()?.health()
    }

    /// Delivers up to `limit` pending events through `delivery`, oldest first, at `now`
    /// (Unix seconds; `None`: the clock): what the runner's delivery job does, for a program
    /// that brings its own channel.
    pub fn deliver_watch_events(
        &self,
        delivery: &dyn Delivery,
        limit: usize,
        now: Option<i64>,
    ) -> Result<DeliveryReport, WatchError> {
        self.watches()?.deliver(delivery, limit, now.unwrap_or_else(now_secs))
    }

    /// Stops a watch (idempotent: only an active watch changes).
    pub fn stop_watch(&self, id: i64) -> Result<WatchSummary, WatchError> {
        self.watches()?.stop(id, now_secs())
    }

    /// One poll cycle at `now` (Unix seconds; `None`: the clock).
    pub fn poll_watches(&self, now: Option<i64>) -> Result<PollReport, WatchError> {
        self.watches()?.poll(now.unwrap_or_else(now_secs))
    }

    /// Queued events, oldest first.
    pub fn watch_events(&self, query: &WatchEventQuery) -> Result<Vec<QueuedEvent>, WatchError> {
        self.watches()?.events(query)
    }

    /// The actions an event's grants allow, with their checked arguments.
    pub fn watch_granted_actions(&self, event_id: i64) -> Result<Vec<GrantedAction>, WatchError> {
        self.watches()?.granted_actions(event_id)
    }

    /// The granted actions an event ran, with how each ended.
    pub fn watch_action_runs(&self, event_id: i64) -> Result<Vec<ActionRun>, WatchError> {
        self.watches()?.action_runs(event_id)
    }
}
