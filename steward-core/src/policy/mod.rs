//! Deterministic tool policy: the model may suggest; only this code decides what runs.
//!
//! Owns: [`ToolSpec`] (name, description, checked input schema, [`Effect`], default [`Level`],
//! scopes), the [`ToolRegistry`], the person's [`Policy`] (exact rules, deny prefixes, the
//! allow-list of known reads, per-tool level overrides) and [`decide`], a pure, total function
//! from (tool, input, context) to [`Decision`]. Never does: read a prompt, a model output or
//! any message text to decide; run a tool; resolve an approval.
//!
//! The order of [`decide`]:
//! 1. input that is not a JSON object → deny;
//! 2. the person's exact rule for the tool (deny, allow or gate at a level);
//! 3. deny prefixes (whole namespaces: `shell.` denies `shell.run`, never `shellfish.x`);
//! 4. headless (background) turns: only tools the matched rules granted, logged; anything else
//!    is denied;
//! 5. an unknown (unregistered) tool → gate at [`Level::Confirm`], never allow;
//! 6. a registered read on the allow-list → allow, unlogged;
//! 7. the override or the default level, raised to the floors.
//!
//! The `policy.` namespace is reserved: a change to the policy is always at least
//! [`Level::Confirm`] whatever a rule says, and a background turn can never be granted one.
//!
//! Floors: a `Destructive` tool never runs below [`Level::Confirm`], a `Write` never below
//! [`Level::Logged`], whatever a rule or override says. Reads cannot be gated into uselessness
//! by accident: a level override on a `Read` tool is capped at [`Level::Logged`]; only an exact
//! rule (a deliberate act, itself an L2 change) can make a person confirm a read.

pub mod catalog;
mod spec;
mod store;

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, RwLock},
};

use serde::{Deserialize, Serialize};
use serde_json::Value;
pub(crate) use spec::check_name as check_tool_name;
pub use spec::{
    Effect, MAX_EXTERNAL_DESCRIPTION_CHARS, MAX_EXTERNAL_SCHEMA_BYTES, MAX_EXTERNAL_SCHEMA_NESTING,
    MAX_SCHEMA_DEPTH, MAX_TOOL_NAME, ToolSpec,
};
pub use store::{MAX_POLICY_HISTORY, PolicyStore, PolicyVersion};

use crate::{
    error::{ErrorKind, StewardError},
    store::StoreError,
};

/// Tools in this namespace change the policy itself: never below [`Level::Confirm`], never
/// granted to a background turn.
pub const RESERVED_NAMESPACE: &str = "policy.";

/// How much a person is involved before a tool runs.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    Default,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// L0: runs without a trace beyond the tool's own (reads).
    Auto,
    /// L1: runs, and the run is audited.
    Logged,
    /// L2: a person confirms first.
    #[default]
    Confirm,
    /// L3: a person confirms with their PIN.
    Secure,
}

impl Level {
    /// Parses `L0`–`L3` or `auto`, `logged`, `confirm`, `secure` (any case).
    pub fn parse(s: &str) -> Result<Self, PolicyError> {
        match s.to_ascii_lowercase().as_str() {
            "l0" | "auto" => Ok(Self::Auto),
            "l1" | "logged" => Ok(Self::Logged),
            "l2" | "confirm" => Ok(Self::Confirm),
            "l3" | "secure" => Ok(Self::Secure),
            _ => Err(PolicyError::BadLevel(s.to_owned())),
        }
    }

    /// The lowercase name (`auto`, `logged`, `confirm`, `secure`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Logged => "logged",
            Self::Confirm => "confirm",
            Self::Secure => "secure",
        }
    }
}

