//! The outbox: mail that leaves through the write journal.
//!
//! Every send is journaled (`ops.db`) *before* its transport is called, and nothing here ever
//! calls a transport twice for one operation: a crash after the journal write leaves a `started`
//! row that only confirmation can settle. Confirmation looks for the sent copy in the mirror's
//! Sent-role mailbox (which the person's sync tool fills): our Message-ID is the strongest
//! evidence; without it, sender, subject, exact To/Cc sets, normalized body and reply linkage
//! inside a time window. An operation that is never observed ends `needs_review`; a new send is a
//! new request with a new approval.
//!
//! The transport is a trait ([`MailTransport`]) so that SMTP lives in `steward-connectors`; the
//! classification of its failures ([`SubmitClass`]) decides between `failed` (nothing can have
//! been accepted) and `unknown` (it may have been: only evidence can tell).

mod evidence;

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::{
    Steward,
    error::{ErrorKind, StewardError},
    journal::{
        Confirmation, JournalError, NewOperation, OpState, OpUpdate, Operation, OperationSummary,
    },
    mirror::hex,
    paths::{MAX_ATTACHMENT_BYTES, PathError},
    policy::catalog::{MAX_ATTACHMENTS, MAX_RECIPIENTS, MailReplyInput, MailSendInput},
    store::StoreError,
};

pub use evidence::{Evidence, EvidenceMatch};

/// Operations one confirmation pass examines at most.
pub const CONFIRM_PASS_LIMIT: usize = 100;
/// A `started` operation unchanged this long (seconds) is presumed orphaned by a crash and is
/// examined by confirmation (never re-sent).
pub const STALE_STARTED_SECS: i64 = 60;
/// Evidence may be dated this long before the attempt (clock skew between hosts).
pub const EVIDENCE_WINDOW_BEFORE_SECS: i64 = 60;
/// … and this long after it (a queue that delivers late).
pub const EVIDENCE_WINDOW_AFTER_SECS: i64 = 24 * 3_600;
/// Scheduled sends one `send_due` call claims at most.
pub const SEND_DUE_BATCH: usize = 100;
/// Longest subject accepted, in bytes.
pub const MAX_SUBJECT_BYTES: usize = 998;
/// Longest body accepted, in bytes.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Longest address accepted, in bytes (RFC 5321 path limit).
pub const MAX_ADDRESS_BYTES: usize = 254;
/// References carried into a reply at most (the newest are kept).
pub const MAX_REFERENCES: usize = 50;

/// What a person (or an approved agent request) asks to send.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MailDraft {
    /// The mirror account whose Sent mailbox will confirm the send.
    pub account: String,
    /// The sender address (the account's own address).
    pub from: String,
    /// The sender's display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_name: Option<String>,
    /// Recipients.
    pub to: Vec<String>,
    /// Carbon-copy recipients.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cc: Vec<String>,
    /// Blind-copy recipients (in the envelope only, never in the headers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bcc: Vec<String>,
    /// The subject line.
    pub subject: String,
    /// The plain-text body.
    pub body: String,
    /// The Message-ID being answered (a reply), with or without angle brackets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
    /// Files to attach (paths) or mirrored attachments (`attachment:<message id>:<position>`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<String>,
}

/// One attachment, fixed when the mail is prepared: the bytes sent later must hash the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutgoingAttachment {
    /// Where the bytes are (a guarded file, or a mirror blob).
    pub path: PathBuf,
    /// The file name shown to the recipient.
    pub name: String,
    /// The MIME type.
    pub mime_type: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 (hex) of the bytes.
    pub sha256: String,
}

/// A mail ready for submission: the complete executable input journaled before the transport
/// is called. Its Message-ID is ours and is the strongest evidence key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutgoingMail {
    /// The mirror account that confirms it.
    pub account: String,
    /// The sender address.
    pub from: String,
    /// The sender's display name.
    pub from_name: Option<String>,
    /// Recipients.
    pub to: Vec<String>,
    /// Carbon-copy recipients.
    pub cc: Vec<String>,
    /// Blind-copy recipients.
    pub bcc: Vec<String>,
    /// The subject.
    pub subject: String,
    /// The plain-text body.
    pub body: String,
    /// Our Message-ID, without angle brackets.
    pub message_id: String,
    /// The Message-ID answered, without angle brackets.
    pub in_reply_to: Option<String>,
    /// The thread's References, oldest first, ending with `in_reply_to`.
    pub references: Vec<String>,
    /// Attachments.
    pub attachments: Vec<OutgoingAttachment>,
    /// The Date header (Unix seconds): when the mail was prepared.
    pub date: i64,
}

