//! The tool registry with executors: the one surface through which an agent (the chat runner,
//! an MCP client, a watch's granted action) touches the person's data and the world.
//!
//! A tool is a [`ToolSpec`] in the handle's registry (name, schema, effect, default level —
//! what the policy decides over) plus a [`ToolExecutor`] here. [`Toolbox::call`] is the
//! permission order every caller goes through:
//!
//! 1. the tool must have an executor here (an unknown name is refused, nothing is decided);
//! 2. the executor's preflight parses the input against its typed schema and normalizes it
//!    (unknown keys, wrong types and out-of-range values are refused before the policy);
//! 3. [`Steward::decide`] decides over the normalized input (audited);
//! 4. an allowed call runs; a gated one becomes an approval request and nothing runs until
//!    [`Toolbox::run_approved`] gets the person's decision as an [`ApprovedInput`]; a denied
//!    one runs nothing.
//!
//! Results are bounded: every tool has a character budget for the text the model reads
//! ([`DEFAULT_RESULT_CHARS`], per tool in config), lists stop at whole items and hand back a
//! continuation `cursor`, and every result names the items it came from ([`SourceRef`]) —
//! mail and attachments marked untrusted, because their text is data, never instructions.

mod calendar;
mod client;
mod contacts;
mod external;
mod files;
mod mail;
mod memory;
mod shell;
mod system;

pub use client::{
    ClientOutcome, ClientResource, LISTED_RESOURCES, MAX_CLIENT_NAME_CHARS, MAX_CLIENT_WAIT_SECS,
    MAX_WAITING_CALLS, MESSAGE_RESOURCE, RESOURCE_NAME_CHARS, THREAD_RESOURCE, client_actor,
    pending_json, result_text,
};

pub use calendar::CALENDAR_DEFAULT_LIMIT;
pub use contacts::CONTACTS_DEFAULT_LIMIT;
pub use external::{
    MAX_EXTERNAL_INPUT_BYTES, MAX_PROVIDER_NAME_CHARS, ProvidedTools, ToolProvider,
    check_external_input, external_name, valid_provider_name,
};
pub use mail::{MAX_ATTACHMENT_TEXT_BYTES, SEARCH_DEFAULT_LIMIT};
pub use memory::{MAX_QUOTE_SEARCH_CHARS, MEMORY_DEFAULT_LIMIT};
pub use system::{USAGE_DEFAULT_SINCE, WATCH_PAGE};

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError},
};

use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

use crate::{
    Steward, ToolCall,
    approval::{Approval, ApprovalError, ApprovedInput, NewApproval, Taint},
    audit::{AuditEvent, Risk},
    error::{ErrorKind, StewardError},
    outbox::{MailTransport, Sender},
    policy::{Decision, DecisionContext, DenyReason, Effect, Level, PolicyError},
    time::now_secs,
};

/// Characters of result text a tool returns to the model when its configuration does not say.
/// Default of `[tools.result_chars]`.
pub const DEFAULT_RESULT_CHARS: usize = 8_000;
/// The most characters of result text any tool may be configured to return.
/// Fixed (not a setting).
pub const MAX_RESULT_CHARS: usize = 48_000;
/// The fewest (a budget below this cannot hold one compact item and its cursor).
/// The lower end of `[tools.result_chars]`.
pub const MIN_RESULT_CHARS: usize = 500;
/// Largest structured result (`data`) kept with a result, in bytes of JSON; a larger one is
/// replaced by a note (the text the model reads is bounded separately).
/// Fixed (not a setting).
pub const MAX_RESULT_DATA_BYTES: usize = 64 * 1024;
/// Most sources one result names (a result longer than this names the first ones).
/// Fixed (not a setting).
pub const MAX_RESULT_SOURCES: usize = 200;

/// An item a result came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SourceRef {
    /// A mirrored message.
    Message {
        /// The mirror's id.
        id: i64,
        /// Its RFC Message-ID, when it has one.
        message_id: Option<String>,
    },
    /// An attachment of a mirrored message.
    Attachment {
        /// The message's mirror id.
        message_id: i64,
        /// The attachment's position.
        position: i64,
        /// Its file name.
        name: Option<String>,
    },
    /// A journaled write operation.
    Operation {
        /// Its id.
        id: i64,
    },
    /// A watch.
    Watch {
        /// Its id.
        id: i64,
    },
    /// An approval request.
    Approval {
        /// Its id.
        id: i64,
    },
    /// A train run from a public timetable service.
    Train {
        /// The train's reference.
        train_ref: String,
    },
    /// The usage ledger.
    Usage,
    /// A calendar event.
    Event {
        /// Steward's id for the event.
        id: String,
    },
    /// A person of the address books or of the mail headers.
    Contact {
        /// Steward's id for the person, or the address when they are only in mail.
        id: String,
    },
    /// A file under the shared folders.
    File {
        /// Its path.
        path: String,
    },
    /// A note of the person's memory.
    Memory {
        /// The note's id.
        id: String,
    },
    /// A tool of an outside server (`[[mcp.servers]]`).
    External {
        /// The server's name.
        server: String,
        /// The tool's name as the server gives it.
        tool: String,
    },
}