/// Errors of the policy module.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A tool name that is not `namespace.verb`.
    #[error("tool name {0:?} must be namespace.verb (lowercase letters, digits, _)")]
    BadToolName(String),
    /// A schema the model could not fill correctly.
    #[error("tool {tool}: input schema rejected: {reason}")]
    BadSchema {
        /// The tool.
        tool: String,
        /// What is wrong.
        reason: String,
    },
    /// The tool is already registered.
    #[error("tool {0} is already registered")]
    Duplicate(String),
    /// A level name other than L0–L3 / auto, logged, confirm, secure.
    #[error("unknown level {0:?}: expected L0-L3 or auto, logged, confirm, secure")]
    BadLevel(String),
    /// A deny prefix that is not a namespace (`mail.` or `mail`).
    #[error("deny prefix {0:?} is not a namespace")]
    BadPrefix(String),
    /// An agent denial that is not `<agent pattern>:<tool, namespace.* or *>`.
    #[error("agent denial {0:?} must be agent:<name or prefix*>:<tool, namespace.* or *>")]
    BadAgentRule(String),
    /// Someone else changed the policy since the version the change was based on.
    #[error("the policy is at version {actual}, not {expected}; reload and retry")]
    VersionConflict {
        /// The version the caller expected.
        expected: u64,
        /// The version stored.
        actual: u64,
    },
    /// The change would not change anything.
    #[error("the policy already says that")]
    NoChange,
    /// A page or history length out of range.
    #[error("{what} {value} is out of range (0..={max})")]
    OutOfRange {
        /// What.
        what: &'static str,
        /// The value given.
        value: usize,
        /// The largest accepted.
        max: usize,
    },
    /// The approved proposal was applied already (an approval applies once).
    #[error("approval {0} was already applied to the policy")]
    AlreadyApplied(i64),
    /// A stored policy that no longer parses.
    #[error("stored policy version {version} is unreadable: {reason}")]
    Corrupt {
        /// The version.
        version: u64,
        /// Why.
        reason: String,
    },
    /// Applying an approved change failed its approval check.
    #[error(transparent)]
    Approval(Box<crate::approval::ApprovalError>),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl StewardError for PolicyError {
    fn code(&self) -> &'static str {
        match self {
            Self::BadToolName(_) => "POLICY_BAD_TOOL_NAME",
            Self::BadSchema { .. } => "POLICY_BAD_SCHEMA",
            Self::Duplicate(_) => "POLICY_DUPLICATE_TOOL",
            Self::BadLevel(_) => "POLICY_BAD_LEVEL",
            Self::BadPrefix(_) => "POLICY_BAD_PREFIX",
            Self::BadAgentRule(_) => "POLICY_BAD_AGENT_RULE",
            Self::VersionConflict { .. } => "POLICY_VERSION_CONFLICT",
            Self::NoChange => "POLICY_NO_CHANGE",
            Self::OutOfRange { .. } => "POLICY_OUT_OF_RANGE",
            Self::AlreadyApplied(_) => "POLICY_APPROVAL_ALREADY_APPLIED",
            Self::Corrupt { .. } => "POLICY_CORRUPT",
            Self::Approval(e) => e.code(),
            Self::Store(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Duplicate(_) | Self::VersionConflict { .. } | Self::AlreadyApplied(_) => {
                ErrorKind::Conflict
            }
            Self::Corrupt { .. } => ErrorKind::Corrupt,
            Self::Approval(e) => e.kind(),
            Self::Store(e) => e.kind(),
            Self::BadToolName(_)
            | Self::BadSchema { .. }
            | Self::BadLevel(_)
            | Self::BadPrefix(_)
            | Self::BadAgentRule(_)
            | Self::NoChange
            | Self::OutOfRange { .. } => ErrorKind::InvalidInput,
        }
    }
}

/// Where tools discovered at run time live: an outside MCP server's tool `t` of the server
/// `s` is `mcp.s.t`. No built-in or builder tool may take a name under it.
/// Fixed (not a setting).
pub const EXTERNAL_NAMESPACE: &str = "mcp.";

/// Most tools discovered at run time one handle keeps (over every outside server).
/// Fixed (not a setting).
pub const MAX_EXTERNAL_TOOLS: usize = 1_024;

