//! The facade's approvals, PIN and audit trail: what frontends call instead of the stores.

use super::Steward;
use crate::{
    approval::{Approval, ApprovalError, HumanAuthority},
    audit::{AuditError, AuditQuery, AuditRecord},
    time::now_secs,
};

/// A page of the audit trail.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct AuditPage {
    /// The events, newest first.
    pub events: Vec<AuditRecord>,
    /// Audit writes that failed since this process started (the trail is best-effort).
    pub write_failures: u64,
}

impl Steward {
    /// One approval request.
    pub fn approval(&self, id: i64) -> Result<Approval, ApprovalError> {
        self.approvals()?.get(id)
    }

    /// Sets (or changes) the PIN secure approvals ask `who` for (4..=32 characters).
    pub fn set_pin(&self, who: &HumanAuthority, pin: &str) -> Result<(), ApprovalError> {
        self.approvals()?.set_pin(who, pin, now_secs())
    }

    /// A page of the audit trail, with the count of audit writes that failed.
    pub fn audit_page(&self, query: &AuditQuery) -> Result<AuditPage, AuditError> {
        let log = self.audit()?;
        Ok(AuditPage { events: log.query(query)?, write_failures: log.failures() })
    }
}