impl SourceRef {
    /// Whether the item's text was written by someone other than the person and Steward
    /// (mail, attachments, public services): data for the model, never instructions.
    pub fn untrusted(&self) -> bool {
        matches!(
            self,
            Self::Message { .. }
                | Self::Attachment { .. }
                | Self::Train { .. }
                | Self::External { .. }
                // Cards of shared or synced books, names from mail headers, invitations.
                | Self::Contact { .. }
                | Self::Event { .. }
                // Names of downloads and shared files.
                | Self::File { .. }
                // Reviewed by the person, but distilled from mail and chats: recalled as data.
                | Self::Memory { .. }
        )
    }
}

/// What an executor hands back (the [`Toolbox`] bounds it into a [`ToolResult`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    /// Compact text for the model, with ids.
    pub text: String,
    /// Structured detail for a card.
    pub data: Value,
    /// The items it came from.
    pub sources: Vec<SourceRef>,
    /// Where a follow-up call continues (pass it back as `cursor`).
    pub cursor: Option<String>,
    /// A person must decide before what was asked for happens (a watch whose rules grant
    /// actions): the request.
    pub approval: Option<Approval>,
}

impl ToolOutput {
    /// Output with only text.
    pub fn text(text: impl Into<String>) -> Self {
        Self { text: text.into(), ..Self::default() }
    }
}

/// A tool's bounded result: what the model reads and what a card shows.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ToolResult {
    /// The tool.
    pub tool: String,
    /// Compact text for the model, at most the tool's budget in characters.
    pub text: String,
    /// Structured detail (at most [`MAX_RESULT_DATA_BYTES`] of JSON).
    pub data: Value,
    /// The items it came from (at most [`MAX_RESULT_SOURCES`]).
    pub sources: Vec<SourceRef>,
    /// Whether any source is untrusted (its text is data, never instructions).
    pub untrusted: bool,
    /// Where a follow-up call continues.
    pub cursor: Option<String>,
    /// Whether the text was cut at the budget (rather than stopping at a whole item).
    pub truncated: bool,
    /// The approval a person must decide before what was asked for happens.
    pub approval: Option<Approval>,
}

/// What [`Toolbox::call`] did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ToolOutcome {
    /// The policy allowed it and it ran.
    Ran {
        /// The level it ran at.
        level: Level,
        /// The result.
        result: Box<ToolResult>,
    },
    /// The policy gated it: nothing ran; a person decides this request.
    AwaitingApproval {
        /// The request.
        approval: Box<Approval>,
    },
    /// The policy denied it: nothing ran.
    Denied {
        /// Why.
        reason: DenyReason,
    },
}

/// Why an executor failed (the [`Toolbox`] names the tool).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecError {
    /// A stable code.
    pub code: &'static str,
    /// The kind.
    pub kind: ErrorKind,
    /// What went wrong.
    pub message: String,
}

impl ExecError {
    /// Bad input the schema could not express (a bad cursor, an unknown state).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self { code: "TOOL_INPUT_INVALID", kind: ErrorKind::InvalidInput, message: message.into() }
    }

    /// Something this tool cannot do here.
    pub fn unavailable(code: &'static str, message: impl Into<String>) -> Self {
        Self { code, kind: ErrorKind::Unavailable, message: message.into() }
    }
}

/// The idempotency key of a journaled write: under an approval the approval's, so running it
/// again never writes twice; an ungated write (a background grant) gets a key of its own.
pub(crate) fn write_key(run: &ToolRun<'_>, input: &serde_json::Value) -> (String, Option<i64>) {
    match run.approved {
        Some(a) => (format!("approval:{}", a.approval_id()), Some(a.approval_id())),
        None => (
            format!("tool:{}:{}:{}", run.actor, run.now, crate::approval::input_sha256(input)),
            None,
        ),
    }
}

impl<E: StewardError> From<E> for ExecError {
    fn from(e: E) -> Self {
        Self { code: e.code(), kind: e.kind(), message: e.to_string() }
    }
}