impl OutgoingMail {
    /// The journal kind: `mail.reply` for an answer, `mail.send_later` when scheduled,
    /// `mail.send` otherwise.
    pub fn kind(&self, scheduled: bool) -> &'static str {
        match (scheduled, self.in_reply_to.is_some()) {
            (true, _) => "mail.send_later",
            (false, true) => "mail.reply",
            (false, false) => "mail.send",
        }
    }

    /// What confirmation will look for.
    pub fn expected(&self) -> Value {
        json!({
            "account": self.account,
            "message_id": self.message_id,
            "from": normalize_address(&self.from),
            "subject": self.subject.trim(),
            "to": address_set(&self.to),
            "cc": address_set(&self.cc),
            "body_sha256": body_digest(&self.body),
            "in_reply_to": self.in_reply_to,
        })
    }
}

/// Why a submission failed, precisely enough to know whether anything can have been accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubmitClass {
    /// The server could not be reached (refused, unresolvable, timed out while connecting).
    Connect,
    /// The TLS handshake or certificate check failed.
    Tls,
    /// The server refused the credentials.
    Auth,
    /// A recipient was refused (before DATA).
    RecipientRefused,
    /// The server answered no to the sender or the message (a 4xx or 5xx reply).
    Rejected,
    /// The mail could not be built (an attachment changed or vanished, an invalid address).
    Build,
    /// The transport is not configured, or configured unsafely.
    Config,
    /// The connection broke or timed out before the message data was sent: nothing can have
    /// been accepted.
    Interrupted,
    /// Timed out during the mail transaction: the message may have been accepted.
    Timeout,
    /// The connection broke during the mail transaction: the message may have been accepted.
    ConnectionReset,
}

impl SubmitClass {
    /// `failed` when the server cannot have accepted the message, `unknown` when it may have.
    pub fn outcome(self) -> OpState {
        match self {
            Self::Timeout | Self::ConnectionReset => OpState::Unknown,
            _ => OpState::Failed,
        }
    }

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::Tls => "tls",
            Self::Auth => "auth",
            Self::RecipientRefused => "recipient_refused",
            Self::Rejected => "rejected",
            Self::Build => "build",
            Self::Config => "config",
            Self::Interrupted => "interrupted",
            Self::Timeout => "timeout",
            Self::ConnectionReset => "connection_reset",
        }
    }
}

/// A failed submission.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} failure: {message}", class.as_str())]
pub struct SubmitError {
    /// What kind of failure.
    pub class: SubmitClass,
    /// The server's reply or the local cause (never credentials).
    pub message: String,
}

/// What the server said when it accepted the message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// The final reply (for example `250 2.0.0 Ok: queued as 4F2A`).
    pub response: String,
}

/// Submits a prepared mail. Implementations make exactly one attempt and classify failures.
pub trait MailTransport: Send + Sync {
    /// Builds and submits `mail`.
    fn submit(&self, mail: &OutgoingMail) -> Result<Receipt, SubmitError>;
}