/// The registered tools: the built-in catalog and the builder's (fixed when the handle
/// opens), and those a toolbox discovered at run time under [`EXTERNAL_NAMESPACE`].
#[derive(Debug, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<ToolSpec>>,
    external: RwLock<BTreeMap<String, Arc<ToolSpec>>>,
}

impl Clone for ToolRegistry {
    fn clone(&self) -> Self {
        Self { tools: self.tools.clone(), external: RwLock::new(self.read_external().clone()) }
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    fn read_external(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<ToolSpec>>> {
        self.external.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers `spec` (its schema was checked when it was built). Names under
    /// [`EXTERNAL_NAMESPACE`] are refused: only discovery puts tools there.
    pub fn register(&mut self, spec: ToolSpec) -> Result<(), PolicyError> {
        if spec.name.starts_with(EXTERNAL_NAMESPACE) {
            return Err(PolicyError::BadToolName(spec.name));
        }
        if self.tools.contains_key(&spec.name) {
            return Err(PolicyError::Duplicate(spec.name));
        }
        self.tools.insert(spec.name.clone(), Arc::new(spec));
        Ok(())
    }

    /// Registers (or replaces, when its server changed it) a tool discovered at run time;
    /// its name must be under [`EXTERNAL_NAMESPACE`], and at most [`MAX_EXTERNAL_TOOLS`] are
    /// kept.
    pub fn register_external(&self, spec: ToolSpec) -> Result<(), PolicyError> {
        if !spec.name.starts_with(EXTERNAL_NAMESPACE) {
            return Err(PolicyError::BadToolName(spec.name));
        }
        let mut map = self.external.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !map.contains_key(&spec.name) && map.len() >= MAX_EXTERNAL_TOOLS {
            return Err(PolicyError::OutOfRange {
                what: "tools discovered from outside servers",
                value: map.len() + 1,
                max: MAX_EXTERNAL_TOOLS,
            });
        }
        map.insert(spec.name.clone(), Arc::new(spec));
        Ok(())
    }

    /// The spec of `name`.
    pub fn get(&self, name: &str) -> Option<Arc<ToolSpec>> {
        self.tools.get(name).cloned().or_else(|| self.read_external().get(name).cloned())
    }

    /// Every spec, by name (built-in and builder tools first, then discovered ones).
    pub fn iter(&self) -> impl Iterator<Item = Arc<ToolSpec>> {
        let external: Vec<Arc<ToolSpec>> = self.read_external().values().cloned().collect();
        self.tools.values().cloned().collect::<Vec<_>>().into_iter().chain(external)
    }
}

/// A person's exact rule for one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "rule", deny_unknown_fields)]
pub enum Rule {
    /// Run without asking (still raised to the tool's floor).
    Allow,
    /// Ask at this level (raised to the floor).
    Gate {
        /// The level.
        level: Level,
    },
    /// Never run.
    Deny {
        /// Why, shown to the agent.
        reason: String,
    },
}

/// The floor of tainted calls when the policy sets none: a person confirms any action whose
/// recipient, link, account, number, amount or path came from mail or an outside service.
pub const DEFAULT_TAINT_FLOOR: Level = Level::Confirm;

/// The person's policy. Changing it is itself an L2 action (the store versions and audits it).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Policy {
    /// The lowest level of a call that is not a read and carries values copied from untrusted
    /// content (see [`crate::approval::Taint`]); absent: [`DEFAULT_TAINT_FLOOR`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taint_floor: Option<Level>,
    /// Exact rules by tool name.
    pub rules: BTreeMap<String, Rule>,
    /// Namespaces denied whole (`shell` or `shell.` denies `shell.run`).
    pub deny_prefixes: BTreeSet<String>,
    /// Reads that run without asking or logging.
    pub allow_reads: BTreeSet<String>,
    /// Per-tool levels replacing the default (raised to floors; reads capped at L1).
    pub overrides: BTreeMap<String, Level>,
    /// Denials for some agents only, `<agent>:<tool>`: `agent:mcp:*:mail.send` denies
    /// `mail.send` to every MCP client, `agent:mcp:cursor:mail.*` the mail namespace to one. A
    /// part ending in `*` matches a prefix. At most [`MAX_AGENT_DENIES`].
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub agent_denies: BTreeSet<String>,
}

/// Most agent denials one policy holds.
/// Fixed (not a setting).
pub const MAX_AGENT_DENIES: usize = 100;

/// `rule` (`<agent pattern>:<tool pattern>`) split at its last `:`, checked: the agent part
/// names agents (`agent:…`), the tool part is a tool, a namespace (`mail.*`) or `*`.
fn agent_rule(rule: &str) -> Result<(&str, &str), PolicyError> {
    let bad = || PolicyError::BadAgentRule(rule.to_owned());
    let (agent, tool) = rule.rsplit_once(':').ok_or_else(bad)?;
    if !agent.starts_with("agent:") || agent.len() > 200 || agent[..agent.len() - 1].contains('*') {
        return Err(bad());
    }
    match tool.strip_suffix('*') {
        Some("") => {}
        Some(ns) if ns.ends_with('.') => {
            spec::check_name(&format!("{ns}x")).map_err(|_| bad())?;
        }
        Some(_) => return Err(bad()),
        None => spec::check_name(tool).map_err(|_| bad())?,
    }
    Ok((agent, tool))
}

/// Whether `pattern` (ending in `*` for a prefix) matches `value`.
fn glob(pattern: &str, value: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => value.starts_with(prefix),
        None => pattern == value,
    }
}

/// The agent denial of `policy` that matches `actor` calling `tool`, if one does.
fn agent_denial<'p>(policy: &'p Policy, actor: &str, tool: &str) -> Option<&'p String> {
    policy.agent_denies.iter().find(|r| {
        agent_rule(r).is_ok_and(|(agent, pattern)| glob(agent, actor) && glob(pattern, tool))
    })
}

