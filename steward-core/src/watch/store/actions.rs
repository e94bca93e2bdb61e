//! Granted actions: the authority behind an event, claims (never run twice), results and
//! continuations.

use super::*;

impl Watches {
    /// The authority behind an event: the event, its watch, the rules it matched and the
    /// context grants read.
    pub(super) fn event_authority(
        &self,
        event_id: i64,
    ) -> Result<(QueuedEvent, WatchSummary, GrantContext), WatchError> {
        let ev = self
            .db
            .read(|c| {
                c.prepare_cached(&format!("SELECT {EVENT_COLUMNS} FROM watch_events WHERE id = ?1"))
                    .and_then(|mut s| s.query_row([event_id], event_row).optional())
                    .map_err(q("get event"))
            })?
            .ok_or(WatchError::NotFound { what: "event", id: event_id })?;
        let watch = self.get(ev.watch_id)?;
        let stored: Option<GrantContext> = self
            .db
            .read(|c| {
                c.query_row("SELECT context FROM watches WHERE id = ?1", [ev.watch_id], |r| {
                    r.get::<_, Option<String>>(0)
                })
                .map_err(q("watch context"))
            })?
            .map(|t| serde_json::from_str(&t))
            .transpose()
            .map_err(|e| WatchError::Corrupt(format!("watch context: {e}")))?;
        let ctx = stored.unwrap_or_else(|| GrantContext {
            state: ev.event.current.clone().unwrap_or_else(|| watch.snapshot.clone()),
            event: ev.event.data.clone(),
        });
        Ok((ev, watch, ctx))
    }

    /// The granted actions an event makes available: the union of the grants of the rules it
    /// matched, nothing else.
    pub fn granted_actions(&self, event_id: i64) -> Result<Vec<GrantedAction>, WatchError> {
        let (ev, watch, ctx) = self.event_authority(event_id)?;
        if watch.approval_id.is_none() {
            return Ok(Vec::new());
        }
        let claimed: HashSet<String> =
            self.action_runs(event_id)?.into_iter().map(|r| r.action_key).collect();
        let mut out = Vec::new();
        for rule in watch.rules.iter().filter(|r| ev.matched_rules.contains(&r.id)) {
            for g in &rule.grants {
                let (arguments, open_fields, unavailable) = match determined_arguments(g, &ctx) {
                    Ok((args, open)) => (Value::Object(args), open, None),
                    Err(e) => (json!({}), Vec::new(), Some(e)),
                };
                out.push(GrantedAction {
                    event_id,
                    rule_id: rule.id.clone(),
                    tool: g.tool.clone(),
                    arguments,
                    open_fields,
                    unavailable,
                    claimed: claimed.contains(&format!("{event_id}:{}:{}", rule.id, g.tool)),
                });
            }
        }
        Ok(out)
    }