/// Errors of the registry and of calls.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// No tool of this name can run here.
    #[error("unknown tool {tool}")]
    Unknown {
        /// The name asked for.
        tool: String,
    },
    /// The input does not fit the tool's schema.
    #[error("{tool}: invalid input: {reason}")]
    InvalidInput {
        /// The tool.
        tool: String,
        /// What is wrong.
        reason: String,
    },
    /// The executor failed.
    #[error("{tool} failed: {message}")]
    Failed {
        /// The tool.
        tool: String,
        /// The underlying code.
        code: &'static str,
        /// The underlying kind.
        kind: ErrorKind,
        /// What went wrong.
        message: String,
    },
    /// A registration problem: no spec, a duplicate, a budget out of range.
    #[error("tool registration: {0}")]
    Registration(String),
    /// The policy could not be consulted.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The approval store failed, or the approval does not allow execution.
    #[error(transparent)]
    Approval(#[from] ApprovalError),
}

impl StewardError for ToolError {
    fn code(&self) -> &'static str {
        match self {
            Self::Unknown { .. } => "TOOL_UNKNOWN",
            Self::InvalidInput { .. } => "TOOL_INPUT_INVALID",
            Self::Failed { code, .. } => code,
            Self::Registration(_) => "TOOL_REGISTRATION_INVALID",
            Self::Policy(e) => e.code(),
            Self::Approval(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Unknown { .. } => ErrorKind::NotFound,
            Self::InvalidInput { .. } | Self::Registration(_) => ErrorKind::InvalidInput,
            Self::Failed { kind, .. } => *kind,
            Self::Policy(e) => e.kind(),
            Self::Approval(e) => e.kind(),
        }
    }
}

/// One run of an executor.
#[derive(Debug, Clone, Copy)]
pub struct ToolRun<'a> {
    /// The handle.
    pub steward: &'a Steward,
    /// The tool.
    pub tool: &'a str,
    /// Who asked.
    pub actor: &'a str,
    /// The chat it belongs to.
    pub chat: Option<&'a str>,
    /// The most characters of text to return.
    pub budget_chars: usize,
    /// The person's decision, when the call was gated.
    pub approved: Option<&'a ApprovedInput>,
    /// Unix seconds.
    pub now: i64,
}

/// What a journaled write hands back: the operation and its state, `what` it did (said after
/// the state), how the journal confirms it, and the operation's fields with `extra`'s.
pub(super) fn journaled_output(
    op: &crate::journal::Operation,
    what: &str,
    confirms: &str,
    extra: Value,
) -> ToolOutput {
    let mut data = serde_json::json!({
        "operation_id": op.id,
        "kind": op.kind,
        "state": op.state,
        "approval_id": op.approval_id,
    });
    if let (Some(d), Value::Object(more)) = (data.as_object_mut(), extra) {
        d.extend(more);
    }
    ToolOutput {
        text: format!(
            "Operation #{} ({}): {}{what}. The journal confirms it {confirms}; ops.show #{} tells \
             its state.",
            op.id,
            op.kind,
            op.state.as_str(),
            op.id
        ),
        data,
        sources: vec![SourceRef::Operation { id: op.id }],
        ..ToolOutput::default()
    }
}

/// Runs one tool.
pub trait ToolExecutor: Send + Sync {
    /// Parses `input` against the tool's schema and returns it normalized (what the policy
    /// decides over, what an approval card shows, what runs). Called again on a person's edit.
    fn preflight(&self, steward: &Steward, input: &Value) -> Result<Value, String>;

    /// One line for an approval card: what the call does, in words (`steward` to name what
    /// the call touches).
    fn summary(&self, steward: &Steward, input: &Value) -> String;

