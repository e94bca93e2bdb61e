//! Sending: one journaled submission, scheduled sends when due, and the gated requests
//! that send only the approved input.

use super::*;

/// The draft of a `mail.send` input, sent as `sender` (the host's account, never the input's).
pub(crate) fn draft_of(i: MailSendInput, sender: &Sender) -> MailDraft {
    MailDraft {
        account: sender.account.clone(),
        from: sender.from.clone(),
        from_name: sender.from_name.clone(),
        to: i.to,
        cc: i.cc,
        bcc: i.bcc,
        subject: i.subject,
        body: i.body,
        in_reply_to: i.in_reply_to,
        attachments: i.attachments,
        calendar: None,
    }
}

/// The time a `send_at` names, when it is in the future (a past time sends now).
pub(crate) fn scheduled(send_at: Option<&str>, now: i64) -> Result<Option<i64>, OutboxError> {
    let Some(t) = send_at else { return Ok(None) };
    let at = crate::time::parse_date(t)
        .map_err(|e| OutboxError::Invalid(format!("send_at {t:?}: {e}")))?;
    Ok((at > now).then_some(at))
}

pub(super) fn one_submission(
    transport: &dyn MailTransport,
    mail: &OutgoingMail,
) -> (OpState, OpUpdate) {
    match transport.submit(mail) {
        Ok(receipt) => (
            OpState::BackendReturned,
            OpUpdate {
                backend_result: Some(json!({"response": receipt.response})),
                ..OpUpdate::default()
            },
        ),
        Err(e) => (
            e.class.outcome(),
            OpUpdate {
                backend_result: Some(json!({"class": e.class.as_str()})),
                error: Some(e.to_string()),
                ..OpUpdate::default()
            },
        ),
    }
}

impl Steward {
    /// Journals `mail` and, unless it is scheduled, submits it once. The same idempotency key
    /// with the same mail returns the operation already journaled **without** submitting again
    /// (whatever state it is in); with another mail it is refused (`JOURNAL_KEY_REUSED`).
    pub fn send_mail(
        &self,
        mail: &OutgoingMail,
        idempotency_key: &str,
        approval_id: Option<i64>,
        scheduled_for: Option<i64>,
        transport: &dyn MailTransport,
        now: i64,
    ) -> Result<Operation, OutboxError> {
        let journal = self.journal()?;
        let input = serde_json::to_value(mail)
            .map_err(|e| OutboxError::Invalid(format!("unserializable mail: {e}")))?;
        let (op, inserted) = journal.record_new(
            &NewOperation {
                kind: mail.kind(scheduled_for.is_some()).to_owned(),
                idempotency_key: idempotency_key.to_owned(),
                input,
                expected: mail.expected(),
                approval_id,
                scheduled_for,
            },
            now,
        )?;
        if !inserted || op.state != OpState::Started {
            return Ok(op);
        }
        fail::fail_point!("outbox::after_journal", |_| std::process::abort());
        let (to, update) = one_submission(transport, mail);
        fail::fail_point!("outbox::after_backend", |_| std::process::abort());
        let op = journal.transition(op.id, to, &update, crate::time::now_secs().max(now))?;
        fail::fail_point!("outbox::after_record", |_| std::process::abort());
        Ok(op)
    }

    /// Claims the scheduled sends due at `now` (each row once, atomically) and submits each
    /// once. A crash after the claim leaves `started` rows for confirmation, never for a
    /// second claim.
    pub fn send_due(
        &self,
        transport: &dyn MailTransport,
        now: i64,
    ) -> Result<SendDueReport, OutboxError> {
        let journal = self.journal()?;
        let claimed = journal.claim_due(now, SEND_DUE_BATCH)?;
        fail::fail_point!("outbox::after_claim", |_| std::process::abort());
        let mut report = SendDueReport { claimed: claimed.len(), ..SendDueReport::default() };
        for op in claimed {
            let (to, update) = match serde_json::from_value::<OutgoingMail>(op.input.clone()) {
                Ok(mail) => one_submission(transport, &mail),
                Err(e) => (
                    OpState::Failed,
                    OpUpdate {
                        error: Some(format!("the journaled input is not a mail: {e}")),
                        ..OpUpdate::default()
                    },
                ),
            };
            fail::fail_point!("outbox::after_backend", |_| std::process::abort());
            journal.transition(op.id, to, &update, crate::time::now_secs().max(now))?;
            match to {
                OpState::BackendReturned => report.backend_returned += 1,
                OpState::Unknown => report.unknown += 1,
                _ => report.failed += 1,
            }
        }
        Ok(report)
    }

