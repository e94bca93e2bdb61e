//! The poll cycle: snapshots within a budget (per-source workers), expiry, rule matching,
//! events queued once.

use super::*;

impl Watches {
    /// One poll cycle (single flight: a poll that finds another running does nothing), on
    /// the calling thread, without a time budget. See [`Watches::poll_within`].
    pub fn poll(&self, now: i64) -> Result<PollReport, WatchError> {
        self.poll_within(now, &PollBudget::default())
    }

    /// One poll cycle within `budget`: each source's watches are snapshot by up to
    /// `budget.per_source` worker threads of its own, so a source that hangs stalls neither
    /// the other sources nor the cycle. Watches not answered by the deadline are `deferred`
    /// (their last snapshot stays, the failure is recorded, the next cycle asks again); a
    /// source whose workers from an earlier cycle are still stuck gets only the workers it has
    /// left, and none when all are stuck. Observations are applied in watch order.
    pub fn poll_within(&self, now: i64, budget: &PollBudget) -> Result<PollReport, WatchError> {
        let Ok(_guard) = self.polling.try_lock() else {
            return Ok(PollReport { skipped: true, ..PollReport::default() });
        };
        let mut report = PollReport { expired: self.expire_due(now)?, ..PollReport::default() };
        let mut next = DEFAULT_POLL_SECS.max(MIN_POLL_SECS);
        let active = self.active()?;
        let snapshots = if budget.deadline.is_none() && budget.per_source <= 1 {
            let mut out = BTreeMap::new();
            for w in &active {
                if let Some(adapter) = self.adapters.get(&w.source) {
                    out.insert(w.id, adapter.snapshot(&w.resource_ref, now));
                }
            }
            out
        } else {
            self.snapshot_concurrently(&active, now, budget)
        };
        let mut batch: Vec<Observation> = Vec::new();
        for w in active {
            let id = w.id;
            let Some(adapter) = self.adapters.get(&w.source) else {
                self.record_failure(id, &format!("no adapter for source {:?}", w.source), now)?;
                report.failed += 1;
                continue;
            };
            let current = match snapshots.get(&id) {
                Some(Ok(s)) => s.clone(),
                Some(Err(e)) => {
                    self.record_failure(id, &e.0, now)?;
                    report.failed += 1;
                    continue;
                }
                None => {
                    self.record_failure(
                        id,
                        &format!(
                            "not checked: the {} source did not answer within the poll cycle's time budget",
                            w.source
                        ),
                        now,
                    )?;
                    report.deferred += 1;
                    continue;
                }
            };
            report.checked += 1;
            let mut events = adapter.events(&w.snapshot, &current, now);
            events.extend(temporal_events(&w.rules, &current, now));
            let terminal = adapter.is_terminal(&current);
            if !terminal && let Some(u) = adapter.urgency(&current) {
                next = next.min(u.max(MIN_URGENT_POLL_SECS));
            }
            batch.push(Observation { id, rules: w.rules, events, current, terminal });
            if batch.len() >= POLL_WRITE_BATCH {
                self.apply(&mut batch, now, &mut report)?;
            }
        }
        self.apply(&mut batch, now, &mut report)?;
        report.next_poll_secs = next;
        Ok(report)
    }