    /// Runs the normalized (or approved) `input`.
    fn run(&self, run: &ToolRun<'_>, input: &Value) -> Result<ToolOutput, ExecError>;
}

type RunFn<I> = dyn Fn(&ToolRun<'_>, I) -> Result<ToolOutput, ExecError> + Send + Sync;

type CheckFn<I> = fn(&Steward, I) -> Result<I, String>;

/// An executor over a typed input `I`: preflight is `I`'s serde parse (unknown keys refused)
/// and an optional check, normalized by serializing it back.
pub struct Typed<I> {
    summary: fn(&I) -> String,
    describe: Option<fn(&Steward, &I) -> Option<String>>,
    check: Option<CheckFn<I>>,
    run: Box<RunFn<I>>,
}

impl<I> Typed<I> {
    /// An executor from a summary and a run function.
    pub fn new(
        summary: fn(&I) -> String,
        run: impl Fn(&ToolRun<'_>, I) -> Result<ToolOutput, ExecError> + Send + Sync + 'static,
    ) -> Self {
        Self { summary, describe: None, check: None, run: Box::new(run) }
    }

    /// A summary that names what the call touches, from the handle's stores; `None` (the
    /// thing is not there) falls back to the plain summary.
    pub fn describe(mut self, describe: fn(&Steward, &I) -> Option<String>) -> Self {
        self.describe = Some(describe);
        self
    }

    /// Adds a preflight check that may refuse or normalize the parsed input.
    pub fn check(mut self, check: CheckFn<I>) -> Self {
        self.check = Some(check);
        self
    }
}

fn parse<I: DeserializeOwned>(input: &Value) -> Result<I, String> {
    serde_json::from_value(input.clone()).map_err(|e| e.to_string())
}

impl<I: DeserializeOwned + Serialize + Send + Sync> ToolExecutor for Typed<I> {
    fn preflight(&self, steward: &Steward, input: &Value) -> Result<Value, String> {
        let mut typed: I = parse(input)?;
        if let Some(check) = self.check {
            typed = check(steward, typed)?;
        }
        serde_json::to_value(typed).map_err(|e| e.to_string())
    }

    fn summary(&self, steward: &Steward, input: &Value) -> String {
        parse::<I>(input).map_or_else(
            |e| format!("(unreadable input: {e})"),
            |i| self.describe.and_then(|d| d(steward, &i)).unwrap_or_else(|| (self.summary)(&i)),
        )
    }

    fn run(&self, run: &ToolRun<'_>, input: &Value) -> Result<ToolOutput, ExecError> {
        let typed: I = parse(input).map_err(ExecError::invalid)?;
        (self.run)(run, typed)
    }
}

#[derive(Clone)]
struct Entry {
    executor: Arc<dyn ToolExecutor>,
    budget_chars: usize,
    /// Runs under an approval at most once, claimed before it runs (an outside tool, which
    /// has no journal of its own to make a second run harmless).
    claim_once: bool,
}

/// A tool as a model, an MCP client or a tool inventory sees it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ToolInfo {
    /// `namespace.verb`.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its input.
    pub input_schema: Value,
    /// What it does to the world.
    pub effect: Effect,
    /// The level it runs at unless a person sets another.
    pub default_level: Level,
    /// Characters of result text it returns at most.
    pub result_chars: usize,
}

/// A registered tool that cannot run here, and why (the tool inventory).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct UnavailableTool {
    /// `namespace.verb`.
    pub name: String,
    /// Why.
    pub reason: String,
}

/// Every registered tool: those that run here and those that cannot, with why.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ToolInventory {
    /// Tools with an executor.
    pub available: Vec<ToolInfo>,
    /// Tools the policy knows that have no executor here.
    pub unavailable: Vec<UnavailableTool>,
}

/// The tools of one handle with their executors.
pub struct Toolbox {
    steward: Arc<Steward>,
    entries: BTreeMap<String, Entry>,
    reasons: BTreeMap<String, String>,
    providers: BTreeMap<String, Provider>,
    /// How long an outside client's gated call waits for the decision.
    client_wait: std::time::Duration,
    /// Calls waiting now.
    waiting: std::sync::atomic::AtomicUsize,
    /// Outgoing mail, when configured (the calendar's invitations use it too).
    mail: Option<(Arc<dyn MailTransport>, Sender)>,
    /// The calendar sources that take writes.
    calendar_targets: Vec<Arc<dyn crate::calendar::write::CalendarTarget>>,
}

/// An outside provider and what its discovery came to (`Err`: not yet, or why not).
struct Provider {
    inner: Arc<dyn ToolProvider>,
    budget_chars: usize,
    found: Mutex<Result<external::Discovered, String>>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolbox").field("tools", &self.entries.keys()).finish_non_exhaustive()
    }
}

/// Why the mail write tools cannot run without a sender.
const NO_SENDER: &str = "no outgoing mail is configured ([mail.smtp] and [mail.identity] in \
                         config.toml)";

/// Why `calendar.invite` cannot run.
const NO_INVITES: &str = "invitations need outgoing mail ([mail.smtp] and [mail.identity] in \
                          config.toml) and a writable calendar source ([[calendar.sources]])";

impl Toolbox {
    /// The core's tools over `steward`: mail reads, watches, the journal and usage. The mail
    /// write tools need [`Toolbox::with_mail_sender`].
    pub fn new(steward: Arc<Steward>) -> Self {
        let mut toolbox = Self {
            steward,
            entries: BTreeMap::new(),
            reasons: BTreeMap::new(),
            providers: BTreeMap::new(),
            client_wait: std::time::Duration::ZERO,
            waiting: std::sync::atomic::AtomicUsize::new(0),
            mail: None,
            calendar_targets: Vec::new(),
        };
        for (name, executor) in mail::readers()
            .into_iter()
            .chain(calendar::tools())
            .chain(contacts::tools())
            .chain(files::tools())
            .chain(memory::tools())
            .chain(shell::tools())
            .chain(system::tools())
        {
            toolbox.insert(name, executor);
        }
        for name in mail::WRITERS {
            toolbox.reasons.insert(name.to_owned(), NO_SENDER.to_owned());
        }
        toolbox.reasons.insert("calendar.invite".to_owned(), NO_INVITES.to_owned());
        toolbox
    }

