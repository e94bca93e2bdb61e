//! The confirmation pass: a sent copy in the mirror confirms; misses are counted until a
//! person reviews. Nothing is ever re-sent.

use super::*;

impl Steward {
    /// One confirmation pass over at most [`CONFIRM_PASS_LIMIT`] mail operations that the
    /// backend accepted, whose outcome is unknown, or that were left `started` for at least
    /// [`STALE_STARTED_SECS`]. Evidence confirms; a miss is counted, and at the limit the
    /// operation goes to `needs_review` with what was found. Nothing is ever re-sent.
    pub fn confirm_pass(&self, now: i64) -> Result<ConfirmReport, OutboxError> {
        let journal = self.journal()?;
        let due = journal.confirmable("mail.", now - STALE_STARTED_SECS, CONFIRM_PASS_LIMIT)?;
        let mut report = ConfirmReport { checked: due.len(), ..ConfirmReport::default() };
        for op in due {
            let found = self
                .mirror()
                .sent_evidence(&op.expected, op.attempted_at.unwrap_or(op.created_at))?;
            fail::fail_point!("outbox::during_confirm", |_| std::process::abort());
            let evidence = serde_json::to_value(&found).ok();
            match (found.matched(), &evidence) {
                (Some(_), Some(seen)) => {
                    journal.confirm(op.id, Confirmation::observed(seen.clone()), now)?;
                    report.confirmed += 1;
                }
                _ => {
                    if found.is_ambiguous() {
                        report.ambiguous += 1;
                    }
                    let after = journal.confirmation_missed(op.id, now, evidence)?;
                    if after.state.is_final() {
                        report.needs_review += 1;
                    } else if !found.is_ambiguous() {
                        report.pending += 1;
                    }
                }
            }
        }
        Ok(report)
    }
}
