//! Watch definitions: rules checked and frozen, created (also from an approval), listed,
//! stopped.

use super::*;

impl Watches {
    /// Checks and freezes the rules: unique ids, exactly one of event or trigger, bounded
    /// filters, relative `after_minutes` turned into an instant now.
    pub(super) fn freeze_rules(
        &self,
        adapter: &dyn WatchAdapter,
        rules: &[WatchRule],
        now: i64,
    ) -> Result<Vec<WatchRule>, WatchError> {
        let fields = adapter.grant_fields();
        let bad = |m: String| Err(WatchError::Invalid(m));
        if rules.is_empty() || rules.len() > MAX_RULES {
            return bad(format!("a watch has 1..={MAX_RULES} rules"));
        }
        let mut ids = HashSet::new();
        let mut out = Vec::with_capacity(rules.len());
        for r in rules {
            let id_ok = !r.id.is_empty()
                && r.id.len() <= 64
                && r.id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
            if !id_ok {
                return bad(format!("rule id {:?}: 1..=64 of a-z, 0-9, -, _, .", r.id));
            }
            if !ids.insert(r.id.clone()) {
                return bad(format!("rule id {:?} is used twice", r.id));
            }
            check_rule_grants(r, &self.caps, &fields)?;
            adapter
                .check_rule(r)
                .map_err(|m| WatchError::Invalid(format!("rule {}: {m}", r.id)))?;
            if r.filter.len() > MAX_FILTERS {
                return bad(format!("rule {}: at most {MAX_FILTERS} where filters", r.id));
            }
            let mut r = r.clone();
            match (&r.event, &r.trigger) {
                (Some(e), None) if !e.is_empty() && e.len() <= 64 => {}
                (None, Some(Trigger::BeforeTime { field, minutes })) => {
                    if field.is_empty() || !(0..=1_440).contains(minutes) {
                        return bad(format!(
                            "rule {}: before_time needs a field and 0..=1440 minutes",
                            r.id
                        ));
                    }
                    if !r.filter.is_empty() {
                        return bad(format!("rule {}: where filters apply to events only", r.id));
                    }
                }
                (None, Some(Trigger::TimeReached { at, after_minutes })) => {
                    let when = match (at, after_minutes) {
                        (Some(a), None) => instant(a)?,
                        (None, Some(m)) if (1..=525_600).contains(m) => now + m * 60,
                        _ => {
                            return bad(format!(
                                "rule {}: time_reached needs exactly one of at or after_minutes (1..=525600)",
                                r.id
                            ));
                        }
                    };
                    r.trigger =
                        Some(Trigger::TimeReached { at: Some(rfc3339(when)), after_minutes: None });
                }
                _ => return bad(format!("rule {}: exactly one of event or trigger", r.id)),
            }
            out.push(r);
        }
        Ok(out)
    }

    /// Checks a definition and freezes it (relative times become instants) without asking its
    /// source: what an approval card shows and, once approved, exactly what is created.
    pub fn prepare(&self, def: &WatchDefinition, now: i64) -> Result<WatchDefinition, WatchError> {
        let adapter = self.adapter(&def.source)?;
        if def.resource_ref.is_empty() || def.resource_ref.chars().count() > MAX_REF_CHARS {
            return Err(WatchError::Invalid(format!(
                "resource_ref must be 1..={MAX_REF_CHARS} characters"
            )));
        }
        if def.instruction.trim().is_empty()
            || def.instruction.chars().count() > MAX_INSTRUCTION_CHARS
        {
            return Err(WatchError::Invalid(format!(
                "instruction must be 1..={MAX_INSTRUCTION_CHARS} characters"
            )));
        }
        adapter.check_ref(&def.resource_ref).map_err(|reason| WatchError::BadResource {
            source_name: def.source.clone(),
            reason,
        })?;
        let rules = self.freeze_rules(adapter.as_ref(), &def.rules, now)?;
        if let Some(e) = def.expires_at.as_deref().map(instant).transpose()?
            && e <= now
        {
            return Err(WatchError::Invalid("expires_at is in the past".to_owned()));
        }
        Ok(WatchDefinition { rules, instruction: def.instruction.trim().to_owned(), ..def.clone() })
    }

    /// Creates a watch: checks it, captures the initial snapshot (conditions already true are
    /// not replayed) and stores it. A source that fails now fails the creation. A definition
    /// with grants is refused (`WATCH_NEEDS_APPROVAL`): see [`Watches::create_approved`].
    pub fn create(&self, def: &WatchDefinition, now: i64) -> Result<WatchSummary, WatchError> {
        let def = self.prepare(def, now)?;
        if let Some(r) = def.rules.iter().find(|r| !r.grants.is_empty()) {
            return Err(WatchError::NeedsApproval(r.id.clone()));
        }
        self.insert(&def, &Origin::default(), now)
    }

    /// Creates the watch a person approved: `approved` is the approval store's token for a
    /// `watch.create_agent` request, and the watch started is exactly its input. Idempotent: a
    /// second activation of the same approval returns the watch the first made.
    pub fn create_approved(
        &self,
        approved: &crate::approval::ApprovedInput,
        now: i64,
    ) -> Result<WatchSummary, WatchError> {
        if approved.tool() != crate::WATCH_GRANTS_TOOL {
            return Err(WatchError::Invalid(format!(
                "approval {} is not a {} request",
                approved.approval_id(),
                crate::WATCH_GRANTS_TOOL
            )));
        }
        let approval_id = approved.approval_id();
        if let Some(w) = self.by_approval(approval_id)? {
            return Ok(w);
        }
        let def: WatchDefinition = serde_json::from_value(approved.input().clone())
            .map_err(|e| WatchError::Invalid(e.to_string()))?;
        let def = self.prepare(&def, now)?;
        let origin = Origin { approval_id: Some(approval_id), ..Origin::default() };
        match self.insert(&def, &origin, now) {
            // A concurrent activation won the unique index.
            Err(WatchError::Store(_)) if self.by_approval(approval_id)?.is_some() => {
                self.by_approval(approval_id)?.ok_or(WatchError::NotFound { what: "watch", id: 0 })
            }
            other => other,
        }
    }

