//! The authority surface of [`Steward`]: audited policy decisions and policy changes.
//!
//! [`crate::policy::decide`] is pure; this is where a decision meets the stores: the policy
//! version in force is loaded, the decision is recorded in the audit trail, and a change to the
//! policy needs either a person ([`HumanAuthority`]) or an approved `policy.set` request.

use serde_json::{Value, json};

use crate::{
    Steward,
    approval::NewApproval,
    approval::{
        Approval, ApprovalDetail, ApprovalError, ApprovalHistoryEntry, ApprovalQuery,
        DecisionInput, DecisionKind, HumanAuthority, MAX_INPUT_BYTES, canonical_json,
    },
    audit::{AuditEvent, Risk},
    policy::{Decision, DecisionContext, Level, PolicyChange, PolicyError, PolicyVersion, decide},
    time::now_secs as now,
    watch::{WatchDefinition, WatchError, WatchSummary, describe_grants},
};

/// What proposing a watch did.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum WatchProposal {
    /// A watch without grants: started.
    Started(WatchSummary),
    /// A watch with grants: this approval starts it once a person approves.
    NeedsApproval(Approval),
}

/// The approval that creates a watch with grants.
pub const WATCH_GRANTS_TOOL: &str = "watch.create_agent";

/// The tool that changes the policy.
pub const POLICY_SET_TOOL: &str = "policy.set";

/// One tool call an agent (or a watch) wants to make.
#[derive(Debug, Clone, Copy)]
pub struct ToolCall<'a> {
    /// Who asks: `agent:<name>`, or `watch:<id>` for a background turn.
    pub actor: &'a str,
    /// The chat or session.
    pub chat: Option<&'a str>,
    /// The tool.
    pub tool: &'a str,
    /// Its input.
    pub input: &'a Value,
}

impl Steward {
    /// The policy in force.
    pub fn policy(&self) -> Result<PolicyVersion, PolicyError> {
        self.policy_store()?.current()
    }

    /// Decides `call` under the policy in force and records the decision in the audit trail
    /// (`policy.decision`; risk high for a denial, medium for a gate, low for an allow). An
    /// input larger than [`MAX_INPUT_BYTES`] is denied before the policy is consulted.
    pub fn decide(
        &self,
        call: &ToolCall<'_>,
        ctx: &DecisionContext<'_>,
    ) -> Result<Decision, PolicyError> {
        let current = self.policy_store()?.current()?;
        let bytes = canonical_json(call.input).len();
        let oversized = bytes > MAX_INPUT_BYTES;
        let decision = if oversized {
            Decision::Deny { reason: crate::policy::DenyReason::InputTooLarge { bytes } }
        } else {
            // The caller's agent denials apply to the agent asking, whoever built the context.
            let ctx = DecisionContext { actor: Some(call.actor), ..*ctx };
            decide(self.tools(), &current.policy, call.tool, call.input, &ctx)
        };
        let risk = match decision {
            Decision::Deny { .. } => Risk::High,
            Decision::Gate { .. } => Risk::Medium,
            Decision::Allow { .. } => Risk::Low,
        };
        let payload = json!({
            "decision": decision,
            "input": if oversized { Value::String("(oversized)".into()) } else { call.input.clone() },
            "policy_version": current.version,
            "headless": ctx.headless_grants.is_some(),
        });
        let audit = self.audit();
        if let Err(e) = &audit {
            tracing::warn!(error = %e, "audit trail unavailable; decision not recorded");
        }
        if let Ok(audit) = audit {
            audit.record(&AuditEvent {
                actor: call.actor,
                event_type: "policy.decision",
                risk,
                chat: call.chat,
                tool: Some(call.tool),
                correlation_id: None,
                payload: &payload,
                at: now(),
            });
        }
        Ok(decision)
    }

    /// A person changes the policy. The frontend that authenticated them is the confirmation
    /// (the level-2 step); `expected` guards against a concurrent change. Audited as
    /// `policy.changed`.
    pub fn set_policy(
        &self,
        who: &HumanAuthority,
        change: &PolicyChange,
        expected: Option<u64>,
    ) -> Result<PolicyVersion, PolicyError> {
        let v = self.policy_store()?.apply(change, who.person(), None, expected, now())?;
        self.audit_policy_change(&v, who.person());
        Ok(v)
    }