impl Policy {
    /// The floor of tainted calls in force.
    pub fn taint_floor(&self) -> Level {
        self.taint_floor.unwrap_or(DEFAULT_TAINT_FLOOR)
    }

    /// Adds a namespace to deny; the prefix is normalized to end with `.`.
    pub fn deny_namespace(&mut self, prefix: &str) -> Result<(), PolicyError> {
        let ns = prefix.trim_end_matches('.');
        spec::check_name(&format!("{ns}.x"))
            .map_err(|_| PolicyError::BadPrefix(prefix.to_owned()))?;
        self.deny_prefixes.insert(format!("{ns}."));
        Ok(())
    }

    /// Applies `change`, checking every name. Fails with [`PolicyError::NoChange`] when the
    /// policy would stay the same, so the history only holds real changes.
    pub fn apply(&mut self, change: &PolicyChange) -> Result<(), PolicyError> {
        let before = self.clone();
        match change {
            PolicyChange::SetLevel { tool, level } => {
                spec::check_name(tool)?;
                self.overrides.insert(tool.clone(), *level);
            }
            PolicyChange::ClearLevel { tool } => {
                self.overrides.remove(tool);
            }
            PolicyChange::SetRule { tool, rule } => {
                spec::check_name(tool)?;
                self.rules.insert(tool.clone(), rule.clone());
            }
            PolicyChange::ClearRule { tool } => {
                self.rules.remove(tool);
            }
            PolicyChange::DenyNamespace { prefix } => self.deny_namespace(prefix)?,
            PolicyChange::UndenyNamespace { prefix } => {
                self.deny_prefixes.remove(&format!("{}.", prefix.trim_end_matches('.')));
            }
            PolicyChange::AllowRead { tool } => {
                spec::check_name(tool)?;
                self.allow_reads.insert(tool.clone());
            }
            PolicyChange::DisallowRead { tool } => {
                self.allow_reads.remove(tool);
            }
            PolicyChange::SetTaintFloor { level } => {
                self.taint_floor = Some(*level);
            }
            PolicyChange::DenyAgent { rule } => {
                agent_rule(rule)?;
                if self.agent_denies.len() >= MAX_AGENT_DENIES && !self.agent_denies.contains(rule)
                {
                    return Err(PolicyError::BadAgentRule(format!(
                        "{rule}: at most {MAX_AGENT_DENIES} agent denials"
                    )));
                }
                self.agent_denies.insert(rule.clone());
            }
            PolicyChange::UndenyAgent { rule } => {
                self.agent_denies.remove(rule);
            }
        }
        if *self == before { Err(PolicyError::NoChange) } else { Ok(()) }
    }
}

