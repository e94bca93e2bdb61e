//! Row readers of `watches.db`.

use super::*;

pub(super) const WATCH_COLUMNS: &str =
    "id, source, resource_ref, rules, instruction, chat, status, snapshot,
    created_at, expires_at, last_checked_at, last_error, approval_id, parent_id, attempt";

pub(super) fn watch_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<WatchSummary> {
    Ok(WatchSummary {
        id: r.get(0)?,
        source: r.get(1)?,
        resource_ref: r.get(2)?,
        rules: json_column(r, 3)?,
        instruction: r.get(4)?,
        chat: r.get(5)?,
        status: r.get(6)?,
        snapshot: json_column(r, 7)?,
        created_at: r.get(8)?,
        expires_at: r.get(9)?,
        last_checked_at: r.get(10)?,
        last_error: r.get(11)?,
        approval_id: r.get(12)?,
        parent_id: r.get(13)?,
        attempt: r.get(14)?,
    })
}

pub(super) const RUN_COLUMNS: &str =
    "id, action_key, coalesce(watch_id, 0), event_id, rule_id, tool, status,
    coalesce(arguments, '{}'), outcome, error, started_at, finished_at, child_watch_id";

pub(super) fn run_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ActionRun> {
    Ok(ActionRun {
        id: r.get(0)?,
        action_key: r.get(1)?,
        watch_id: r.get(2)?,
        event_id: r.get(3)?,
        rule_id: r.get(4)?,
        tool: r.get(5)?,
        status: r.get(6)?,
        arguments: json_column(r, 7)?,
        outcome: r.get(8)?,
        error: r.get(9)?,
        started_at: r.get(10)?,
        finished_at: r.get(11)?,
        child_watch_id: r.get(12)?,
    })
}

pub(super) const EVENT_COLUMNS: &str =
    "id, watch_id, event_key, matched_rules, event, status, notification,
    attempts, created_at, delivered_at, last_error";

pub(super) fn event_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<QueuedEvent> {
    Ok(QueuedEvent {
        id: r.get(0)?,
        watch_id: r.get(1)?,
        event_key: r.get(2)?,
        matched_rules: json_column(r, 3)?,
        event: json_column(r, 4)?,
        status: r.get(5)?,
        notification: r.get(6)?,
        attempts: r.get(7)?,
        created_at: r.get(8)?,
        delivered_at: r.get(9)?,
        last_error: r.get(10)?,
    })
}