    /// The second guard and the claim: `tool` must be granted by a rule this event matched,
    /// every argument must meet its constraint (extra fields denied), the grant's invocations
    /// must not be used up, and no claim may exist for `<event>:<rule>:<tool>`. The claim is
    /// durable before this returns; run the action only after it.
    pub fn claim_action(
        &self,
        event_id: i64,
        rule_id: &str,
        tool: &str,
        arguments: &Value,
        now: i64,
    ) -> Result<ActionClaim, WatchError> {
        let (ev, watch, ctx) = self.event_authority(event_id)?;
        let deny = |m: String| Err(WatchError::GrantDenied(m));
        if watch.approval_id.is_none() {
            return deny(format!("watch {} has no approved grants", watch.id));
        }
        if !ev.matched_rules.iter().any(|r| r == rule_id) {
            return deny(format!("rule {rule_id} did not match event {event_id}"));
        }
        let Some(grant) = watch
            .rules
            .iter()
            .find(|r| r.id == rule_id)
            .and_then(|r| r.grants.iter().find(|g| g.tool == tool))
        else {
            return deny(format!("rule {rule_id} does not grant {tool}"));
        };
        let Some(cap) = self.caps.get(tool) else {
            return deny(format!("{tool} is not a registered capability"));
        };
        let checked =
            guard_arguments(grant, cap, arguments, &ctx).map_err(WatchError::GrantDenied)?;
        let limit = i64::from(
            grant.max_invocations.unwrap_or(cap.max_invocations).min(cap.max_invocations),
        );
        let key = format!("{event_id}:{rule_id}:{tool}");
        let args_json = canonical_json(&checked);
        let run_id = self.db.write(|tx| {
            let exists: bool = tx
                .query_row("SELECT 1 FROM watch_action_runs WHERE action_key = ?1", [&key], |_| Ok(()))
                .optional()
                .map_err(q("find claim"))?
                .is_some();
            if exists {
                return Err(WatchError::AlreadyClaimed(key.clone()));
            }
            let used: i64 = tx
                .query_row(
                    "SELECT count(*) FROM watch_action_runs WHERE watch_id = ?1 AND rule_id = ?2 AND tool = ?3",
                    params![watch.id, rule_id, tool],
                    |r| r.get(0),
                )
                .map_err(q("count invocations"))?;
            if used >= limit {
                return Err(WatchError::GrantDenied(format!(
                    "{tool} of rule {rule_id} was already used {used} of {limit} time(s)"
                )));
            }
            tx.execute(
                "INSERT INTO watch_action_runs (action_key, event_id, rule_id, tool, status,
                    started_at, watch_id, arguments)
                 VALUES (?1, ?2, ?3, ?4, 'claimed', ?5, ?6, ?7)",
                params![key, event_id, rule_id, tool, now, watch.id, args_json],
            )
            .map_err(q("claim action"))?;
            Ok(tx.last_insert_rowid())
        })?;
        Ok(ActionClaim { run_id, action_key: key, arguments: checked })
    }

    /// Records how a claimed action ended (once; a second report is `WATCH_ACTION_CLAIMED`).
    /// When the rule's continuation names this outcome and attempts remain, a child `time`
    /// watch is created in the same transaction, with exactly the parent's rule, grants and
    /// event context.
    pub fn finish_action(
        &self,
        run_id: i64,
        result: &ActionResult,
        now: i64,
    ) -> Result<ActionRun, WatchError> {
        let run = self.action_run(run_id)?;
        if run.status != ActionRunStatus::Claimed {
            return Err(WatchError::AlreadyClaimed(format!("{} (finished)", run.action_key)));
        }
        let clip = |s: &Option<String>, n: usize| {
            s.as_ref().map(|t| t.chars().take(n).collect::<String>())
        };
        let (outcome, error) = (clip(&result.outcome, 64), clip(&result.error, 500));
        // The outcome is recorded even when no follow-up can be scheduled (no `time` source).
        let child = match self.continuation_child(&run, outcome.as_deref(), now) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(run = run_id, error = %e, "the continuation could not be scheduled");
                None
            }
        };
        self.db.write(|tx| {
            let changed = tx
                .execute(
                    "UPDATE watch_action_runs SET status = ?2, finished_at = ?3, outcome = ?4, error = ?5
                     WHERE id = ?1 AND status = 'claimed'",
                    params![run_id, result.status.as_str(), now, outcome, error],
                )
                .map_err(q("finish action"))?;
            if changed == 0 {
                return Err(WatchError::AlreadyClaimed(format!("{} (finished)", run.action_key)));
            }
            if let Some((def, origin, snapshot, expires_at)) = &child {
                let id = insert_watch(tx, def, origin, snapshot, *expires_at, now)?;
                tx.execute(
                    "UPDATE watch_action_runs SET child_watch_id = ?2 WHERE id = ?1",
                    params![run_id, id],
                )
                .map_err(q("record child watch"))?;
            }
            Ok(())
        })?;
        self.action_run(run_id)
    }

    /// The child watch a continuation schedules for this outcome, if any.
    #[allow(clippy::type_complexity)]
    pub(super) fn continuation_child(
        &self,
        run: &ActionRun,
        outcome: Option<&str>,
        now: i64,
    ) -> Result<Option<(WatchDefinition, Origin, Value, i64)>, WatchError> {
        let (_, watch, ctx) = self.event_authority(run.event_id)?;
        let Some(rule) = watch.rules.iter().find(|r| r.id == run.rule_id) else { return Ok(None) };
        let Some(c) = &rule.continuation else { return Ok(None) };
        let Some(outcome) = outcome else { return Ok(None) };
        if !c.outcomes.iter().any(|o| o == outcome) || watch.attempt >= i64::from(c.max_attempts) {
            return Ok(None);
        }
        let at = now + c.after_minutes * 60;
        let def = WatchDefinition {
            source: "time".to_owned(),
            resource_ref: rfc3339(at),
            rules: vec![WatchRule {
                id: rule.id.clone(),
                event: Some("time.reached".to_owned()),
                trigger: None,
                filter: BTreeMap::new(),
                once: true,
                grants: rule.grants.clone(),
                continuation: rule.continuation.clone(),
            }],
            instruction: watch.instruction.clone(),
            chat: watch.chat.clone(),
            expires_at: None,
        };
        let adapter = self.adapter("time")?;
        let snapshot = adapter.snapshot(&def.resource_ref, now).map_err(|e| {
            WatchError::SourceUnavailable { source_name: "time".to_owned(), reason: e.0 }
        })?;
        let expires_at = adapter.default_expiry(&snapshot, now).max(at + 60);
        let origin = Origin {
            approval_id: watch.approval_id,
            parent_id: Some(watch.id),
            attempt: Some(watch.attempt + 1),
            context: Some(ctx),
        };
        Ok(Some((def, origin, snapshot, expires_at)))
    }

    /// For each granted action of this event whose arguments its constraints fix entirely:
    /// claim, run through `executor`, record. Claimed ones are never run again; one whose
    /// guard refuses is skipped with the reason.
    pub fn run_granted(
        &self,
        event_id: i64,
        executor: &dyn ActionExecutor,
        now: i64,
    ) -> Result<GrantedRunReport, WatchError> {
        let mut report = GrantedRunReport::default();
        for a in self.granted_actions(event_id)? {
            let label = format!("{}:{}", a.rule_id, a.tool);
            if a.claimed {
                report.skipped.push(format!("{label}: already claimed"));
                continue;
            }
            if let Some(why) = &a.unavailable {
                report.skipped.push(format!("{label}: {why}"));
                continue;
            }
            if !a.open_fields.is_empty() {
                report.skipped.push(format!("{label}: {} to choose", a.open_fields.join(", ")));
                continue;
            }
            let claim = match self.claim_action(event_id, &a.rule_id, &a.tool, &a.arguments, now) {
                Ok(c) => c,
                Err(e @ (WatchError::GrantDenied(_) | WatchError::AlreadyClaimed(_))) => {
                    report.skipped.push(format!("{label}: {e}"));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let result = executor.execute_claimed(&claim.action_key, &a.tool, &claim.arguments);
            report.ran.push(self.finish_action(claim.run_id, &result, now)?);
        }
        Ok(report)
    }

    /// One action run.
    pub fn action_run(&self, run_id: i64) -> Result<ActionRun, WatchError> {
        self.db
            .read(|c| {
                c.prepare_cached(&format!(
                    "SELECT {RUN_COLUMNS} FROM watch_action_runs WHERE id = ?1"
                ))
                .and_then(|mut s| s.query_row([run_id], run_row).optional())
                .map_err(q("get action run"))
            })?
            .ok_or(WatchError::NotFound { what: "action run", id: run_id })
    }

    /// The action runs of an event, in order.
    pub fn action_runs(&self, event_id: i64) -> Result<Vec<ActionRun>, WatchError> {
        self.db.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM watch_action_runs WHERE event_id = ?1 ORDER BY id LIMIT 100"
            ))
            .and_then(|mut s| s.query_map([event_id], run_row)?.collect::<Result<Vec<_>, _>>())
            .map_err(q("action runs"))
        })
    }
}
