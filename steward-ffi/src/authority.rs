//! Approvals and the write journal across the FFI: cards and operation summaries as records,
//! and the person's authority as an object the launcher mints explicitly.

use std::sync::Arc;

use steward_core::{
    StewardError,
    approval::{Approval, DecisionInput, DecisionKind, canonical_json},
    journal::{OperationSummary as CoreSummary, OpsQuery},
};

use crate::{FfiError, Steward};

/// An approval request as a card shows it.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct ApprovalCard {
    /// Its id.
    pub id: i64,
    /// The tool that would run.
    pub tool: String,
    /// The exact input that would run, as canonical JSON.
    pub input_json: String,
    /// A person-readable summary.
    pub summary: String,
    /// How much the person must do.
    pub level: crate::states::ApprovalLevel,
    /// Its state.
    pub status: crate::states::ApprovalState,
    /// The agent identity that asked.
    pub requested_by: String,
    /// The chat it came from.
    pub chat: Option<String>,
    /// Unix seconds.
    pub expires_at: i64,
    /// The input's fields copied from untrusted content with their sources, as JSON
    /// (`{"fields":[{"field","value","kind","source","tool"}]}`); absent when none was.
    pub taint_json: Option<String>,
}

impl From<Approval> for ApprovalCard {
    fn from(a: Approval) -> Self {
        let input_json = canonical_json(a.input_to_run());
        Self {
            id: a.id,
            tool: a.tool,
            input_json,
            summary: a.summary,
            level: a.level.into(),
            status: a.status.into(),
            requested_by: a.requested_by,
            chat: a.chat,
            expires_at: a.expires_at,
            taint_json: a.taint.as_ref().map(steward_core::approval::Taint::to_json),
        }
    }
}

/// A journaled operation, summarized.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct OperationSummary {
    /// Its id.
    pub id: i64,
    /// `mail.send`, `mail.reply`, `mail.send_later`.
    pub kind: String,
    /// Its state.
    pub state: crate::states::OperationState,
    /// Backend attempts (0 or 1).
    pub attempts: i64,
    /// Confirmation checks so far.
    pub confirmation_attempts: i64,
    /// The backend's error, if any.
    pub error: Option<String>,
}

impl From<CoreSummary> for OperationSummary {
    fn from(o: CoreSummary) -> Self {
        Self {
            id: o.id,
            kind: o.kind,
            state: o.state.into(),
            attempts: o.attempts,
            confirmation_attempts: o.confirmation_attempts,
            error: o.error,
        }
    }
}

/// One entry of the audit trail (payload redacted at record time).
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct AuditEntry {
    /// Its id.
    pub id: i64,
    /// Unix seconds.
    pub at: i64,
    /// Who.
    pub actor: String,
    /// What (`approval.approved`, `policy.changed`, …).
    pub event_type: String,
    /// `low`, `medium` or `high`.
    pub risk: String,
    /// The chat.
    pub chat: Option<String>,
    /// The tool.
    pub tool: Option<String>,
    /// Ties related entries together (`approval:12`).
    pub correlation_id: Option<String>,
    /// The redacted payload, as JSON.
    pub payload_json: String,
}

impl From<steward_core::audit::AuditRecord> for AuditEntry {
    fn from(r: steward_core::audit::AuditRecord) -> Self {
        Self {
            id: r.id,
            at: r.at,
            actor: r.actor,
            event_type: r.event_type,
            risk: r.risk,
            chat: r.chat,
            tool: r.tool,
            correlation_id: r.correlation_id,
            payload_json: r.payload.to_string(),
        }
    }
}

/// One journaled operation in full.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct OperationDetail {
    /// The summary.
    pub summary: OperationSummary,
    /// The approval it ran under.
    pub approval_id: Option<i64>,
    /// The input, as canonical JSON.
    pub input_json: String,
    /// What confirmation looks for, as JSON.
    pub expected_json: String,
    /// The backend's answer, as JSON.
    pub backend_result_json: Option<String>,
    /// What confirmed it, as JSON.
    pub evidence_json: Option<String>,
}

fn ffi(e: &(impl StewardError + ?Sized)) -> FfiError {
    FfiError::from_core(e)
}