    pub(super) fn by_approval(&self, approval_id: i64) -> Result<Option<WatchSummary>, WatchError> {
        self.db.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {WATCH_COLUMNS} FROM watches WHERE approval_id = ?1 AND parent_id IS NULL"
            ))
            .and_then(|mut s| s.query_row([approval_id], watch_row).optional())
            .map_err(q("watch by approval"))
        })
    }

    /// Snapshots and stores a prepared definition.
    pub(super) fn insert(
        &self,
        def: &WatchDefinition,
        origin: &Origin,
        now: i64,
    ) -> Result<WatchSummary, WatchError> {
        let adapter = self.adapter(&def.source)?;
        let expires = def.expires_at.as_deref().map(instant).transpose()?;
        let snapshot = adapter.snapshot(&def.resource_ref, now).map_err(|e| {
            WatchError::SourceUnavailable { source_name: def.source.clone(), reason: e.0 }
        })?;
        let expires_at = expires.unwrap_or_else(|| adapter.default_expiry(&snapshot, now));
        if expires_at <= now {
            return Err(WatchError::Invalid(
                "the watch would end before it starts (its source's default expiry has passed)"
                    .to_owned(),
            ));
        }
        let id = self.db.write(|tx| insert_watch(tx, def, origin, &snapshot, expires_at, now))?;
        self.get(id)
    }

    /// One watch.
    pub fn get(&self, id: i64) -> Result<WatchSummary, WatchError> {
        self.db
            .read(|c| {
                c.prepare_cached(&format!("SELECT {WATCH_COLUMNS} FROM watches WHERE id = ?1"))
                    .and_then(|mut s| s.query_row([id], watch_row).optional())
                    .map_err(q("get watch"))
            })?
            .ok_or(WatchError::NotFound { what: "watch", id })
    }

    /// A page of watches, newest first.
    pub fn list(&self, query: &WatchQuery) -> Result<Vec<WatchSummary>, WatchError> {
        let limit = page(query.limit)?;
        self.db.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {WATCH_COLUMNS} FROM watches WHERE (?1 IS NULL OR status = ?1)
                 ORDER BY id DESC LIMIT ?2 OFFSET ?3"
            ))
            .and_then(|mut s| {
                s.query_map(params![query.status, limit, offset(query.offset)], watch_row)?
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(q("list watches"))
        })
    }

    /// Stops a watch. Idempotent, and only ever moves `active → stopped`.
    pub fn stop(&self, id: i64, now: i64) -> Result<WatchSummary, WatchError> {
        self.db.write(|tx| {
            tx.execute(
                "UPDATE watches SET status = 'stopped', ended_at = ?2 WHERE id = ?1 AND status = 'active'",
                params![id, now],
            )
            .map_err(q("stop watch"))
        })?;
        self.get(id)
    }

    pub(super) fn active(&self) -> Result<Vec<WatchSummary>, WatchError> {
        self.db.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {WATCH_COLUMNS} FROM watches WHERE status = 'active' ORDER BY id"
            ))
            .and_then(|mut s| s.query_map([], watch_row)?.collect::<Result<Vec<_>, _>>())
            .map_err(q("active watches"))
        })
    }
}

/// Where a watch's authority comes from.
#[derive(Debug, Default)]
pub(super) struct Origin {
    pub(super) approval_id: Option<i64>,
    pub(super) parent_id: Option<i64>,
    pub(super) attempt: Option<i64>,
    pub(super) context: Option<GrantContext>,
}

/// Stores a prepared watch (the active-watch limit checked in the same transaction).
pub(super) fn insert_watch(
    tx: &rusqlite::Transaction<'_>,
    def: &WatchDefinition,
    origin: &Origin,
    snapshot: &Value,
    expires_at: i64,
    now: i64,
) -> Result<i64, WatchError> {
    let active: i64 = tx
        .query_row("SELECT count(*) FROM watches WHERE status = 'active'", [], |r| r.get(0))
        .map_err(q("count watches"))?;
    if active >= MAX_ACTIVE_WATCHES {
        return Err(WatchError::TooMany);
    }
    tx.execute(
        "INSERT INTO watches (source, resource_ref, rules, instruction, chat, status,
            snapshot, created_at, expires_at, last_checked_at, approval_id, parent_id, attempt,
            context)
         VALUES (?1, ?2, ?3, ?4, ?5, 'active', ?6, ?7, ?8, ?7, ?9, ?10, ?11, ?12)",
        params![
            def.source,
            def.resource_ref,
            to_json(&def.rules),
            def.instruction,
            def.chat,
            canonical_json(snapshot),
            now,
            expires_at,
            origin.approval_id,
            origin.parent_id,
            origin.attempt.unwrap_or(1),
            origin.context.as_ref().map(to_json),
        ],
    )
    .map_err(q("create watch"))?;
    Ok(tx.last_insert_rowid())
}