    /// Adds the mail write tools (`mail.send`, `mail.reply`, `mail.send_later`), sending as
    /// `sender` through `transport`.
    pub fn with_mail_sender(mut self, transport: Arc<dyn MailTransport>, sender: Sender) -> Self {
        for (name, executor) in mail::writers(Arc::clone(&transport), sender.clone()) {
            self.insert(name, executor);
        }
        self.mail = Some((transport, sender));
        self.calendar_writes();
        self
    }

    /// Adds `calendar.create_event` and `calendar.delete_event`, writing through `targets`
    /// (the writable calendar sources) and the journal.
    #[must_use]
    pub fn with_calendar_targets(
        mut self,
        targets: Vec<Arc<dyn crate::calendar::write::CalendarTarget>>,
    ) -> Self {
        self.calendar_targets = targets;
        self.calendar_writes();
        self
    }

    /// The calendar write tools over the writable sources, with outgoing mail when there is
    /// some (in either order of the two `with_…` calls).
    fn calendar_writes(&mut self) {
        if self.calendar_targets.is_empty() {
            return;
        }
        for (name, executor) in calendar::writers(self.calendar_targets.clone(), self.mail.clone())
        {
            self.insert(name, executor);
        }
    }

    fn insert(&mut self, name: &str, executor: Arc<dyn ToolExecutor>) {
        if let Err(e) = self.register(name, executor) {
            // The built-in catalog and executors are written together; a mismatch is a bug
            // that the toolbox test catches. Record it rather than panic.
            self.reasons.insert(name.to_owned(), e.to_string());
        }
    }

    /// Adds `executor` for the tool `name`, whose spec must be in the handle's registry (the
    /// policy decides over the spec, so a tool without one cannot run).
    pub fn register(
        &mut self,
        name: &str,
        executor: Arc<dyn ToolExecutor>,
    ) -> Result<(), ToolError> {
        if self.steward.tools().get(name).is_none() {
            return Err(ToolError::Registration(format!(
                "{name} has no spec in the handle's registry (add it with StewardBuilder::tool)"
            )));
        }
        if self.entries.contains_key(name) {
            return Err(ToolError::Registration(format!("{name} already has an executor")));
        }
        self.reasons.remove(name);
        self.steward.register_preflight(name, Arc::clone(&executor));
        self.entries.insert(
            name.to_owned(),
            Entry { executor, budget_chars: DEFAULT_RESULT_CHARS, claim_once: false },
        );
        Ok(())
    }

    /// How long an outside client's gated call waits for the person's decision before it
    /// answers "pending" (`[mcp] wait_secs`, 0..=[`MAX_CLIENT_WAIT_SECS`] s; 0, the default:
    /// it answers at once). See [`Toolbox::call_for_client_waiting`].
    pub fn set_client_wait(&mut self, secs: u64) -> Result<(), ToolError> {
        if secs > MAX_CLIENT_WAIT_SECS {
            return Err(ToolError::Registration(format!(
                "[mcp] wait_secs: {secs} is out of range (0..={MAX_CLIENT_WAIT_SECS})"
            )));
        }
        self.client_wait = std::time::Duration::from_secs(secs);
        Ok(())
    }

    /// Adds an outside provider named `name` ([`valid_provider_name`]) whose tools, named
    /// `mcp.<name>.<tool>`, return at most `budget_chars` characters of text each. Nothing
    /// starts here: the provider is discovered on first use (a listing or a call), and again
    /// on the next use while discovery fails.
    pub fn add_provider(
        &mut self,
        name: &str,
        provider: Arc<dyn ToolProvider>,
        budget_chars: usize,
    ) -> Result<(), ToolError> {
        if !valid_provider_name(name) {
            return Err(ToolError::Registration(format!(
                "{name:?} cannot name a tool provider (1..={MAX_PROVIDER_NAME_CHARS} of a-z, \
                 0-9 and _)"
            )));
        }
        if self.providers.contains_key(name) {
            return Err(ToolError::Registration(format!("the provider {name} is added twice")));
        }
        if !(MIN_RESULT_CHARS..=MAX_RESULT_CHARS).contains(&budget_chars) {
            return Err(ToolError::Registration(format!(
                "result budget of {name}: {budget_chars} is out of range \
                 ({MIN_RESULT_CHARS}..={MAX_RESULT_CHARS})"
            )));
        }
        let found = Mutex::new(Err("not started yet (starts on first use)".to_owned()));
        self.providers.insert(name.to_owned(), Provider { inner: provider, budget_chars, found });
        Ok(())
    }