impl PolicyChange {
    /// The change a person means by `tool` + one word: a level (`L0`–`L3`, `auto`, `logged`,
    /// `confirm`, `secure`), `allow`, `deny` (with `reason`, or a default one) or `default`
    /// (back to the tool's own level).
    pub fn setting(tool: &str, word: &str, reason: Option<&str>) -> Result<Self, PolicyError> {
        let tool = tool.to_owned();
        Ok(match word.to_ascii_lowercase().as_str() {
            "allow" => Self::SetRule { tool, rule: Rule::Allow },
            "deny" => Self::SetRule {
                tool,
                rule: Rule::Deny { reason: reason.unwrap_or("denied by policy").to_owned() },
            },
            "default" => Self::ClearLevel { tool },
            other => Self::SetLevel { tool, level: Level::parse(other)? },
        })
    }
}

/// One change to the [`Policy`] — the input of the `policy.set` tool and of
/// [`crate::Steward::set_policy`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "change", deny_unknown_fields)]
pub enum PolicyChange {
    /// Run a tool at this level (raised to its floor; a read is capped at logged).
    SetLevel {
        /// The tool, `namespace.verb`.
        tool: String,
        /// The level.
        level: Level,
    },
    /// Return a tool to its default level.
    ClearLevel {
        /// The tool, `namespace.verb`.
        tool: String,
    },
    /// Set the person's exact rule for a tool.
    SetRule {
        /// The tool, `namespace.verb`.
        tool: String,
        /// Allow, gate at a level, or deny with a reason.
        rule: Rule,
    },
    /// Remove the exact rule for a tool.
    ClearRule {
        /// The tool, `namespace.verb`.
        tool: String,
    },
    /// Deny a whole namespace (`shell` denies `shell.run`).
    DenyNamespace {
        /// The namespace.
        prefix: String,
    },
    /// Stop denying a namespace.
    UndenyNamespace {
        /// The namespace.
        prefix: String,
    },
    /// Let a read run without asking or logging.
    AllowRead {
        /// The tool, `namespace.verb`.
        tool: String,
    },
    /// Remove a read from the allow-list.
    DisallowRead {
        /// The tool, `namespace.verb`.
        tool: String,
    },
    /// Set the lowest level of a non-read call carrying values copied from untrusted
    /// content (confirm or secure keep a person in the loop).
    SetTaintFloor {
        /// The level.
        level: Level,
    },
    /// Deny a tool (or a namespace, `mail.*`, or every tool, `*`) to some agents only:
    /// `agent:mcp:*:mail.send`.
    DenyAgent {
        /// `<agent pattern>:<tool pattern>`.
        rule: String,
    },
    /// Remove an agent denial.
    UndenyAgent {
        /// The rule as it was added.
        rule: String,
    },
}

/// Who is asking, and under what authority.
#[derive(Debug, Clone, Copy, Default)]
pub struct DecisionContext<'a> {
    /// `Some` in a background (watch) turn: only these tools may run, and only logged.
    pub headless_grants: Option<&'a BTreeSet<String>>,
    /// The agent asking (its agent denials apply); [`crate::Steward::decide`] sets it from
    /// the call.
    pub actor: Option<&'a str>,
}

