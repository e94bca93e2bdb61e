//! Human approvals: a gated tool call waits here until a person approves, edits, denies or asks
//! for a revision — or until it expires, which is a denial.
//!
//! Owns: the durable approval records in `steward.db` (states, the effective input and its
//! SHA-256, timestamps), [`HumanAuthority`] (the only thing that can resolve), race-safe
//! resolution (at most once), expiry, batch requests, and the binding check the executor runs
//! before it acts. Never does: decide policy (see [`crate::policy`]), execute a tool, or accept
//! a resolution from agent code.
//!
//! States: `requested → approved | edited | denied | revision_requested | expired | cancelled`.
//! Every transition out of `requested` is one conditional UPDATE (`… WHERE status =
//! 'requested' AND expires_at > now`), so two resolvers, or a resolver and the expiry sweep,
//! produce exactly one outcome.

pub mod spoken;
mod store;

use serde::{Deserialize, Serialize};
use serde_json::Value;
pub(crate) use store::open_steward_db;
pub use store::{
    ApprovalEvent, ApprovalSnapshot, Approvals, ApprovedInput, MAX_EVENT_PAGE, MAX_PIN_FAILURES,
    MAX_WAIT_SECS, NewApproval, PIN_WINDOW_SECS, Preflight, SUBSCRIPTION_POLL_MS,
};

use crate::{
    error::{ErrorKind, StewardError},
    policy::Level,
    store::StoreError,
};

/// Seconds a request waits for a person before it expires (a denial).
/// Default of a request's `timeout_secs` (the design's five minutes; fixed for the agent's requests).
pub const APPROVAL_TIMEOUT_SECS: i64 = 300;
/// Most approvals one page lists.
/// Fixed (not a setting).
pub const MAX_APPROVAL_PAGE: usize = 100;
/// Most calls one batch request covers.
/// Fixed (not a setting).
pub const MAX_BATCH_CALLS: usize = 100;
/// Largest proposed input, in bytes of canonical JSON.
/// Fixed (not a setting).
pub const MAX_INPUT_BYTES: usize = 256 * 1024;

/// Proof that a person, authenticated by a frontend, is acting. Only [`crate::Steward::human`]
/// makes one — a frontend (the command, the server after its token check, the launcher, a
/// notebook) calls it explicitly; agent and tool-execution code never holds a `Steward`.
///
/// ```compile_fail
/// // Agent code cannot forge one: the fields are private and there is no other constructor.
/// let forged = steward_core::approval::HumanAuthority { person: "me".into(), sealed: () };
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HumanAuthority {
    person: String,
    sealed: (),
}

impl HumanAuthority {
    pub(crate) fn new(person: &str) -> Result<Self, ApprovalError> {
        let person = person.trim();
        if person.is_empty() || person.starts_with(AGENT_PREFIX) || person.len() > 200 {
            return Err(ApprovalError::BadPerson(person.to_owned()));
        }
        Ok(Self { person: person.to_owned(), sealed: () })
    }

    /// Who is acting.
    pub fn person(&self) -> &str {
        &self.person
    }
}

/// Agent identities are `agent:<name>`; a person's name never starts with it.
pub const AGENT_PREFIX: &str = "agent:";

/// The state of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    /// Waiting for a person.
    Requested,
    /// Approved as proposed.
    Approved,
    /// Approved with the person's replacement input.
    Edited,
    /// Denied by the person.
    Denied,
    /// Sent back to the agent with the person's feedback.
    RevisionRequested,
    /// Nobody answered in time: a denial.
    Expired,
    /// Withdrawn by the agent before anyone answered.
    Cancelled,
}

impl ApprovalStatus {
    /// The stored name (`requested`, `approved`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Requested => "requested",
            Self::Approved => "approved",
            Self::Edited => "edited",
            Self::Denied => "denied",
            Self::RevisionRequested => "revision_requested",
            Self::Expired => "expired",
            Self::Cancelled => "cancelled",
        }
    }

    /// The state named `s` (`requested`, `approved`, …).
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Requested,
            Self::Approved,
            Self::Edited,
            Self::Denied,
            Self::RevisionRequested,
            Self::Expired,
            Self::Cancelled,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }

    /// True when the call may run.
    pub fn allows_execution(self) -> bool {
        matches!(self, Self::Approved | Self::Edited)
    }
}

/// What a person decides.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// Run as proposed.
    Approve,
    /// Run with this input instead (optional fields left absent stay absent).
    Edit(Value),
    /// Do not run.
    Deny,
    /// Do not run; tell the agent what to change.
    Revise,
}