    /// The tools of the provider `name`, discovering them when that has not worked yet.
    fn discovered(&self, name: &str, p: &Provider) -> Result<external::Discovered, String> {
        let mut found = p.found.lock().unwrap_or_else(PoisonError::into_inner);
        if let Ok(map) = &*found {
            return Ok(map.clone());
        }
        let prefix = format!("{}{name}.", crate::policy::EXTERNAL_NAMESPACE);
        let discovered = p.inner.discover().map(|tools| {
            let mut map = BTreeMap::new();
            for (spec, executor) in tools {
                if !spec.name.starts_with(&prefix) || map.contains_key(&spec.name) {
                    tracing::warn!(tool = %spec.name, "a provider's tool is outside its name");
                    continue;
                }
                let tool = spec.name.clone();
                if let Err(e) = self.steward.tools().register_external(spec) {
                    tracing::warn!(tool = %tool, error = %e, "an outside tool is not kept");
                    continue;
                }
                self.steward.register_preflight(&tool, Arc::clone(&executor));
                let entry = Entry { executor, budget_chars: p.budget_chars, claim_once: true };
                map.insert(tool, entry);
            }
            map
        });
        *found = discovered;
        found.clone()
    }

    /// Marks a registered tool as unable to run here, with the reason the inventory shows.
    pub fn mark_unavailable(&mut self, name: &str, reason: &str) {
        if !self.entries.contains_key(name) {
            self.reasons.insert(name.to_owned(), reason.to_owned());
        }
    }

    /// Sets the result budget of `name` ([`MIN_RESULT_CHARS`]..=[`MAX_RESULT_CHARS`]).
    pub fn set_budget(&mut self, name: &str, chars: usize) -> Result<(), ToolError> {
        if !(MIN_RESULT_CHARS..=MAX_RESULT_CHARS).contains(&chars) {
            return Err(ToolError::Registration(format!(
                "result budget of {name}: {chars} is out of range \
                 ({MIN_RESULT_CHARS}..={MAX_RESULT_CHARS})"
            )));
        }
        let entry = self
            .entries
            .get_mut(name)
            .ok_or_else(|| ToolError::Unknown { tool: name.to_owned() })?;
        entry.budget_chars = chars;
        Ok(())
    }

    /// The handle.
    pub fn steward(&self) -> &Arc<Steward> {
        &self.steward
    }

    /// The tools that run here, by name (the outside providers' too, started if need be).
    pub fn list(&self) -> Vec<ToolInfo> {
        self.infos(true)
    }

    /// The tools that run here, with or without the outside providers'.
    fn infos(&self, provided: bool) -> Vec<ToolInfo> {
        let provided: Vec<(String, Entry)> = if provided {
            self.providers
                .iter()
                .filter_map(|(name, p)| self.discovered(name, p).ok())
                .flatten()
                .collect()
        } else {
            Vec::new()
        };
        self.entries
            .iter()
            .chain(provided.iter().map(|(name, e)| (name, e)))
            .filter_map(|(name, e)| {
                let spec = self.steward.tools().get(name)?;
                Some(ToolInfo {
                    name: spec.name.clone(),
                    description: spec.description.clone(),
                    input_schema: spec.input_schema.clone(),
                    effect: spec.effect,
                    default_level: spec.default_level,
                    result_chars: e.budget_chars,
                })
            })
            .collect()
    }

    /// Every tool the policy knows, available here or not (with why not).
    pub fn inventory(&self) -> ToolInventory {
        let unavailable = self
            .steward
            .tools()
            .iter()
            .filter(|s| !self.entries.contains_key(&s.name))
            .map(|s| UnavailableTool {
                name: s.name.clone(),
                reason: self.reasons.get(&s.name).cloned().unwrap_or_else(|| {
                    "no executor yet (the issue that brings this source adds it)".to_owned()
                }),
            })
            .collect();
        let mut unavailable: Vec<UnavailableTool> = unavailable;
        let available = self.list();
        unavailable.retain(|u| !available.iter().any(|a| a.name == u.name));
        for (name, p) in &self.providers {
            if let Err(reason) = &*p.found.lock().unwrap_or_else(PoisonError::into_inner) {
                unavailable.push(UnavailableTool {
                    name: format!("{}{name}.*", crate::policy::EXTERNAL_NAMESPACE),
                    reason: reason.clone(),
                });
            }
        }
        ToolInventory { available, unavailable }
    }

    /// The tools as a model is offered them.
    pub fn definitions(&self) -> Vec<crate::llm::ToolDef> {
        self.list()
            .into_iter()
            .map(|t| crate::llm::ToolDef {
                name: t.name,
                description: t.description,
                parameters: t.input_schema,
            })
            .collect()
    }