/// Why a call is denied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "why")]
pub enum DenyReason {
    /// The person's exact rule.
    Rule {
        /// The rule's reason.
        reason: String,
    },
    /// A denied namespace.
    Namespace {
        /// The prefix that matched.
        prefix: String,
    },
    /// A background turn asked for a tool its rule did not grant.
    NotGranted,
    /// An agent denial matched the agent asking.
    Agent {
        /// The rule.
        rule: String,
    },
    /// The input is not a JSON object.
    InputNotObject,
    /// The input is larger than an approval card may hold ([`crate::approval::MAX_INPUT_BYTES`]).
    InputTooLarge {
        /// Its size in bytes of canonical JSON.
        bytes: usize,
    },
}

/// What [`decide`] says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "decision")]
pub enum Decision {
    /// Run now, at `Auto` (unlogged) or `Logged`.
    Allow {
        /// The level it runs at.
        level: Level,
    },
    /// Ask a person first, at `Confirm` or `Secure`.
    Gate {
        /// The level of the approval.
        level: Level,
    },
    /// Do not run; tell the agent why.
    Deny {
        /// Why.
        reason: DenyReason,
    },
}

/// The lowest level `effect` may run at.
fn floor(effect: Effect) -> Level {
    match effect {
        Effect::Read => Level::Auto,
        Effect::Write { .. } => Level::Logged,
        Effect::Destructive => Level::Confirm,
    }
}

fn at(level: Level) -> Decision {
    if level <= Level::Logged { Decision::Allow { level } } else { Decision::Gate { level } }
}

/// Decides whether `tool` may run with `input`. Pure and total: the same arguments always give
/// the same decision, and every argument gives one.
pub fn decide(
    registry: &ToolRegistry,
    policy: &Policy,
    tool: &str,
    input: &Value,
    ctx: &DecisionContext<'_>,
) -> Decision {
    if !input.is_object() {
        return Decision::Deny { reason: DenyReason::InputNotObject };
    }
    let spec = registry.get(tool);
    // An unknown tool has no proven effect: treat it as destructive.
    let effect = spec.as_ref().map_or(Effect::Destructive, |s| s.effect);
    let rule = policy.rules.get(tool);
    if let Some(Rule::Deny { reason }) = rule {
        return Decision::Deny { reason: DenyReason::Rule { reason: reason.clone() } };
    }
    if let Some(prefix) = policy.deny_prefixes.iter().find(|p| tool.starts_with(p.as_str())) {
        return Decision::Deny { reason: DenyReason::Namespace { prefix: prefix.clone() } };
    }
    if let Some(rule) = ctx.actor.and_then(|actor| agent_denial(policy, actor, tool)) {
        return Decision::Deny { reason: DenyReason::Agent { rule: rule.clone() } };
    }
    let reserved = tool.starts_with(RESERVED_NAMESPACE);
    if let Some(grants) = ctx.headless_grants {
        // No person is there to ask: a grant is the pre-approval, and nothing else runs.
        return if spec.is_some() && !reserved && grants.contains(tool) {
            Decision::Allow { level: Level::Logged }
        } else {
            Decision::Deny { reason: DenyReason::NotGranted }
        };
    }
    // A change to the policy is itself a confirmed action, whatever a rule says.
    let floor = |effect| if reserved { Level::Confirm } else { floor(effect) };
    match rule {
        Some(Rule::Allow) => return at(floor(effect)),
        Some(Rule::Gate { level }) => return at((*level).max(floor(effect))),
        Some(Rule::Deny { .. }) | None => {}
    }
    let Some(spec) = spec else { return Decision::Gate { level: Level::Confirm } };
    if spec.effect == Effect::Read && !reserved && policy.allow_reads.contains(tool) {
        return Decision::Allow { level: Level::Auto };
    }
    let mut level = policy.overrides.get(tool).copied().unwrap_or(spec.default_level);
    if spec.effect == Effect::Read && !reserved && policy.overrides.contains_key(tool) {
        level = level.min(Level::Logged);
    }
    at(level.max(floor(spec.effect)))
}

#[cfg(test)]
mod tests;