/// One approval request, as the card shows it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Approval {
    /// Its id.
    pub id: i64,
    /// The batch it belongs to, if any.
    pub batch_id: Option<i64>,
    /// The chat or session it came from.
    pub chat: Option<String>,
    /// The agent identity that asked.
    pub requested_by: String,
    /// The tool.
    pub tool: String,
    /// What the agent proposed.
    pub proposed_input: Value,
    /// The proposal after the tool's preflight (what the card shows and what runs if approved).
    pub normalized_input: Value,
    /// A person-readable summary.
    pub summary: String,
    /// Confirm or Secure.
    pub level: Level,
    /// The state.
    pub status: ApprovalStatus,
    /// Who decided.
    pub decided_by: Option<String>,
    /// The person's note (for a revision: the feedback to the agent).
    pub note: Option<String>,
    /// What runs: the normalized input, or the person's edit after preflight.
    pub effective_input: Option<Value>,
    /// SHA-256 of the canonical effective input.
    pub effective_sha256: Option<String>,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub decided_at: Option<i64>,
    /// Unix seconds.
    pub expires_at: i64,
    /// The input's fields copied from untrusted content (mail, attachments, outside
    /// services), each with the item it came from; absent when none was.
    pub taint: Option<Taint>,
}

/// Fields of a proposed input whose values were copied from untrusted content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Taint {
    /// Each tainted value (at most [`MAX_TAINTED_FIELDS`]).
    pub fields: Vec<TaintedField>,
}

impl Taint {
    /// As JSON text (for bindings that carry it as a string).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{\"fields\":[]}".to_owned())
    }
}

/// Most tainted values one approval names.
/// Fixed (not a setting).
pub const MAX_TAINTED_FIELDS: usize = 50;

/// One value of an input found in untrusted content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaintedField {
    /// Where in the input, as a JSON pointer (`/to/0`, `/body`).
    pub field: String,
    /// The value (or, inside a longer text, the part found).
    pub value: String,
    /// `email`, `url`, `iban`, `phone`, `amount` or `path`.
    pub kind: String,
    /// The item it came from (`message:12`, `attachment:12:1`, `train:…`).
    pub source: String,
    /// The tool whose result held it.
    pub tool: String,
}

impl Approval {
    /// The input that runs if the request is (or was) approved: the person's edit when there is
    /// one, else the normalized proposal. What every card, prompt and executor shows.
    pub fn input_to_run(&self) -> &Value {
        self.effective_input.as_ref().unwrap_or(&self.normalized_input)
    }
}

/// Which requests to list ([`crate::Steward::list_approvals`]): a query string's shape.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalQuery {
    /// Only this state: `pending` (= `requested`), `requested`, `approved`, `edited`,
    /// `denied`, `revision_requested`, `expired`, `cancelled`; absent or `all`: every state.
    pub status: Option<String>,
    /// Only this chat.
    pub chat: Option<String>,
    /// Requests to skip.
    pub offset: usize,
    /// Requests to return (1..=100; absent: 20).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<usize>,
}

/// Requests per page when the query does not say.
/// Default of a list's `limit`.
pub const DEFAULT_APPROVAL_PAGE: usize = 20;

impl ApprovalQuery {
    /// The state filter, checked.
    pub fn status_filter(&self) -> Result<Option<ApprovalStatus>, ApprovalError> {
        match self.status.as_deref().map(str::trim) {
            None | Some("all" | "") => Ok(None),
            Some("pending") => Ok(Some(ApprovalStatus::Requested)),
            Some(s) => ApprovalStatus::parse(s).map(Some).ok_or_else(|| {
                ApprovalError::Invalid(format!(
                    "unknown status {s:?}: expected pending, all, requested, approved, edited, denied, revision_requested, expired or cancelled"
                ))
            }),
        }
    }
}

/// One recorded transition of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ApprovalHistoryEntry {
    /// `requested`, `approved`, `pin_failed`, …
    pub event: String,
    /// Who.
    pub actor: String,
    /// Unix seconds.
    pub at: i64,
}

/// A request with its recorded transitions.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ApprovalDetail {
    /// The request.
    pub approval: Approval,
    /// Its transitions, oldest first.
    pub events: Vec<ApprovalHistoryEntry>,
}

/// A person's decision as a frontend receives it (a request body, a command's flags).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct DecisionInput {
    /// A note for the record; for a revision, what the agent should change (required there).
    pub note: Option<String>,
    /// Approve only: run this input instead of the proposal (a JSON object).
    pub edit: Option<Value>,
    /// The person's PIN, for secure (L3) requests.
    pub pin: Option<String>,
}

/// What a person does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionKind {
    /// Approve (with an edit when the input carries one).
    Approve,
    /// Deny.
    Deny,
    /// Send back with the note as feedback.
    Revise,
}

impl DecisionInput {
    /// The resolution this input asks for, checked: an edit only with approve, a revision
    /// only with a note.
    pub fn resolution(&self, kind: DecisionKind) -> Result<Resolution, ApprovalError> {
        match (kind, &self.edit) {
            (DecisionKind::Approve, Some(edit)) => Ok(Resolution::Edit(edit.clone())),
            (DecisionKind::Approve, None) => Ok(Resolution::Approve),
            (_, Some(_)) => {
                Err(ApprovalError::Invalid("an edit only goes with approve".to_owned()))
            }
            (DecisionKind::Deny, None) => Ok(Resolution::Deny),
            (DecisionKind::Revise, None) => {
                if self.note.as_deref().is_none_or(|n| n.trim().is_empty()) {
                    return Err(ApprovalError::Invalid(
                        "a revision needs a note with what to change".to_owned(),
                    ));
                }
                Ok(Resolution::Revise)
            }
        }
    }
}