    fn entry(&self, tool: &str) -> Result<Entry, ToolError> {
        if let Some(e) = self.entries.get(tool) {
            return Ok(e.clone());
        }
        let unknown = || ToolError::Unknown { tool: tool.to_owned() };
        let (name, p) = tool
            .strip_prefix(crate::policy::EXTERNAL_NAMESPACE)
            .and_then(|rest| rest.split_once('.'))
            .and_then(|(name, _)| self.providers.get_key_value(name))
            .ok_or_else(unknown)?;
        match self.discovered(name, p) {
            Ok(map) => map.get(tool).cloned().ok_or_else(unknown),
            Err(reason) => Err(ToolError::Failed {
                tool: tool.to_owned(),
                code: "TOOL_PROVIDER_UNAVAILABLE",
                kind: ErrorKind::Unavailable,
                message: reason,
            }),
        }
    }

    /// Checks and normalizes `input` for `tool` (what the policy and a card see).
    pub fn preflight(&self, tool: &str, input: &Value) -> Result<Value, ToolError> {
        let entry = self.entry(tool)?;
        entry
            .executor
            .preflight(&self.steward, input)
            .map_err(|reason| ToolError::InvalidInput { tool: tool.to_owned(), reason })
    }

    /// Calls a tool in the permission order (see the module documentation): nothing runs
    /// unless the policy allows it now; a gated call leaves an approval request.
    pub fn call(
        &self,
        call: &ToolCall<'_>,
        ctx: &DecisionContext<'_>,
    ) -> Result<ToolOutcome, ToolError> {
        self.call_tainted(call, ctx, None)
    }

    /// [`Toolbox::call`] for a call whose input carries values copied from untrusted content:
    /// unless the tool only reads, the decision is raised to the policy's taint floor
    /// ([`crate::policy::Policy::taint_floor`]; audited as `policy.taint_raised`), and an
    /// approval card names each tainted field and its source.
    pub fn call_tainted(
        &self,
        call: &ToolCall<'_>,
        ctx: &DecisionContext<'_>,
        taint: Option<&Taint>,
    ) -> Result<ToolOutcome, ToolError> {
        let entry = self.entry(call.tool)?;
        let input = self.preflight(call.tool, call.input)?;
        let decided = ToolCall { input: &input, ..*call };
        let now = now_secs();
        let taint = taint.filter(|t| !t.fields.is_empty());
        let mut decision = self.steward.decide(&decided, ctx)?;
        let reads = self.steward.tools().get(call.tool).is_some_and(|s| s.effect == Effect::Read);
        if let Some(t) = taint
            && !reads
        {
            let floor = self.steward.policy()?.policy.taint_floor();
            let raised = match &decision {
                Decision::Allow { level } if *level < floor => Some(if floor <= Level::Logged {
                    Decision::Allow { level: floor }
                } else {
                    Decision::Gate { level: floor }
                }),
                Decision::Gate { level } if *level < floor => Some(Decision::Gate { level: floor }),
                _ => None,
            };
            if let Some(raised) = raised {
                self.audit_raise(&decided, &decision, &raised, t, now);
                decision = raised;
            }
        }
        match decision {
            Decision::Deny { reason } => Ok(ToolOutcome::Denied { reason }),
            Decision::Allow { level } => {
                let result = self.execute(&entry, &decided, None, now)?;
                Ok(ToolOutcome::Ran { level, result: Box::new(result) })
            }
            Decision::Gate { level } => {
                let executor = Arc::clone(&entry.executor);
                let steward = Arc::clone(&self.steward);
                let check = move |v: &Value| executor.preflight(&steward, v);
                let approval = self.steward.approvals()?.request(
                    &NewApproval {
                        chat: call.chat.map(str::to_owned),
                        requested_by: call.actor.to_owned(),
                        tool: call.tool.to_owned(),
                        input: input.clone(),
                        summary: entry.executor.summary(&self.steward, &input),
                        level,
                        timeout_secs: None,
                        taint: taint.cloned(),
                    },
                    Some(&check),
                    now,
                )?;
                Ok(ToolOutcome::AwaitingApproval { approval: Box::new(approval) })
            }
        }
    }

    /// Runs the request a person approved: exactly its effective input (checked by hash),
    /// by the tool it names. A request that is not approved runs nothing. Executors of
    /// writes journal under the approval, so running the same approval again never repeats
    /// the write.
    pub fn run_approved(&self, approval_id: i64, actor: &str) -> Result<ToolResult, ToolError> {
        let approved = self.steward.approvals()?.authorize_approved(approval_id)?;
        let entry = self.entry(approved.tool())?;
        if entry.claim_once && !self.steward.approvals()?.consume(approval_id, now_secs())? {
            return Err(ToolError::Failed {
                tool: approved.tool().to_owned(),
                code: "APPROVAL_ALREADY_RUN",
                kind: ErrorKind::Conflict,
                message: format!(
                    "approval #{approval_id} already ran: an outside tool runs once per approval"
                ),
            });
        }
        let call = ToolCall {
            actor,
            chat: approved.chat(),
            tool: approved.tool(),
            input: approved.input(),
        };
        self.execute(&entry, &call, Some(&approved), now_secs())
    }