    /// A `mail.send` request made through a frontend (`requester`, an `agent:` identity naming
    /// it): the policy decides (audited); a denial journals nothing; an allowed send is
    /// journaled and submitted; a gated one becomes an approval request, which `inline` — a
    /// person at a human frontend — may approve on the spot (with the PIN at the secure level;
    /// without it the request stays pending).
    pub fn request_mail_send(
        &self,
        input: &MailSendInput,
        requester: &str,
        sender: &Sender,
        inline: Option<InlineApproval<'_>>,
        transport: &dyn MailTransport,
        now: i64,
    ) -> Result<SendRequestOutcome, OutboxError> {
        use crate::{
            approval::{NewApproval, Resolution},
            policy::{Decision, DecisionContext, Level},
        };
        let value = serde_json::to_value(input)
            .map_err(|e| OutboxError::Invalid(format!("unserializable input: {e}")))?;
        let call =
            crate::ToolCall { actor: requester, chat: None, tool: "mail.send", input: &value };
        let decision = self.decide(&call, &DecisionContext::default())?;
        match decision {
            Decision::Deny { reason } => Err(OutboxError::Denied(
                serde_json::to_string(&reason).unwrap_or_else(|_| "denied".into()),
            )),
            Decision::Allow { .. } => {
                let draft = draft_of(input.clone(), sender);
                let scheduled_for = scheduled(input.send_at.as_deref(), now)?;
                let mail = self.prepare_mail(&draft, now)?;
                let key = format!("request:{}", mail.message_id);
                let op = self.send_mail(&mail, &key, None, scheduled_for, transport, now)?;
                Ok(SendRequestOutcome::Journaled { operation: Box::new(op) })
            }
            Decision::Gate { level } => {
                let approvals = self.approvals()?;
                let summary = format!(
                    "Send \"{}\" to {}",
                    input.subject,
                    input.to.iter().chain(&input.cc).cloned().collect::<Vec<_>>().join(", ")
                );
                let approval = approvals.request(
                    &NewApproval {
                        chat: None,
                        requested_by: requester.to_owned(),
                        tool: "mail.send".into(),
                        input: value,
                        summary,
                        level,
                        timeout_secs: None,
                        taint: None,
                    },
                    None,
                    now,
                )?;
                let Some(inline) = inline else {
                    return Ok(SendRequestOutcome::Pending { approval: Box::new(approval) });
                };
                if level == Level::Secure && inline.pin.is_none() {
                    return Ok(SendRequestOutcome::Pending { approval: Box::new(approval) });
                }
                approvals.resolve(
                    approval.id,
                    &Resolution::Approve,
                    None,
                    inline.who,
                    inline.pin,
                    None,
                    now,
                )?;
                let op = self.send_approved_mail(approval.id, sender, transport, now)?;
                Ok(SendRequestOutcome::Journaled { operation: Box::new(op) })
            }
        }
    }

