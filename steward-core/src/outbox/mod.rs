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

mod confirm;
mod evidence;
mod prepare;
mod send;

pub use prepare::read_attachment;
pub(crate) use send::draft_of;

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
/// Fixed (not a setting).
pub const CONFIRM_PASS_LIMIT: usize = 100;
/// A `started` operation unchanged this long (seconds) is presumed orphaned by a crash and is
/// examined by confirmation (never re-sent).
/// Fixed (not a setting).
pub const STALE_STARTED_SECS: i64 = 60;
/// Evidence may be dated this long before the attempt (clock skew between hosts).
/// Fixed (not a setting).
pub const EVIDENCE_WINDOW_BEFORE_SECS: i64 = 60;
/// … and this long after it (a queue that delivers late).
/// Fixed (not a setting).
pub const EVIDENCE_WINDOW_AFTER_SECS: i64 = 24 * 3_600;
/// Scheduled sends one `send_due` call claims at most.
/// Fixed (not a setting).
pub const SEND_DUE_BATCH: usize = 100;
/// Longest subject accepted, in bytes.
/// Fixed by the mail format (RFC 5322 line length).
pub const MAX_SUBJECT_BYTES: usize = 998;
/// Longest body accepted, in bytes.
/// Fixed (not a setting).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Longest address accepted, in bytes (RFC 5321 path limit).
/// Fixed (not a setting).
pub const MAX_ADDRESS_BYTES: usize = 254;
/// References carried into a reply at most (the newest are kept).
/// Fixed (not a setting).
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
    /// An iTIP object (`METHOD:REQUEST`), sent beside the body as its `text/calendar`
    /// alternative: what calendar apps offer to accept or decline. Only Steward's own
    /// `calendar.invite` sets it, never a model's input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub calendar: Option<String>,
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
    /// The iTIP object sent as the body's `text/calendar` alternative.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendar: Option<String>,
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

impl Steward {
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
            calendar: None,
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