    fn execute(
        &self,
        entry: &Entry,
        call: &ToolCall<'_>,
        approved: Option<&ApprovedInput>,
        now: i64,
    ) -> Result<ToolResult, ToolError> {
        let run = ToolRun {
            steward: &self.steward,
            tool: call.tool,
            actor: call.actor,
            chat: call.chat,
            budget_chars: entry.budget_chars,
            approved,
            now,
        };
        let out = entry.executor.run(&run, call.input);
        self.audit(call, approved, &out, now);
        let out = out.map_err(|e| ToolError::Failed {
            tool: call.tool.to_owned(),
            code: e.code,
            kind: e.kind,
            message: e.message,
        })?;
        Ok(bound(call.tool, out, entry.budget_chars))
    }

    fn audit_raise(
        &self,
        call: &ToolCall<'_>,
        from: &Decision,
        to: &Decision,
        taint: &Taint,
        now: i64,
    ) {
        let Ok(audit) = self.steward.audit() else { return };
        let payload = json!({ "from": from, "to": to, "taint": taint });
        audit.record(&AuditEvent {
            actor: call.actor,
            event_type: "policy.taint_raised",
            risk: Risk::High,
            chat: call.chat,
            tool: Some(call.tool),
            correlation_id: None,
            payload: &payload,
            at: now,
        });
    }

    fn audit(
        &self,
        call: &ToolCall<'_>,
        approved: Option<&ApprovedInput>,
        out: &Result<ToolOutput, ExecError>,
        now: i64,
    ) {
        let Ok(audit) = self.steward.audit() else { return };
        let payload = match out {
            Ok(o) => json!({
                "ok": true,
                "approval_id": approved.map(ApprovedInput::approval_id),
                "sources": o.sources.len(),
                "chars": o.text.chars().count(),
            }),
            Err(e) => json!({
                "ok": false,
                "approval_id": approved.map(ApprovedInput::approval_id),
                "code": e.code,
            }),
        };
        let effect = self.steward.tools().get(call.tool).map(|s| s.effect);
        audit.record(&AuditEvent {
            actor: call.actor,
            event_type: "tool.executed",
            risk: if matches!(effect, Some(Effect::Read)) { Risk::Low } else { Risk::Medium },
            chat: call.chat,
            tool: Some(call.tool),
            correlation_id: approved.map(|a| format!("approval:{}", a.approval_id())).as_deref(),
            payload: &payload,
            at: now,
        });
    }
}

/// Bounds an executor's output: text to `budget` characters (cut at a character, marked),
/// data to [`MAX_RESULT_DATA_BYTES`], sources to [`MAX_RESULT_SOURCES`].
fn bound(tool: &str, out: ToolOutput, budget: usize) -> ToolResult {
    let ToolOutput { mut text, mut data, mut sources, cursor, approval } = out;
    let mut truncated = false;
    if let Some((cut, _)) = text.char_indices().nth(budget) {
        const MARK: &str = "\n[… cut at the result budget]";
        let keep = budget.saturating_sub(MARK.chars().count());
        let at = text.char_indices().nth(keep).map_or(cut, |(i, _)| i);
        text.truncate(at);
        text.push_str(MARK);
        truncated = true;
    }
    if serde_json::to_vec(&data).map_or(true, |b| b.len() > MAX_RESULT_DATA_BYTES) {
        data = json!({ "omitted": format!("larger than {MAX_RESULT_DATA_BYTES} bytes") });
    }
    sources.truncate(MAX_RESULT_SOURCES);
    let untrusted = sources.iter().any(SourceRef::untrusted);
    ToolResult {
        tool: tool.to_owned(),
        text,
        data,
        sources,
        untrusted,
        cursor,
        truncated,
        approval,
    }
}

/// Lines that fit `budget` characters (each line plus a newline; the first always fits, cut
/// later if it must): how many of `lines` to keep.
pub(crate) fn fitting(lines: &[String], header: usize, budget: usize) -> usize {
    let mut used = header;
    for (i, l) in lines.iter().enumerate() {
        used += l.chars().count() + 1;
        if used > budget && i > 0 {
            return i;
        }
    }
    lines.len()
}

/// A cursor (a position in a list or text) from a tool's input.
pub(crate) fn cursor(c: Option<&str>) -> Result<usize, ExecError> {
    match c {
        None => Ok(0),
        Some(s) => s
            .trim()
            .parse::<usize>()
            .map_err(|_| ExecError::invalid(format!("cursor {s:?} is not one this tool returned"))),
    }
}

#[cfg(test)]
mod tests;