    /// Applies the `policy.set` change an agent proposed, once a person approved it. The
    /// approval must be for `policy.set`, approved (or edited), and the change applied is
    /// exactly the effective input whose hash was approved.
    pub fn apply_approved_policy_change(
        &self,
        approval_id: i64,
    ) -> Result<PolicyVersion, PolicyError> {
        let boxed = |e| PolicyError::Approval(Box::new(e));
        let approvals = self.approvals().map_err(boxed)?;
        let a = approvals.get(approval_id).map_err(boxed)?;
        if a.tool != POLICY_SET_TOOL {
            return Err(PolicyError::BadSchema {
                tool: a.tool,
                reason: format!("approval {approval_id} is not a {POLICY_SET_TOOL} request"),
            });
        }
        let input = approvals.authorize_approved(approval_id).map_err(boxed)?.into_input();
        let change: PolicyChange = serde_json::from_value(input).map_err(|e| {
            PolicyError::BadSchema { tool: POLICY_SET_TOOL.to_owned(), reason: e.to_string() }
        })?;
        let person = a.decided_by.unwrap_or_default();
        let v = self.policy_store()?.apply(&change, &person, Some(approval_id), None, now())?;
        self.audit_policy_change(&v, &person);
        Ok(v)
    }

    fn audit_policy_change(&self, v: &PolicyVersion, person: &str) {
        if let Ok(audit) = self.audit() {
            let payload = json!({
                "version": v.version,
                "change": v.change,
                "approval_id": v.approval_id,
            });
            audit.record(&AuditEvent {
                actor: person,
                event_type: "policy.changed",
                risk: Risk::High,
                chat: None,
                tool: Some(POLICY_SET_TOOL),
                correlation_id: v.approval_id.map(|id| format!("approval:{id}")).as_deref(),
                payload: &payload,
                at: v.at,
            });
        }
    }
}

/// A tool as a policy screen lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct ToolSummary {
    /// `namespace.verb`.
    pub name: String,
    /// What it does to the world.
    pub effect: crate::policy::Effect,
    /// The level it runs at unless a person sets another.
    pub default_level: crate::policy::Level,
    /// What it does.
    pub description: String,
}

/// The policy in force, the tools it governs and (on request) earlier versions.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct PolicyOverview {
    /// The version in force.
    pub current: PolicyVersion,
    /// The registered tools.
    pub tools: Vec<ToolSummary>,
    /// Earlier versions, newest first.
    pub history: Vec<PolicyVersion>,
}

/// A person's change of one tool's rule (`PUT /policy/{tool}`, `steward policy set`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolRuleInput {
    /// L0-L3 (or auto, logged, confirm, secure; floors still apply), or `allow`, `deny`,
    /// `default` for an exact rule.
    pub level: String,
    /// The reason shown to the agent for `deny`.
    #[serde(default)]
    pub reason: Option<String>,
    /// Refuse if the policy is no longer at this version.
    #[serde(default)]
    pub expect_version: Option<u64>,
}

impl Steward {
    /// The policy in force with the registered tools and up to `history` earlier versions
    /// (0..=[`crate::policy::MAX_POLICY_HISTORY`]).
    pub fn policy_overview(&self, history: usize) -> Result<PolicyOverview, PolicyError> {
        let max = crate::policy::MAX_POLICY_HISTORY;
        if history > max {
            return Err(PolicyError::OutOfRange { what: "history", value: history, max });
        }
        let store = self.policy_store()?;
        let current = store.current()?;
        // The versions before the one just read (asking for one more and dropping the newest
        // lost one at the cap, and raced a concurrent change).
        let history = if history == 0 {
            Vec::new()
        } else {
            store.history_before(current.version, history)?
        };
        let tools = self
            .tools()
            .iter()
            .map(|t| ToolSummary {
                name: t.name.clone(),
                effect: t.effect,
                default_level: t.default_level,
                description: t.description.clone(),
            })
            .collect();
        Ok(PolicyOverview { current, tools, history })
    }

    /// A person sets one tool's rule (see [`Steward::set_policy`]).
    pub fn set_tool_rule(
        &self,
        who: &HumanAuthority,
        tool: &str,
        input: &ToolRuleInput,
    ) -> Result<PolicyVersion, PolicyError> {
        let change = PolicyChange::setting(tool, &input.level, input.reason.as_deref())?;
        self.set_policy(who, &change, input.expect_version)
    }

    /// A page of approval requests, newest first. Pending requests whose time ran out are
    /// expired first, so a list never shows a request that can no longer be approved.
    pub fn list_approvals(&self, q: &ApprovalQuery) -> Result<Vec<Approval>, ApprovalError> {
        let status = q.status_filter()?;
        let approvals = self.approvals()?;
        approvals.expire_due(now())?;
        let limit = q.limit.unwrap_or(crate::approval::DEFAULT_APPROVAL_PAGE);
        approvals.list_in(status, q.chat.as_deref(), q.offset, limit)
    }

    /// One request with its recorded transitions (expired first when its time ran out).
    pub fn approval_detail(&self, id: i64) -> Result<ApprovalDetail, ApprovalError> {
        let approvals = self.approvals()?;
        approvals.expire_due(now())?;
        let approval = approvals.get(id)?;
        let events = approvals
            .events(id)?
            .into_iter()
            .map(|(event, actor, at)| ApprovalHistoryEntry { event, actor, at })
            .collect();
        Ok(ApprovalDetail { approval, events })
    }