/// Errors of the outbox.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutboxError {
    /// The draft is not sendable (an address, a size, a count).
    #[error("invalid mail: {0}")]
    Invalid(String),
    /// An attachment was refused by the sensitive-path guard or is unusable.
    #[error(transparent)]
    Attachment(#[from] PathError),
    /// A mirrored attachment that does not exist or whose bytes are not stored.
    #[error("attachment {0:?} is not in the mirror")]
    AttachmentNotFound(String),
    /// The journal refused or failed.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The policy denies this send.
    #[error("the policy denies this send: {0}")]
    Denied(String),
    /// The policy could not be read.
    #[error(transparent)]
    Policy(#[from] crate::policy::PolicyError),
    /// The approval does not allow this send.
    #[error(transparent)]
    Approval(#[from] crate::approval::ApprovalError),
    /// The mirror could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl StewardError for OutboxError {
    fn code(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "MAIL_INVALID",
            Self::Denied(_) => "MAIL_DENIED",
            Self::Attachment(e) => e.code(),
            Self::AttachmentNotFound(_) => "MAIL_ATTACHMENT_NOT_FOUND",
            Self::Journal(e) => e.code(),
            Self::Policy(e) => e.code(),
            Self::Approval(e) => e.code(),
            Self::Store(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Invalid(_) => ErrorKind::InvalidInput,
            Self::Denied(_) => ErrorKind::Denied,
            Self::Attachment(e) => e.kind(),
            Self::AttachmentNotFound(_) => ErrorKind::NotFound,
            Self::Journal(e) => e.kind(),
            Self::Policy(e) => e.kind(),
            Self::Approval(e) => e.kind(),
            Self::Store(e) => e.kind(),
        }
    }
}

/// Who sends: the person's own account, from the frontend's configuration, never from an
/// agent's input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sender {
    /// The mirror account whose Sent mailbox confirms.
    pub account: String,
    /// The address.
    pub from: String,
    /// The display name.
    pub from_name: Option<String>,
}

/// What became of a send request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SendRequestOutcome {
    /// Journaled: submitted once, or scheduled.
    Journaled {
        /// The operation.
        operation: Box<Operation>,
    },
    /// Waiting for a person's approval (then [`Steward::send_approved_mail`]).
    Pending {
        /// The request.
        approval: Box<crate::approval::Approval>,
    },
}

/// A person at a human frontend confirming their own request on the spot.
#[derive(Debug, Clone, Copy)]
pub struct InlineApproval<'a> {
    /// The person (only a human frontend holds one).
    pub who: &'a crate::approval::HumanAuthority,
    /// Their PIN, for a request the policy puts at the secure level.
    pub pin: Option<&'a str>,
}

/// What [`Steward::send_due`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SendDueReport {
    /// Operations claimed and submitted (each once).
    pub claimed: usize,
    /// Of those, accepted by the server.
    pub backend_returned: usize,
    /// Refused: nothing was sent.
    pub failed: usize,
    /// Outcome unknown: left to confirmation.
    pub unknown: usize,
}

/// What [`Steward::confirm_pass`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ConfirmReport {
    /// Operations examined.
    pub checked: usize,
    /// Confirmed by evidence in the mirror.
    pub confirmed: usize,
    /// Not (yet) observed; checked again on a later pass.
    pub pending: usize,
    /// Several candidate messages matched: not confirmed.
    pub ambiguous: usize,
    /// Reached the confirmation limit: a person looks.
    pub needs_review: usize,
}

/// A Message-ID without brackets or surrounding space.
pub fn normalize_message_id(id: &str) -> String {
    crate::mirror::normalize_message_id(id)
}

/// An address as compared: trimmed and lowercased.
pub fn normalize_address(a: &str) -> String {
    a.trim().to_lowercase()
}

/// A sorted, de-duplicated set of normalized addresses.
pub fn address_set(list: &[String]) -> Vec<String> {
    let mut v: Vec<String> = list.iter().map(|a| normalize_address(a)).collect();
    v.sort();
    v.dedup();
    v
}

/// SHA-256 of a body with line endings and runs of white space collapsed, so that the copy a
/// server stores (CRLF, trailing spaces, a re-wrapped quoted-printable) compares equal.
pub fn body_digest(body: &str) -> String {
    let mut h = Sha256::new();
    let mut first = true;
    for word in body.split_whitespace() {
        if !first {
            h.update(b" ");
        }
        h.update(word.as_bytes());
        first = false;
    }
    hex(&h.finalize())
}

fn check_address(field: &str, a: &str) -> Result<(), OutboxError> {
    let bad = |why: &str| Err(OutboxError::Invalid(format!("{field} address {a:?} {why}")));
    if a.len() > MAX_ADDRESS_BYTES {
        return bad("is too long");
    }
    if a.chars().any(|c| c.is_control() || c.is_whitespace() || matches!(c, '<' | '>' | ',')) {
        return bad("contains white space, control or separator characters");
    }
    match a.rsplit_once('@') {
        Some((local, domain))
            if !local.is_empty() && !domain.is_empty() && !domain.contains('@') =>
        {
            Ok(())
        }
        _ => bad("is not of the form local@domain"),
    }
}