    /// Snapshots `active` with worker threads per source until `budget.deadline`; what did not
    /// answer in time is absent from the result.
    pub(super) fn snapshot_concurrently(
        &self,
        active: &[WatchSummary],
        now: i64,
        budget: &PollBudget,
    ) -> BTreeMap<i64, Result<Value, crate::watch::SourceError>> {
        type Answer = (i64, Result<Value, crate::watch::SourceError>);
        let mut by_source: BTreeMap<&str, Vec<(i64, String)>> = BTreeMap::new();
        for w in active {
            by_source.entry(w.source.as_str()).or_default().push((w.id, w.resource_ref.clone()));
        }
        let (tx, rx) = std::sync::mpsc::channel::<Answer>();
        let mut expected = 0usize;
        for (source, items) in by_source {
            let Some(adapter) = self.adapters.get(source) else { continue };
            let busy = self.busy_workers(source);
            let free = budget.per_source.max(1).saturating_sub(busy.load(Ordering::SeqCst));
            if free == 0 {
                tracing::warn!(source, "every poll worker of this source is still stuck; skipped");
                continue;
            }
            let workers = free.min(items.len());
            expected += items.len();
            let queue = Arc::new(Mutex::new(std::collections::VecDeque::from(items)));
            for _ in 0..workers {
                let (adapter, queue, tx, mine) =
                    (Arc::clone(adapter), Arc::clone(&queue), tx.clone(), Arc::clone(&busy));
                let deadline = budget.deadline;
                busy.fetch_add(1, Ordering::SeqCst);
                let spawned =
                    std::thread::Builder::new().name(format!("poll-{source}")).spawn(move || {
                        let _busy = BusyGuard(mine);
                        loop {
                            if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                                return;
                            }
                            let item =
                                queue.lock().unwrap_or_else(PoisonError::into_inner).pop_front();
                            let Some((id, resource)) = item else { return };
                            let answer = adapter.snapshot(&resource, now);
                            if tx.send((id, answer)).is_err() {
                                return;
                            }
                        }
                    });
                if let Err(e) = spawned {
                    busy.fetch_sub(1, Ordering::SeqCst);
                    tracing::warn!(source, error = %e, "cannot start a poll worker");
                }
            }
        }
        drop(tx);
        let mut out = BTreeMap::new();
        while out.len() < expected {
            let answer = match budget.deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(std::time::Instant::now());
                    match rx.recv_timeout(left) {
                        Ok(a) => a,
                        Err(_) => break,
                    }
                }
                None => match rx.recv() {
                    Ok(a) => a,
                    Err(_) => break,
                },
            };
            out.insert(answer.0, answer.1);
        }
        out
    }

    /// Poll workers of `source` still running (stuck in a snapshot from an earlier cycle).
    pub(super) fn busy_workers(&self, source: &str) -> Arc<AtomicUsize> {
        let mut busy = self.busy.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(busy.entry(source.to_owned()).or_default())
    }

    pub(super) fn record_failure(&self, id: i64, error: &str, now: i64) -> Result<(), WatchError> {
        let error: String = error.chars().take(500).collect();
        self.db.write(|tx| {
            tx.execute(
                "UPDATE watches SET last_error = ?2, last_error_at = ?3, last_checked_at = ?3
                 WHERE id = ?1 AND status = 'active'",
                params![id, error, now],
            )
            .map_err(q("record watch failure"))
        })?;
        Ok(())
    }

    pub(super) fn expire_due(&self, now: i64) -> Result<usize, WatchError> {
        self.db.write(|tx| {
            let due: Vec<(i64, String, String)> = tx
                .prepare_cached(
                    "SELECT id, source, instruction FROM watches
                     WHERE status = 'active' AND expires_at <= ?1 ORDER BY id",
                )
                .and_then(|mut s| {
                    s.query_map([now], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                        .collect::<Result<Vec<_>, _>>()
                })
                .map_err(q("due watches"))?;
            for (id, source, instruction) in &due {
                tx.execute(
                    "UPDATE watches SET status = 'expired', ended_at = ?2 WHERE id = ?1 AND status = 'active'",
                    params![id, now],
                )
                .map_err(q("expire watch"))?;
                let ev = DomainEvent {
                    key: "watch.expired".to_owned(),
                    kind: "watch.expired".to_owned(),
                    at: now,
                    data: json!({"watch_id": id, "source": source}),
                    previous: None,
                    current: None,
                    fallback_text: format!("Stopped watching ({source}): \"{instruction}\" expired."),
                };
                insert_event(tx, *id, &ev, &[], now)?;
            }
            Ok(due.len())
        })
    }

    /// Matches and stores the observed watches' events and new snapshots, each watch's
    /// atomically (a batch shares one transaction, so a crash keeps all or none of it).
    pub(super) fn apply(
        &self,
        batch: &mut Vec<Observation>,
        now: i64,
        report: &mut PollReport,
    ) -> Result<(), WatchError> {
        if batch.is_empty() {
            return Ok(());
        }
        let (queued, completed) = self.db.write(|tx| {
            let (mut queued, mut completed) = (0, 0);
            for o in batch.iter() {
                // Participation is read only when there is something to match.
                let mut participated: HashSet<String> = if o.events.is_empty() {
                    HashSet::new()
                } else {
                    tx.prepare_cached(
                        "SELECT DISTINCT rule_id FROM watch_event_rules WHERE watch_id = ?1",
                    )
                    .and_then(|mut s| s.query_map([o.id], |r| r.get(0))?.collect::<Result<_, _>>())
                    .map_err(q("participation"))?
                };
                for ev in &o.events {
                    let matched: Vec<String> = o
                        .rules
                        .iter()
                        .filter(|r| matches(r, ev) && !(r.once && participated.contains(&r.id)))
                        .map(|r| r.id.clone())
                        .collect();
                    if matched.is_empty() {
                        continue;
                    }
                    // A granted action reads the state at its event: keep it with the event.
                    let granted =
                        o.rules.iter().any(|r| !r.grants.is_empty() && matched.contains(&r.id));
                    let with_state;
                    let ev = if granted && ev.current.is_none() {
                        with_state = DomainEvent { current: Some(o.current.clone()), ..ev.clone() };
                        &with_state
                    } else {
                        ev
                    };
                    if insert_event(tx, o.id, ev, &matched, now)? {
                        queued += 1;
                        participated.extend(matched);
                    }
                }
                // Events first, then the snapshot and (when terminal) the completion.
                let sql = if o.terminal {
                    "UPDATE watches SET snapshot = ?2, last_checked_at = ?3, last_error = NULL,
                        status = 'completed', ended_at = ?3 WHERE id = ?1 AND status = 'active'"
                } else {
                    "UPDATE watches SET snapshot = ?2, last_checked_at = ?3, last_error = NULL
                     WHERE id = ?1 AND status = 'active'"
                };
                tx.prepare_cached(sql)
                    .and_then(|mut s| s.execute(params![o.id, canonical_json(&o.current), now]))
                    .map_err(q("save snapshot"))?;
                completed += usize::from(o.terminal);
            }
            Ok::<_, WatchError>((queued, completed))
        })?;
        report.queued += queued;
        report.completed += completed;
        batch.clear();
        Ok(())
    }
}