/// Errors of approvals.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// No request has this id.
    #[error("approval {0} not found")]
    NotFound(i64),
    /// Someone (or the expiry) resolved it first.
    #[error("approval {id} is already {status:?}")]
    AlreadyResolved {
        /// The request.
        id: i64,
        /// Its state.
        status: ApprovalStatus,
    },
    /// An agent tried to resolve a request.
    #[error("an agent cannot resolve approvals ({0})")]
    SelfResolveDenied(String),
    /// The executor's input is not the approved one.
    #[error("approval {0}: the input to execute differs from the approved input")]
    InputMismatch(i64),
    /// The request does not allow execution (denied, expired, pending…).
    #[error("approval {id} does not allow execution: {status:?}")]
    NotApproved {
        /// The request.
        id: i64,
        /// Its state.
        status: ApprovalStatus,
    },
    /// The tool's preflight rejected the input.
    #[error("preflight rejected the input: {0}")]
    Preflight(String),
    /// An L3 request without a verified PIN, or a wrong PIN.
    #[error("a correct PIN is required for a secure approval")]
    PinRequired,
    /// Too many wrong PINs recently.
    #[error("too many wrong PINs; try again in {0} s")]
    PinLocked(i64),
    /// No PIN has been set.
    #[error("no PIN is set; set one first")]
    NoPin,
    /// A PIN that is not 4–32 characters.
    #[error("a PIN must be 4 to 32 characters")]
    BadPin,
    /// A person name that is empty, too long or an agent identity.
    #[error("{0:?} is not a person")]
    BadPerson(String),
    /// Malformed request (level, sizes, batch).
    #[error("invalid approval request: {0}")]
    Invalid(String),
    /// A stored approval that no longer parses (its table, row and column are named):
    /// `steward.db` is damaged; restore it from a backup.
    #[error("steward.db is damaged: {0}")]
    Corrupt(String),
    /// The audit trail (`audit.db`) cannot be opened: no decision proceeds unaudited. Nothing
    /// is cached either, so a later call opens both once the trail can be opened.
    #[error("the audit trail cannot be opened ({0}); approvals refuse to run unaudited")]
    AuditUnavailable(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl StewardError for ApprovalError {
    fn code(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "APPROVAL_NOT_FOUND",
            Self::AlreadyResolved { .. } => "APPROVAL_ALREADY_RESOLVED",
            Self::SelfResolveDenied(_) => "APPROVAL_SELF_RESOLVE_DENIED",
            Self::InputMismatch(_) => "APPROVAL_INPUT_MISMATCH",
            Self::NotApproved { .. } => "APPROVAL_NOT_APPROVED",
            Self::Preflight(_) => "APPROVAL_PREFLIGHT_REJECTED",
            Self::PinRequired => "APPROVAL_PIN_REQUIRED",
            Self::PinLocked(_) => "APPROVAL_PIN_LOCKED",
            Self::NoPin => "APPROVAL_NO_PIN",
            Self::BadPin => "APPROVAL_BAD_PIN",
            Self::BadPerson(_) => "APPROVAL_BAD_PERSON",
            Self::Invalid(_) => "APPROVAL_INVALID",
            Self::Corrupt(_) => "APPROVAL_CORRUPT",
            Self::AuditUnavailable(_) => "AUDIT_UNAVAILABLE",
            Self::Store(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::NotFound(_) => ErrorKind::NotFound,
            Self::AlreadyResolved { .. } => ErrorKind::Conflict,
            Self::SelfResolveDenied(_)
            | Self::InputMismatch(_)
            | Self::NotApproved { .. }
            | Self::PinRequired
            | Self::PinLocked(_) => ErrorKind::Denied,
            Self::Preflight(_)
            | Self::NoPin
            | Self::BadPin
            | Self::BadPerson(_)
            | Self::Invalid(_) => ErrorKind::InvalidInput,
            Self::Corrupt(_) => ErrorKind::Corrupt,
            Self::AuditUnavailable(_) => ErrorKind::Unavailable,
            Self::Store(e) => e.kind(),
        }
    }
}

/// Canonical JSON: object keys sorted at every level, no whitespace. The hash of what runs is
/// taken over this form, so key order can never make two inputs look different or alike.
pub fn canonical_json(v: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    write(&m[k], out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(v, &mut out);
    out
}

/// SHA-256 (hex) of the canonical form of `v`.
pub fn input_sha256(v: &Value) -> String {
    use sha2::{Digest, Sha256};
    crate::mirror::hex(&Sha256::digest(canonical_json(v).as_bytes()))
}