fn check_line(field: &str, s: &str, max: usize) -> Result<(), OutboxError> {
    if s.len() > max {
        return Err(OutboxError::Invalid(format!("{field} is longer than {max} bytes")));
    }
    if s.chars().any(|c| c == '\r' || c == '\n') {
        return Err(OutboxError::Invalid(format!("{field} must be one line")));
    }
    Ok(())
}

/// A Message-ID of 128 random bits at the sender's domain.
fn new_message_id(from: &str) -> Result<String, OutboxError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| OutboxError::Invalid(format!("no randomness for a Message-ID: {e}")))?;
    let domain = from.rsplit_once('@').map_or("localhost", |(_, d)| d);
    Ok(format!("{}.steward@{}", hex(&bytes), domain.to_lowercase()))
}

/// Hashes the file at `path`, refusing more than [`MAX_ATTACHMENT_BYTES`].
fn file_digest(path: &Path) -> std::io::Result<(u64, String)> {
    use std::io::Read;
    let f = std::fs::File::open(path)?;
    let mut r = f.take(MAX_ATTACHMENT_BYTES + 1);
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    loop {
        let k = r.read(&mut buf)?;
        if k == 0 {
            break;
        }
        n += k as u64;
        h.update(&buf[..k]);
    }
    Ok((n, hex(&h.finalize())))
}

/// Reads an attachment's bytes and checks that they are the ones journaled.
pub fn read_attachment(a: &OutgoingAttachment) -> Result<Vec<u8>, SubmitError> {
    let build = |message: String| SubmitError { class: SubmitClass::Build, message };
    if a.size > MAX_ATTACHMENT_BYTES {
        return Err(build(format!("{} is larger than the limit", a.name)));
    }
    let bytes = std::fs::read(&a.path).map_err(|e| build(format!("{}: {e}", a.path.display())))?;
    if hex(&Sha256::digest(&bytes)) != a.sha256 {
        return Err(build(format!(
            "{} changed since the mail was approved; nothing was sent",
            a.path.display()
        )));
    }
    Ok(bytes)
}

fn mime_type_of(path: &Path) -> &'static str {
    let ext = path.extension().map(|e| e.to_string_lossy().to_lowercase()).unwrap_or_default();
    match ext.as_str() {
        "pdf" => "application/pdf",
        "txt" | "md" => "text/plain",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "ics" => "text/calendar",
        "zip" => "application/zip",
        "json" => "application/json",
        "doc" => "application/msword",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        _ => "application/octet-stream",
    }
}

fn draft_of(i: MailSendInput, sender: &Sender) -> MailDraft {
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
    }
}

/// The time a `send_at` names, when it is in the future (a past time sends now).
pub(crate) fn scheduled(send_at: Option<&str>, now: i64) -> Result<Option<i64>, OutboxError> {
    let Some(t) = send_at else { return Ok(None) };
    let at = crate::time::parse_date(t)
        .map_err(|e| OutboxError::Invalid(format!("send_at {t:?}: {e}")))?;
    Ok((at > now).then_some(at))
}