/// Exact type and every `where` filter deep-equal on its dot path.
pub(super) fn matches(rule: &WatchRule, ev: &DomainEvent) -> bool {
    let kind_ok = match (&rule.event, &rule.trigger) {
        (Some(e), _) => *e == ev.kind,
        (None, Some(_)) => ev.data.get("rule").and_then(Value::as_str) == Some(rule.id.as_str()),
        (None, None) => false,
    };
    kind_ok && rule.filter.iter().all(|(path, want)| at_path(&ev.data, path) == Some(want))
}

/// The events of the rules' temporal triggers at `now` against `current`.
pub(super) fn temporal_events(rules: &[WatchRule], current: &Value, now: i64) -> Vec<DomainEvent> {
    let mut out = Vec::new();
    for r in rules {
        match &r.trigger {
            Some(Trigger::TimeReached { at: Some(at), .. }) => {
                if let Ok(when) = parse_date(at)
                    && now >= when
                {
                    out.push(DomainEvent {
                        key: format!("rule:{}:time.reached:{when}", r.id),
                        kind: "time.reached".to_owned(),
                        at: now,
                        data: json!({"rule": r.id, "at": at}),
                        previous: None,
                        current: None,
                        fallback_text: format!("It is {at}."),
                    });
                }
            }
            Some(Trigger::BeforeTime { field, minutes }) => {
                let Some(deadline) = at_path(current, field).and_then(timestamp) else { continue };
                let fire_at = deadline - minutes * 60;
                // The window: from fire_at, for RELATIVE_GRACE_SECS, and never after the
                // deadline itself. A window that passed while nobody polled is skipped.
                if now >= fire_at
                    && now < (fire_at + RELATIVE_GRACE_SECS).min(deadline.max(fire_at + 1))
                {
                    out.push(DomainEvent {
                        key: format!("rule:{}:before_time", r.id),
                        kind: "time.before".to_owned(),
                        at: now,
                        data: json!({"rule": r.id, "field": field, "minutes": minutes, "deadline": rfc3339(deadline)}),
                        previous: None,
                        current: Some(current.clone()),
                        fallback_text: format!("{minutes} minutes before {}.", rfc3339(deadline)),
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// Inserts an event unless its key exists; true when inserted.
pub(super) fn insert_event(
    tx: &rusqlite::Transaction<'_>,
    watch_id: i64,
    ev: &DomainEvent,
    rules: &[String],
    now: i64,
) -> Result<bool, WatchError> {
    let key = format!("{watch_id}:{}", ev.key);
    let (rules_json, event_json) = (to_json(&rules), to_json(ev));
    let inserted = tx
        .execute(
            "INSERT OR IGNORE INTO watch_events (event_key, watch_id, event_type, matched_rules, event,
                status, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6)",
            params![key, watch_id, ev.kind, rules_json, event_json, now],
        )
        .map_err(q("queue event"))?;
    if inserted == 0 {
        return Ok(false);
    }
    let event_id = tx.last_insert_rowid();
    for rule in rules {
        tx.execute(
            "INSERT OR IGNORE INTO watch_event_rules (event_id, watch_id, rule_id) VALUES (?1, ?2, ?3)",
            params![event_id, watch_id, rule],
        )
        .map_err(q("participation"))?;
    }
    Ok(true)
}
