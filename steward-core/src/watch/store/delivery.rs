//! The event queue and its delivery: composed texts stored before sending, in order, with
//! the delivery feed.

use super::*;

impl Watches {
    /// A page of events, oldest first.
    pub fn events(&self, query: &WatchEventQuery) -> Result<Vec<QueuedEvent>, WatchError> {
        let limit = page(query.limit)?;
        self.db.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM watch_events
                 WHERE (?1 = 0 OR status = 'pending') AND (?2 IS NULL OR watch_id = ?2)
                 ORDER BY id LIMIT ?3 OFFSET ?4"
            ))
            .and_then(|mut s| {
                s.query_map(
                    params![query.pending, query.watch_id, limit, offset(query.offset)],
                    event_row,
                )?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(q("list events"))
        })
    }

    /// Events queued after id `after`, oldest first (the protocol feed; 1..=100).
    pub fn events_after(&self, after: i64, limit: usize) -> Result<Vec<QueuedEvent>, WatchError> {
        let limit = page(Some(limit))?;
        self.db.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM watch_events WHERE id > ?1 ORDER BY id LIMIT ?2"
            ))
            .and_then(|mut s| {
                s.query_map(params![after, limit], event_row)?.collect::<Result<Vec<_>, _>>()
            })
            .map_err(q("event feed"))
        })
    }

    /// Counts for a status screen: active watches, those whose source failed at their last
    /// check, events still to deliver and events given up.
    pub fn health(&self) -> Result<WatchHealth, WatchError> {
        self.db.read(|c| {
            c.query_row(
                "SELECT (SELECT count(*) FROM watches WHERE status = 'active'),
                        (SELECT count(*) FROM watches WHERE status = 'active'
                           AND last_error IS NOT NULL),
                        (SELECT count(*) FROM watch_events WHERE status = 'pending'),
                        (SELECT count(*) FROM watch_events WHERE status = 'failed'),
                        (SELECT max(last_checked_at) FROM watches)",
                [],
                |r| {
                    Ok(WatchHealth {
                        active: r.get(0)?,
                        failing: r.get(1)?,
                        pending_events: r.get(2)?,
                        failed_events: r.get(3)?,
                        last_checked_at: r.get(4)?,
                    })
                },
            )
            .map_err(q("watch health"))
        })
    }

    /// The id of the newest queued event (0 when there is none).
    pub fn feed_position(&self) -> Result<i64, WatchError> {
        self.db.read(|c| {
            c.query_row("SELECT coalesce(max(id), 0) FROM watch_events", [], |r| r.get(0))
                .map_err(q("event feed position"))
        })
    }

    /// Delivers up to `limit` (≤ [`MAX_DELIVERY_BATCH`]) pending events, oldest first and in
    /// order: a busy channel or a failed attempt ends the pass, and the rest wait behind it
    /// (an event given up after [`MAX_DELIVERY_ATTEMPTS`] no longer blocks).
    pub fn deliver(
        &self,
        delivery: &dyn Delivery,
        limit: usize,
        now: i64,
    ) -> Result<DeliveryReport, WatchError> {
        let limit = limit.clamp(1, MAX_DELIVERY_BATCH);
        let pending = self.events(&WatchEventQuery {
            pending: true,
            limit: Some(limit),
            ..WatchEventQuery::default()
        })?;
        let mut report = DeliveryReport::default();
        // Texts first, for the whole batch, stored in one transaction before anything is
        // sent: a retry sends the same text and never composes again.
        let mut ready: Vec<(QueuedEvent, String)> = Vec::with_capacity(pending.len());
        let mut fresh: Vec<(i64, String)> = Vec::new();
        for ev in pending {
            let text = match &ev.notification {
                Some(t) => t.clone(),
                None if ev.attempts >= COMPOSE_ATTEMPTS => ev.event.fallback_text.clone(),
                None => match delivery.compose(&ev) {
                    Ok(t) => t,
                    Err(e) => {
                        report.failed += 1;
                        if self.fail(&ev, &e, now)? {
                            report.abandoned += 1;
                            continue;
                        }
                        break;
                    }
                },
            };
            if ev.notification.is_none() {
                fresh.push((ev.id, text.clone()));
            }
            ready.push((ev, text));
        }
        self.store_texts(&fresh)?;
        for (ev, text) in ready {
            match delivery.send(&ev, &text) {
                Ok(()) => {
                    self.db.write(|tx| {
                        let changed = tx
                            .execute(
                                "UPDATE watch_events SET status = 'delivered', delivered_at = ?2
                                 WHERE id = ?1 AND status = 'pending'",
                                params![ev.id, now],
                            )
                            .map_err(q("delivered"))?;
                        record_outcome(tx, changed, &ev, DeliveryResult::Delivered, now)
                    })?;
                    report.delivered += 1;
                }
                // Later events wait behind this one, so the person hears them in order.
                Err(DeliveryError::Busy) => {
                    report.busy += 1;
                    break;
                }
                Err(DeliveryError::Failed(e)) => {
                    report.failed += 1;
                    if self.fail(&ev, &e, now)? {
                        report.abandoned += 1;
                        continue;
                    }
                    break;
                }
            }
        }
        Ok(report)
    }

    pub(super) fn store_texts(&self, texts: &[(i64, String)]) -> Result<(), WatchError> {
        if texts.is_empty() {
            return Ok(());
        }
        self.db.write(|tx| {
            for (id, text) in texts {
                tx.execute(
                    "UPDATE watch_events SET notification = ?2 WHERE id = ?1 AND notification IS NULL",
                    params![id, text],
                )
                .map_err(q("store notification"))?;
            }
            Ok(())
        })
    }

    /// Counts a failed attempt; true when the event is given up.
    pub(super) fn fail(&self, ev: &QueuedEvent, error: &str, now: i64) -> Result<bool, WatchError> {
        let error: String = error.chars().take(500).collect();
        let give_up = ev.attempts + 1 >= MAX_DELIVERY_ATTEMPTS;
        self.db.write(|tx| {
            let changed = tx
                .execute(
                    "UPDATE watch_events SET attempts = attempts + 1, last_error = ?2,
                        last_error_at = ?3, status = CASE WHEN ?4 THEN 'failed' ELSE status END
                     WHERE id = ?1 AND status = 'pending'",
                    params![ev.id, error, now, give_up],
                )
                .map_err(q("delivery failure"))?;
            if give_up {
                record_outcome(tx, changed, ev, DeliveryResult::Failed, now)
            } else {
                Ok(())
            }
        })?;
        Ok(give_up)
    }

    /// Up to `limit` delivery outcomes after position `after`, in order.
    pub fn deliveries_after(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<DeliveryOutcome>, WatchError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.db.read(|c| {
            c.prepare_cached(
                "SELECT d.seq, d.event_id, d.watch_id, d.outcome, d.at, e.notification
                 FROM watch_deliveries d JOIN watch_events e ON e.id = d.event_id
                 WHERE d.seq > ?1 ORDER BY d.seq LIMIT ?2",
            )
            .and_then(|mut s| {
                s.query_map(params![after, limit], |r| {
                    Ok(DeliveryOutcome {
                        seq: r.get(0)?,
                        event_id: r.get(1)?,
                        watch_id: r.get(2)?,
                        outcome: r.get(3)?,
                        at: r.get(4)?,
                        text: r.get(5)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(q("delivery feed"))
        })
    }

    /// The position of the newest delivery outcome (0 when there is none).
    pub fn delivery_position(&self) -> Result<i64, WatchError> {
        self.db.read(|c| {
            c.query_row("SELECT coalesce(max(seq), 0) FROM watch_deliveries", [], |r| r.get(0))
                .map_err(q("delivery feed position"))
        })
    }
}

/// Appends an outcome to the delivery feed when the status update took (`changed` rows).
pub(super) fn record_outcome(
    tx: &rusqlite::Transaction<'_>,
    changed: usize,
    ev: &QueuedEvent,
    outcome: DeliveryResult,
    now: i64,
) -> Result<(), WatchError> {
    if changed == 0 {
        return Ok(());
    }
    tx.execute(
        "INSERT INTO watch_deliveries (event_id, watch_id, outcome, at) VALUES (?1, ?2, ?3, ?4)",
        params![ev.id, ev.watch_id, outcome, now],
    )
    .map(drop)
    .map_err(q("record delivery outcome"))
}