fn one_submission(transport: &dyn MailTransport, mail: &OutgoingMail) -> (OpState, OpUpdate) {
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
    /// Validates a draft and fixes everything the send needs: our Message-ID, the reply's
    /// References (from the mirror when the answered message is there), and each attachment's
    /// bytes by hash (files pass the sensitive-path guard). Nothing is journaled yet.
    pub fn prepare_mail(&self, draft: &MailDraft, now: i64) -> Result<OutgoingMail, OutboxError> {
        if draft.account.trim().is_empty() {
            return Err(OutboxError::Invalid("an account is required".into()));
        }
        check_address("from", &draft.from)?;
        if draft.to.is_empty() && draft.cc.is_empty() && draft.bcc.is_empty() {
            return Err(OutboxError::Invalid("at least one recipient is required".into()));
        }
        for (field, list) in [("to", &draft.to), ("cc", &draft.cc), ("bcc", &draft.bcc)] {
            if list.len() > MAX_RECIPIENTS {
                return Err(OutboxError::Invalid(format!(
                    "{field} names {} recipients; the limit is {MAX_RECIPIENTS}",
                    list.len()
                )));
            }
            for a in list {
                check_address(field, a)?;
            }
        }
        check_line("subject", &draft.subject, MAX_SUBJECT_BYTES)?;
        if let Some(n) = &draft.from_name {
            check_line("from_name", n, MAX_SUBJECT_BYTES)?;
        }
        if draft.body.len() > MAX_BODY_BYTES {
            return Err(OutboxError::Invalid(format!(
                "the body is longer than {MAX_BODY_BYTES} bytes"
            )));
        }
        if draft.attachments.len() > MAX_ATTACHMENTS {
            return Err(OutboxError::Invalid(format!(
                "{} attachments; the limit is {MAX_ATTACHMENTS}",
                draft.attachments.len()
            )));
        }
        let in_reply_to = match &draft.in_reply_to {
            Some(id) => {
                let id = normalize_message_id(id);
                check_line("in_reply_to", &id, MAX_ADDRESS_BYTES * 4)?;
                if id.is_empty() || id.chars().any(char::is_whitespace) {
                    return Err(OutboxError::Invalid(format!(
                        "in_reply_to {id:?} is not a Message-ID"
                    )));
                }
                Some(id)
            }
            None => None,
        };
        let references = match &in_reply_to {
            Some(parent) => {
                let mut refs = self.mirror().references_of(&draft.account, parent)?;
                refs.retain(|r| r != parent);
                refs.push(parent.clone());
                let cut = refs.len().saturating_sub(MAX_REFERENCES);
                refs.drain(..cut);
                refs
            }
            None => Vec::new(),
        };
        let mut attachments = Vec::with_capacity(draft.attachments.len());
        for spec in &draft.attachments {
            attachments.push(self.resolve_attachment(spec)?);
        }
        Ok(OutgoingMail {
            account: draft.account.trim().to_owned(),
            from: draft.from.trim().to_owned(),
            from_name: draft.from_name.clone().filter(|n| !n.trim().is_empty()),
            to: draft.to.clone(),
            cc: draft.cc.clone(),
            bcc: draft.bcc.clone(),
            subject: draft.subject.clone(),
            body: draft.body.clone(),
            message_id: new_message_id(&draft.from)?,
            in_reply_to,
            references,
            attachments,
            date: now,
        })
    }

    fn resolve_attachment(&self, spec: &str) -> Result<OutgoingAttachment, OutboxError> {
        if let Some(rest) = spec.strip_prefix("attachment:") {
            let not_found = || OutboxError::AttachmentNotFound(spec.to_owned());
            let (msg, pos) = rest.split_once(':').ok_or_else(not_found)?;
            let (msg, pos) =
                (msg.parse().map_err(|_| not_found())?, pos.parse().map_err(|_| not_found())?);
            let (name, mime_type, size, sha) =
                self.mirror().attachment_blob(msg, pos)?.ok_or_else(not_found)?;
            let path = self.mirror().blob_path(&sha).ok_or_else(not_found)?;
            return Ok(OutgoingAttachment {
                path,
                name: name.unwrap_or_else(|| format!("attachment-{pos}")),
                mime_type,
                size,
                sha256: sha,
            });
        }
        let path = crate::paths::guard_file(Path::new(spec), self.home())?;
        let (size, sha256) = file_digest(&path)
            .map_err(|e| PathError::NotAFile { path: path.clone(), why: e.to_string() })?;
        if size > MAX_ATTACHMENT_BYTES {
            return Err(PathError::TooLarge { path, bytes: size }.into());
        }
        Ok(OutgoingAttachment {
            name: path
                .file_name()
                .map_or_else(|| "attachment".to_owned(), |n| n.to_string_lossy().into_owned()),
            mime_type: mime_type_of(&path).to_owned(),
            path,
            size,
            sha256,
        })
    }

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

    /// [`Steward::list_write_operations`] from a query (the state by name, the default page).
    pub fn query_write_operations(
        &self,
        q: &crate::journal::OpsQuery,
    ) -> Result<Vec<OperationSummary>, OutboxError> {
        let state = q.state.as_deref().map(str::parse::<OpState>).transpose()?;
        self.list_write_operations(
            state,
            q.offset,
            q.limit.unwrap_or(crate::journal::DEFAULT_OPS_PAGE),
        )
    }

    /// Bounded summaries of journaled operations (no inputs or evidence), newest first,
    /// optionally in one state; [`Steward::read_write_operation`] has the rest.
    pub fn list_write_operations(
        &self,
        state: Option<OpState>,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<OperationSummary>, OutboxError> {
        Ok(self.journal()?.list(state, offset, limit)?.iter().map(Into::into).collect())
    }

    /// One operation with its complete input and evidence.
    pub fn read_write_operation(&self, id: i64) -> Result<Operation, OutboxError> {
        Ok(self.journal()?.get(id)?)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn mail() -> OutgoingMail {
        OutgoingMail {
            account: "me".into(),
            from: "Ada@Example.org".into(),
            from_name: Some("Ada".into()),
            to: vec!["Bob@example.org".into(), "bob@example.org".into()],
            cc: vec![],
            bcc: vec!["dan@example.org".into()],
            subject: " Numbers ".into(),
            body: "Hello Bob,\r\n\r\n  the numbers.\n".into(),
            message_id: "0f1e.steward@example.org".into(),
            in_reply_to: Some("parent@example.org".into()),
            references: vec!["root@example.org".into(), "parent@example.org".into()],
            attachments: vec![],
            date: 1_790_000_000,
        }
    }

    /// The journaled input and the expected outcome are stored forever: their shape is a
    /// contract (snapshot).
    #[test]
    fn the_journaled_mail_and_its_expected_outcome_are_stable() {
        let m = mail();
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            json!({
                "account": "me", "from": "Ada@Example.org", "from_name": "Ada",
                "to": ["Bob@example.org", "bob@example.org"], "cc": [], "bcc": ["dan@example.org"],
                "subject": " Numbers ", "body": "Hello Bob,\r\n\r\n  the numbers.\n",
                "message_id": "0f1e.steward@example.org", "in_reply_to": "parent@example.org",
                "references": ["root@example.org", "parent@example.org"], "attachments": [],
                "date": 1_790_000_000
            })
        );
        assert_eq!(
            m.expected(),
            json!({
                "account": "me", "message_id": "0f1e.steward@example.org",
                "from": "ada@example.org", "subject": "Numbers", "to": ["bob@example.org"],
                "cc": [], "in_reply_to": "parent@example.org",
                "body_sha256": body_digest("Hello Bob, the numbers.")
            })
        );
        assert_eq!((m.kind(false), m.kind(true)), ("mail.reply", "mail.send_later"));
        // The body digest ignores line endings and runs of white space, nothing else.
        assert_eq!(body_digest("a  b\r\nc"), body_digest("a b c"));
        assert_ne!(body_digest("a b c"), body_digest("a b d"));
        let evidence = Evidence {
            matches: vec![EvidenceMatch {
                message: 7,
                mailbox: "Sent".into(),
                rfc_message_id: Some("0f1e.steward@example.org".into()),
                date: Some(1_790_000_005),
                matched_on: "message_id".into(),
            }],
            window: (1_789_999_940, 1_790_086_400),
        };
        assert_eq!(
            serde_json::to_value(&evidence).unwrap(),
            json!({"matches": [{"message": 7, "mailbox": "Sent",
                   "rfc_message_id": "0f1e.steward@example.org", "date": 1_790_000_005,
                   "matched_on": "message_id"}], "window": [1_789_999_940, 1_790_086_400]})
        );
        assert!(evidence.matched().is_some() && !evidence.is_ambiguous());
    }

    #[test]
    fn failure_classes_map_to_failed_or_unknown() {
        use SubmitClass::*;
        for c in [Connect, Tls, Auth, RecipientRefused, Rejected, Build, Config, Interrupted] {
            assert_eq!(c.outcome(), OpState::Failed, "{c:?}");
        }
        for c in [Timeout, ConnectionReset] {
            assert_eq!(c.outcome(), OpState::Unknown, "{c:?}");
        }
    }
}