    /// A person decides a request (see [`crate::approval::Approvals::resolve`]).
    pub fn decide_approval(
        &self,
        id: i64,
        kind: DecisionKind,
        input: &DecisionInput,
        who: &HumanAuthority,
    ) -> Result<Approval, ApprovalError> {
        let resolution = input.resolution(kind)?;
        let approvals = self.approvals()?;
        let tool = approvals.get(id)?.tool;
        let is_watch = tool == WATCH_GRANTS_TOOL;
        // An edited card is checked (and normalized, a watch frozen) like the proposal was.
        let watch_check = |v: &Value| self.prepare_watch_input(v);
        let executor = self.preflight_of(&tool);
        let tool_check =
            |v: &Value| executor.as_ref().map_or_else(|| Ok(v.clone()), |e| e.preflight(self, v));
        let check: Option<crate::approval::Preflight<'_>> = if is_watch {
            Some(&watch_check)
        } else if executor.is_some() {
            Some(&tool_check)
        } else {
            None
        };
        let approval = approvals.resolve(
            id,
            &resolution,
            input.note.as_deref(),
            who,
            input.pin.as_deref(),
            check,
            now(),
        )?;
        if is_watch
            && approval.status.allows_execution()
            && let Err(e) = self.create_approved_watch(id)
        {
            // The approval stands; activation is retried with `create_approved_watch`.
            tracing::warn!(approval = id, error = %e, "the approved watch could not start yet");
        }
        Ok(approval)
    }

    fn prepare_watch_input(&self, v: &Value) -> Result<Value, String> {
        let def: WatchDefinition = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
        let prepared = self
            .watches()
            .map_err(|e| e.to_string())?
            .prepare(&def, now())
            .map_err(|e| e.to_string())?;
        serde_json::to_value(prepared).map_err(|e| e.to_string())
    }

    /// An agent asks for a watch whose rules grant future actions: the definition is checked
    /// against the capability registry and frozen (relative times become instants now, before
    /// anyone looks at the card), and a Confirm (L2) approval is requested whose summary says
    /// in words what the watch may do. Once a person approves, the watch starts (see
    /// [`Steward::create_approved_watch`]).
    pub fn request_agent_watch(
        &self,
        def: &WatchDefinition,
        agent: &str,
    ) -> Result<Approval, WatchError> {
        let prepared = self.watches()?.prepare(def, now())?;
        if prepared.rules.iter().all(|r| r.grants.is_empty()) {
            return Err(WatchError::Invalid(
                "no rule grants an action: create the watch directly".to_owned(),
            ));
        }
        let input =
            serde_json::to_value(&prepared).map_err(|e| WatchError::Invalid(e.to_string()))?;
        let summary = format!(
            "Watch {} {} until it ends — \"{}\". {}.",
            prepared.source,
            prepared.resource_ref,
            prepared.instruction,
            describe_grants(&prepared.rules)
        );
        let request = NewApproval {
            chat: prepared.chat,
            requested_by: agent.to_owned(),
            tool: WATCH_GRANTS_TOOL.to_owned(),
            input,
            summary,
            level: Level::Confirm,
            timeout_secs: None,
            taint: None,
        };
        let check = |v: &Value| self.prepare_watch_input(v);
        self.approvals()
            .map_err(|e| WatchError::Approval(Box::new(e)))?
            .request(&request, Some(&check), now())
            .map_err(|e| WatchError::Approval(Box::new(e)))
    }

    /// Creates a watch, or — when its rules grant future actions — asks for the approval that
    /// will start it (requested by `agent`).
    pub fn propose_watch(
        &self,
        def: &WatchDefinition,
        agent: &str,
    ) -> Result<WatchProposal, WatchError> {
        if def.rules.iter().any(|r| !r.grants.is_empty()) {
            return self.request_agent_watch(def, agent).map(WatchProposal::NeedsApproval);
        }
        self.watches()?.create(def, now()).map(WatchProposal::Started)
    }

    /// Starts the watch a person approved: the approval must be a `watch.create_agent`
    /// request, approved or edited, and the definition started is exactly the approved one
    /// (by hash). Idempotent: the same approval always gives the same watch.
    pub fn create_approved_watch(&self, approval_id: i64) -> Result<WatchSummary, WatchError> {
        let boxed = |e| WatchError::Approval(Box::new(e));
        let approvals = self.approvals().map_err(boxed)?;
        let a = approvals.get(approval_id).map_err(boxed)?;
        if a.tool != WATCH_GRANTS_TOOL {
            return Err(WatchError::Invalid(format!(
                "approval {approval_id} is not a {WATCH_GRANTS_TOOL} request"
            )));
        }
        let approved = approvals.authorize_approved(approval_id).map_err(boxed)?;
        self.watches()?.create_approved(&approved, now())
    }
}