    /// Executes an approved `mail.send`, `mail.send_later` or `mail.reply` request: exactly the effective input the
    /// person approved (or edited), from `sender`, journaled under the key `approval:<id>` —
    /// so calling this again for the same approval returns the first operation and never sends
    /// twice. A request that is not approved is refused and nothing is journaled.
    pub fn send_approved_mail(
        &self,
        approval_id: i64,
        sender: &Sender,
        transport: &dyn MailTransport,
        now: i64,
    ) -> Result<Operation, OutboxError> {
        let key = format!("approval:{approval_id}");
        if let Some(op) = self.journal()?.find_by_key(&key)? {
            return Ok(op);
        }
        let approved = self.approvals()?.authorize_approved(approval_id)?;
        self.send_mail_tool(
            approved.tool(),
            approved.input().clone(),
            sender,
            &key,
            Some(approval_id),
            transport,
            now,
        )
    }

    /// Journals and submits (or schedules) the mail a mail tool's input describes — `mail.send`,
    /// `mail.send_later` or `mail.reply` — from `sender`, under `key` (an operation already
    /// under `key` is returned and nothing is sent again).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_mail_tool(
        &self,
        tool: &str,
        input: Value,
        sender: &Sender,
        key: &str,
        approval_id: Option<i64>,
        transport: &dyn MailTransport,
        now: i64,
    ) -> Result<Operation, OutboxError> {
        if let Some(op) = self.journal()?.find_by_key(key)? {
            return Ok(op);
        }
        let invalid =
            |e: serde_json::Error| OutboxError::Invalid(format!("{tool}: not a mail input: {e}"));
        let (draft, send_at) = match tool {
            "mail.send" => {
                let i: MailSendInput = serde_json::from_value(input).map_err(invalid)?;
                let send_at = i.send_at.clone();
                (draft_of(i, sender), send_at)
            }
            "mail.send_later" => {
                let i: crate::policy::catalog::MailSendLaterInput =
                    serde_json::from_value(input).map_err(invalid)?;
                let i = MailSendInput::from(i);
                let send_at = i.send_at.clone();
                (draft_of(i, sender), send_at)
            }
            "mail.reply" => {
                let i: MailReplyInput = serde_json::from_value(input).map_err(invalid)?;
                (self.reply_draft(&i, sender)?, None)
            }
            other => return Err(OutboxError::Invalid(format!("{other} is not a mail tool"))),
        };
        let scheduled_for = scheduled(send_at.as_deref(), now)?;
        let mail = self.prepare_mail(&draft, now)?;
        self.send_mail(&mail, key, approval_id, scheduled_for, transport, now)
    }

    /// The draft answering mirrored message `i.message_id`: to its sender (and, for reply-all,
    /// its other recipients but the sender's own address), `Re:` subject, linked by Message-ID.
    pub(crate) fn reply_draft(
        &self,
        i: &MailReplyInput,
        sender: &Sender,
    ) -> Result<MailDraft, OutboxError> {
        let m = self
            .mirror()
            .read_message(i.message_id, crate::mirror::BodyWindow::first())
            .map_err(|e| OutboxError::Invalid(format!("message {}: {e}", i.message_id)))?;
        let parent = m.message_id.clone().ok_or_else(|| {
            OutboxError::Invalid(format!("message {} has no Message-ID to answer", i.message_id))
        })?;
        let me = normalize_address(&sender.from);
        let mut to: Vec<String> = m.from.iter().map(|a| a.addr.clone()).collect();
        let mut cc = Vec::new();
        if i.reply_all {
            to.extend(m.to.iter().map(|a| a.addr.clone()));
            cc.extend(m.cc.iter().map(|a| a.addr.clone()));
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut keep = |a: &String| normalize_address(a) != me && seen.insert(normalize_address(a));
        to.retain(&mut keep);
        cc.retain(&mut keep);
        let subject = if m.subject.trim_start().to_lowercase().starts_with("re:") {
            m.subject.clone()
        } else {
            format!("Re: {}", m.subject)
        };
        Ok(MailDraft {
            account: sender.account.clone(),
            from: sender.from.clone(),
            from_name: sender.from_name.clone(),
            to,
            cc,
            subject,
            body: i.body.clone(),
            in_reply_to: Some(parent),
            ..MailDraft::default()
        })
    }
}