#[uniffi::export]
impl Steward {
    /// Approval requests, newest first (at most 100 per page).
    pub fn approvals(
        &self,
        pending_only: bool,
        offset: u32,
        limit: u32,
    ) -> Result<Vec<ApprovalCard>, FfiError> {
        let q = steward_core::approval::ApprovalQuery {
            status: pending_only.then(|| "pending".to_owned()),
            chat: None,
            offset: offset as usize,
            limit: Some(limit as usize),
        };
        let page = self.inner().list_approvals(&q).map_err(|e| ffi(&e))?;
        Ok(page.into_iter().map(Into::into).collect())
    }

    /// Journaled operations, newest first (at most 100 per page), optionally in one state.
    pub fn write_operations(
        &self,
        state: Option<String>,
        offset: u32,
        limit: u32,
    ) -> Result<Vec<OperationSummary>, FfiError> {
        let q = OpsQuery { state, offset: offset as usize, limit: Some(limit as usize) };
        let ops = self.inner().query_write_operations(&q).map_err(|e| ffi(&e))?;
        Ok(ops.into_iter().map(Into::into).collect())
    }

    /// One approval request as its card shows it.
    pub fn approval(&self, id: i64) -> Result<ApprovalCard, FfiError> {
        self.inner().approval_detail(id).map(|d| d.approval.into()).map_err(|e| ffi(&e))
    }

    /// One journaled operation in full.
    pub fn write_operation(&self, id: i64) -> Result<OperationDetail, FfiError> {
        let op = self.inner().read_write_operation(id).map_err(|e| ffi(&e))?;
        Ok(OperationDetail {
            summary: OperationSummary {
                id: op.id,
                kind: op.kind.clone(),
                state: op.state.into(),
                attempts: op.attempts,
                confirmation_attempts: op.confirmation_attempts,
                error: op.error.clone(),
            },
            approval_id: op.approval_id,
            input_json: canonical_json(&op.input),
            expected_json: op.expected.to_string(),
            backend_result_json: op.backend_result.as_ref().map(ToString::to_string),
            evidence_json: op.evidence.as_ref().map(ToString::to_string),
        })
    }

    /// The redacted audit trail, newest first: `query_json` holds the filters (`actor`,
    /// `event_type`, `risk`, `chat`, `tool`, `after`, `before`, `text`, `offset`, `limit`; `{}`
    /// for none).
    pub fn audit(&self, query_json: String) -> Result<Vec<AuditEntry>, FfiError> {
        let q = steward_core::audit::AuditQuery::from_json(&query_json).map_err(|e| ffi(&e))?;
        let page = self.inner().audit_page(&q).map_err(|e| ffi(&e))?;
        Ok(page.events.into_iter().map(Into::into).collect())
    }

    /// The authority of the person using this launcher. Only a human frontend calls this, and
    /// only explicitly; agent identities (`agent:…`) are refused.
    pub fn human(&self, person: String) -> Result<Arc<Human>, FfiError> {
        let who = self.inner().human(&person).map_err(|e| ffi(&e))?;
        Ok(Arc::new(Human { steward: self.handle(), who }))
    }
}

/// A person's authority: resolves approval requests.
#[derive(uniffi::Object)]
pub struct Human {
    steward: Arc<steward_core::Steward>,
    who: steward_core::approval::HumanAuthority,
}

#[uniffi::export]
impl Human {
    /// Approves request `id` as proposed (`pin` for a secure request).
    pub fn approve(
        &self,
        id: i64,
        note: Option<String>,
        pin: Option<String>,
    ) -> Result<ApprovalCard, FfiError> {
        self.resolve(id, DecisionKind::Approve, note, pin)
    }

    /// Denies request `id`.
    pub fn deny(&self, id: i64, note: Option<String>) -> Result<ApprovalCard, FfiError> {
        self.resolve(id, DecisionKind::Deny, note, None)
    }
}

impl Human {
    /// The handle and the person's authority.
    pub(crate) fn parts(
        &self,
    ) -> (&steward_core::Steward, &steward_core::approval::HumanAuthority) {
        (&self.steward, &self.who)
    }

    fn resolve(
        &self,
        id: i64,
        kind: DecisionKind,
        note: Option<String>,
        pin: Option<String>,
    ) -> Result<ApprovalCard, FfiError> {
        // The core's decision path: an approved watch card also starts its watch.
        let input = DecisionInput { note, pin, edit: None };
        let card =
            self.steward.decide_approval(id, kind, &input, &self.who).map_err(|e| ffi(&e))?;
        Ok(card.into())
    }
}
