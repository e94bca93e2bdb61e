//! The authority surface of [`Steward`]: audited policy decisions and policy changes.
//!
//! [`crate::policy::decide`] is pure; this is where a decision meets the stores: the policy
//! version in force is loaded, the decision is recorded in the audit trail, and a change to the
//! policy needs either a person ([`HumanAuthority`]) or an approved `policy.set` request.

use serde_json::{Value, json};

use crate::{
    Steward,
    approval::{HumanAuthority, MAX_INPUT_BYTES, canonical_json},
    audit::{AuditEvent, Risk},
    policy::{Decision, DecisionContext, PolicyChange, PolicyError, PolicyVersion, decide},
    time::now_secs as now,
};

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
            decide(self.tools(), &current.policy, call.tool, call.input, ctx)
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
        let input = a.effective_input.clone().unwrap_or(Value::Null);
        let input = approvals.authorize_execution(approval_id, &input).map_err(boxed)?;
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
