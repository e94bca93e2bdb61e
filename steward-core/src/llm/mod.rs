//! Chat models behind capability tiers: callers ask for a capability (`tier-1`, the weakest,
//! local rung … `tier-6`, the strongest; `local-embed`), never a vendor; configuration maps each
//! tier to an ordered list of provider targets (base URL, key, model) speaking the OpenAI
//! chat-completions wire format. Configurations written for the old numbering (`tier-1` the
//! strongest) are read renumbered, with a warning ([`TIER_NUMBERING_DESIGN`]).
//!
//! Owns: the tier → targets mapping, sequential fallback (a failed target gives way to the next
//! compatible one; repeated aliases of one target are tried once), the shared deadline across
//! attempts, SSE streaming (retried only before the first byte reaches the caller — never a
//! provider switch mid-output; a target that will not stream has its whole answer re-emitted
//! as deltas), OpenAI tool calls (streamed and not), and the usage ledger ([`UsageLedger`],
//! `usage.db`): one terminal row per request, attempts separately (with their stream mode and
//! time to headers). Never
//! does: decide what a tool call may do (the policy and approvals do), or keep a conversation.

mod client;
mod usage;

use std::{collections::BTreeMap, path::Path, time::Duration};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use client::{LlmClient, StreamDelta};
pub use usage::{
    AgentUsage, AttemptRecord, AttemptRow, ClientCallRecord, MAX_USAGE_GROUPS, RequestRecord,
    STREAM_NATIVE, STREAM_NONE, STREAM_SYNTHETIC, SharedLedger, UNKNOWN, UsageError, UsageGroup,
    UsageLedger, UsageReport, since,
};

use crate::{ErrorKind, StewardError, embed::CONFIG_FILE};

/// The shared deadline of one request across its attempts, by default.
/// Default of `[llm] deadline_secs`.
pub const DEFAULT_DEADLINE_SECS: u64 = 120;
/// The longest deadline accepted.
/// The upper end of `[llm] deadline_secs`.
pub const MAX_DEADLINE_SECS: u64 = 900;
/// Targets one tier may list.
/// Fixed (not a setting).
pub const MAX_TARGETS_PER_TIER: usize = 8;
/// Messages one request may carry.
/// Fixed (not a setting).
pub const MAX_MESSAGES: usize = 512;
/// Tools one request may offer.
/// Fixed (not a setting).
pub const MAX_TOOLS: usize = 128;
/// The largest answer read (non-streaming), and the most text a stream may deliver.
/// Fixed (not a setting).
pub const MAX_ANSWER_BYTES: u64 = 16 * 1024 * 1024;
/// The longest SSE line accepted.
/// Fixed (not a setting).
pub const MAX_SSE_LINE_BYTES: usize = 1024 * 1024;
/// The longest tool name one streamed tool call may assemble from its fragments (bytes; a
/// registered tool name is at most [`crate::policy::MAX_TOOL_NAME`]).
/// Fixed (not a setting).
pub const MAX_TOOL_CALL_NAME_BYTES: usize = 256;
/// The longest arguments one streamed tool call may assemble from its fragments (bytes; four
/// times the largest input an approval holds, [`crate::approval::MAX_INPUT_BYTES`]).
/// Fixed (not a setting).
pub const MAX_TOOL_CALL_ARGUMENTS_BYTES: usize = 1024 * 1024;

/// What a caller asks for. The tiers are numbered as in the design, and ordered the same way:
/// `tier-1` is the weakest (local) rung, `tier-6` the strongest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Capability {
    /// The weakest rung: the smallest (local) model.
    #[serde(rename = "tier-1")]
    Tier1,
    /// Cheap.
    #[serde(rename = "tier-2")]
    Tier2,
    /// Fast.
    #[serde(rename = "tier-3")]
    Tier3,
    /// General.
    #[serde(rename = "tier-4")]
    Tier4,
    /// Strong (the agent's default in the design).
    #[serde(rename = "tier-5")]
    Tier5,
    /// The strongest reasoning.
    #[serde(rename = "tier-6")]
    Tier6,
    /// A local model for embedding-adjacent work.
    #[serde(rename = "local-embed")]
    LocalEmbed,
}

impl Capability {
    /// Every capability.
    pub const ALL: [Self; 7] = [
        Self::Tier1,
        Self::Tier2,
        Self::Tier3,
        Self::Tier4,
        Self::Tier5,
        Self::Tier6,
        Self::LocalEmbed,
    ];

    /// The configured name (`tier-1`, …, `local-embed`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tier1 => "tier-1",
            Self::Tier2 => "tier-2",
            Self::Tier3 => "tier-3",
            Self::Tier4 => "tier-4",
            Self::Tier5 => "tier-5",
            Self::Tier6 => "tier-6",
            Self::LocalEmbed => "local-embed",
        }
    }

    /// The capability named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The capability a configuration written for the old numbering (`tier-1` the strongest,
    /// `tier-6` the local rung) meant by `self`: `tier-N` becomes `tier-(7-N)`; `local-embed`
    /// stays.
    fn renumbered_from_old(self) -> Self {
        match self {
            Self::Tier1 => Self::Tier6,
            Self::Tier2 => Self::Tier5,
            Self::Tier3 => Self::Tier4,
            Self::Tier4 => Self::Tier3,
            Self::Tier5 => Self::Tier2,
            Self::Tier6 => Self::Tier1,
            Self::LocalEmbed => Self::LocalEmbed,
        }
    }
}

/// `[llm] tier_numbering` of a configuration whose `[llm.tiers]` use the design's numbering
/// (`tier-1` the weakest, local rung … `tier-6` the strongest). Without it, a configuration that
/// maps numbered tiers was written for the old numbering (`tier-1` the strongest): it is read
/// renumbered (`tier-N` → `tier-(7-N)`, so it routes as its author meant) with a warning, and so
/// is one that says [`TIER_NUMBERING_OLD`].
pub const TIER_NUMBERING_DESIGN: &str = "design";
/// `[llm] tier_numbering` of a configuration that keeps the old numbering (read renumbered,
/// with a warning).
pub const TIER_NUMBERING_OLD: &str = "old";

/// One provider endpoint and model.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// Base URL of the OpenAI-compatible API (`https://api.example.com/v1`).
    pub base_url: String,
    /// The model asked for.
    pub model: String,
    /// Bearer key, if wanted (never printed).
    #[serde(default)]
    pub api_key: Option<String>,
    /// Whether it accepts `tools` (a request with tools skips targets without).
    #[serde(default = "yes")]
    pub tools: bool,
}

fn yes() -> bool {
    true
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("tools", &self.tools)
            .finish()
    }
}

/// USD per million tokens of each kind, for one model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rates {
    /// Input (uncached prompt) tokens.
    #[serde(default)]
    pub input: f64,
    /// Output tokens.
    #[serde(default)]
    pub output: f64,
    /// Prompt tokens read from the provider's cache.
    #[serde(default)]
    pub cache_read: f64,
    /// Prompt tokens written to the provider's cache.
    #[serde(default)]
    pub cache_write: f64,
}

/// The chat-model configuration: targets, tiers, rates, deadline.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmConfig {
    /// Named targets.
    pub targets: BTreeMap<String, Target>,
    /// Capability → target names, in fallback order.
    pub tiers: BTreeMap<Capability, Vec<String>>,
    /// Model → rates (a model without rates costs 0 and says so in the ledger).
    pub rates: BTreeMap<String, Rates>,
    /// Shared by the attempts of one request.
    pub deadline: Duration,
}

#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    llm: Option<Section>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Section {
    #[serde(default)]
    deadline_secs: Option<u64>,
    /// [`TIER_NUMBERING_DESIGN`] or [`TIER_NUMBERING_OLD`]; absent means old.
    #[serde(default)]
    tier_numbering: Option<String>,
    #[serde(default)]
    targets: BTreeMap<String, Target>,
    #[serde(default)]
    tiers: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    rates: BTreeMap<String, Rates>,
}

/// A configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("model configuration: {0}")]
pub struct LlmConfigError(pub String);

impl StewardError for LlmConfigError {
    fn code(&self) -> &'static str {
        "LLM_CONFIG_INVALID"
    }

    fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}

/// The target the environment defines (`STEWARD_LLM_BASE_URL` + `STEWARD_LLM_MODEL`).
pub const ENV_TARGET: &str = "env";

/// `[llm.tiers]` in the design's numbering, and the warning to log when the file used the old
/// one (see [`TIER_NUMBERING_DESIGN`]).
/// Each capability's targets, in order.
type TierTargets = BTreeMap<Capability, Vec<String>>;

fn read_tiers(
    named: BTreeMap<String, Vec<String>>,
    numbering: Option<&str>,
) -> Result<(TierTargets, Option<String>), LlmConfigError> {
    let old = match numbering.map(str::trim) {
        Some(TIER_NUMBERING_DESIGN) => false,
        None | Some(TIER_NUMBERING_OLD) => true,
        Some(other) => {
            return Err(LlmConfigError(format!(
                "tier_numbering {other:?}: expected {TIER_NUMBERING_DESIGN:?} (tier-1 the \
                 weakest, local rung … tier-6 the strongest) or {TIER_NUMBERING_OLD:?}"
            )));
        }
    };
    let mut tiers = BTreeMap::new();
    let mut renumbered = Vec::new();
    for (name, list) in named {
        let cap = Capability::parse(&name).ok_or_else(|| {
            LlmConfigError(format!(
                "unknown tier {name:?}: expected tier-1 … tier-6 or local-embed"
            ))
        })?;
        let meant = if old { cap.renumbered_from_old() } else { cap };
        if meant != cap {
            renumbered.push(format!("{} → {}", cap.as_str(), meant.as_str()));
        }
        tiers.insert(meant, list);
    }
    let warning = (!renumbered.is_empty()).then(|| {
        format!(
            "[llm.tiers] is in the old numbering (tier-1 the strongest, tier-6 the local rung), \
             read as {}: tiers are now numbered as in the design (tier-1 the weakest, local \
             rung … tier-6 the strongest). Renumber [llm.tiers] that way and add \
             `tier_numbering = \"{TIER_NUMBERING_DESIGN}\"` under [llm] to silence this",
            renumbered.join(", ")
        )
    });
    Ok((tiers, warning))
}

impl LlmConfig {
    /// Reads `<home>/config.toml` (`[llm]`: `deadline_secs`, `tier_numbering = "design"`,
    /// `[llm.targets.NAME]` with `base_url`, `model`, `api_key`, `tools`; `[llm.tiers]`
    /// mapping `tier-1` … `local-embed` to target names in fallback order (without
    /// `tier_numbering = "design"`, numbered tiers are read in the old numbering, renumbered
    /// with a warning: [`TIER_NUMBERING_DESIGN`]); `[llm.rates.MODEL]` with USD per million
    /// `input`, `output`, `cache_read`, `cache_write` tokens), then the environment:
    /// `STEWARD_LLM_BASE_URL`, `STEWARD_LLM_MODEL`, `STEWARD_LLM_API_KEY` define the target
    /// `env`, used by every tier the file does not map. `None` when no target is configured.
    pub fn load(home: &Path) -> Result<Option<Self>, LlmConfigError> {
        Self::load_with(home, &|k| std::env::var(k).ok())
    }

    /// [`LlmConfig::load`] with the environment given as a lookup.
    pub fn load_with(
        home: &Path,
        vars: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, LlmConfigError> {
        let path = home.join(CONFIG_FILE);
        let file: ConfigFile = match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text)
                .map_err(|e| LlmConfigError(format!("{}: {e}", path.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ConfigFile::default(),
            Err(e) => return Err(LlmConfigError(format!("{}: {e}", path.display()))),
        };
        let s = file.llm.unwrap_or_default();
        let env = |k: &str| vars(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let mut targets = s.targets;
        if let Some(base_url) = env("STEWARD_LLM_BASE_URL") {
            let model = env("STEWARD_LLM_MODEL").ok_or_else(|| {
                LlmConfigError("STEWARD_LLM_BASE_URL is set but STEWARD_LLM_MODEL is not".into())
            })?;
            targets.insert(
                ENV_TARGET.to_owned(),
                Target { base_url, model, api_key: env("STEWARD_LLM_API_KEY"), tools: true },
            );
        }
        if targets.is_empty() {
            return Ok(None);
        }
        let (mut tiers, warning) = read_tiers(s.tiers, s.tier_numbering.as_deref())?;
        if let Some(w) = warning {
            tracing::warn!(config = %path.display(), "{w}");
        }
        if targets.contains_key(ENV_TARGET) {
            for cap in Capability::ALL {
                tiers.entry(cap).or_insert_with(|| vec![ENV_TARGET.to_owned()]);
            }
        }
        let deadline = Duration::from_secs(s.deadline_secs.unwrap_or(DEFAULT_DEADLINE_SECS));
        let c = Self { targets, tiers, rates: s.rates, deadline };
        c.validate()?;
        Ok(Some(c))
    }

    /// Refuses what cannot work or is unsafe.
    pub fn validate(&self) -> Result<(), LlmConfigError> {
        let err = |m: String| Err(LlmConfigError(m));
        for (name, t) in &self.targets {
            let probe = crate::embed::EmbedConfig {
                api_key: t.api_key.clone(),
                ..crate::embed::EmbedConfig::new(&t.base_url, &t.model)
            };
            if let Err(e) = probe.validate() {
                return err(format!("target {name}: {}", e.0));
            }
        }
        for (cap, list) in &self.tiers {
            if list.is_empty() || list.len() > MAX_TARGETS_PER_TIER {
                return err(format!("{} lists 1..={MAX_TARGETS_PER_TIER} targets", cap.as_str()));
            }
            if let Some(missing) = list.iter().find(|n| !self.targets.contains_key(*n)) {
                return err(format!("{} names an unknown target {missing:?}", cap.as_str()));
            }
        }
        if self.deadline.is_zero() || self.deadline > Duration::from_secs(MAX_DEADLINE_SECS) {
            return err(format!("deadline_secs: 1 to {MAX_DEADLINE_SECS}"));
        }
        for (model, r) in &self.rates {
            let ok = |x: f64| x.is_finite() && x >= 0.0;
            if !(ok(r.input) && ok(r.output) && ok(r.cache_read) && ok(r.cache_write)) {
                return err(format!("rates for {model}: non-negative numbers"));
            }
        }
        Ok(())
    }

    /// The tier a chat with tools uses when none is chosen: the first of tier-3, tier-4,
    /// tier-2, tier-5, tier-6, tier-1 with a target that accepts tools (a middle rung: able to
    /// call tools, not the most expensive).
    pub fn chat_tier(&self) -> Option<Capability> {
        [
            Capability::Tier3,
            Capability::Tier4,
            Capability::Tier2,
            Capability::Tier5,
            Capability::Tier6,
            Capability::Tier1,
        ]
        .into_iter()
        .find(|c| !self.route(*c, true).is_empty())
    }

    /// The targets to try for `cap`, in order, each distinct endpoint+model+key once (aliases
    /// collapse), keeping only those that accept tools when `with_tools`.
    pub fn route(&self, cap: Capability, with_tools: bool) -> Vec<(String, Target)> {
        let mut out: Vec<(String, Target)> = Vec::new();
        for name in self.tiers.get(&cap).into_iter().flatten() {
            let Some(t) = self.targets.get(name) else { continue };
            let same = |o: &Target| {
                o.base_url.trim_end_matches('/') == t.base_url.trim_end_matches('/')
                    && o.model == t.model
                    && o.api_key == t.api_key
            };
            if (with_tools && !t.tools) || out.iter().any(|(_, o)| same(o)) {
                continue;
            }
            out.push((name.clone(), t.clone()));
        }
        out
    }
}

/// One chat message (OpenAI format): `role` is `system`, `user`, `assistant` or `tool`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks.
    pub role: String,
    /// The text (absent on an assistant message that only calls tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The assistant's tool calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a `tool` message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A message with text.
    pub fn text(role: &str, content: &str) -> Self {
        Self {
            role: role.to_owned(),
            content: Some(content.to_owned()),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its arguments.
    pub parameters: Value,
}

/// A call the model made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for it.
    pub id: String,
    /// The tool.
    pub name: String,
    /// The arguments as the model wrote them (JSON text; parse and check before use).
    pub arguments: String,
}

/// Who a request is for, in the ledger. Missing attribution is recorded as `unknown`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attribution {
    /// The service (`agent`, `watch`, `search`, …).
    pub service: Option<String>,
    /// The action within it (`chat.turn`, `watch.compose`, …).
    pub action: Option<String>,
}

/// A chat request. As JSON (for the bindings: [`ChatRequest::from_json`]): `capability`,
/// `messages`, optional `tools`, `max_tokens`, `temperature` and `attribution`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatRequest {
    /// What it needs.
    pub capability: Capability,
    /// The conversation.
    pub messages: Vec<Message>,
    /// Tools offered.
    #[serde(default)]
    pub tools: Vec<ToolDef>,
    /// Output limit.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// For the ledger.
    #[serde(default)]
    pub attribution: Attribution,
    /// A JSON Schema the answer must follow (sent as an OpenAI-compatible `response_format`
    /// of type `json_schema`; the caller still checks the answer).
    #[serde(default)]
    pub json_schema: Option<(String, Value)>,
}

impl ChatRequest {
    /// A request with these messages and nothing else.
    pub fn new(capability: Capability, messages: Vec<Message>) -> Self {
        Self {
            capability,
            messages,
            tools: Vec::new(),
            max_tokens: None,
            temperature: None,
            attribution: Attribution::default(),
            json_schema: None,
        }
    }

    /// A request from its JSON form; anything malformed or unknown is `LLM_INVALID_REQUEST`
    /// (the bounds on messages and tools are checked when it is sent).
    pub fn from_json(text: &str) -> Result<Self, LlmError> {
        serde_json::from_str(text).map_err(|e| LlmError::Invalid(format!("chat request: {e}")))
    }
}

/// Tokens by type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct TokenUsage {
    /// Prompt tokens not read from a cache.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Prompt tokens read from the provider's cache.
    pub cache_read: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write: u64,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatResponse {
    /// The text.
    pub content: String,
    /// Tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// `stop`, `tool_calls`, `length`, …
    pub finish_reason: Option<String>,
    /// Tokens.
    pub usage: TokenUsage,
    /// The target that answered.
    pub target: String,
    /// Its model.
    pub model: String,
    /// Attempts made (1 when the first target answered).
    pub attempts: usize,
    /// The ledger row, when a ledger is attached.
    pub request_id: Option<i64>,
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// No model is configured for this capability.
    #[error("no model is configured for {0} (see [llm] in config.toml or STEWARD_LLM_BASE_URL)")]
    NotConfigured(&'static str),
    /// The request itself is malformed or over a bound.
    #[error("invalid model request: {0}")]
    Invalid(String),
    /// Every target failed; the last error.
    #[error("every target for {capability} failed ({attempts} attempts); last: {last}")]
    Unavailable {
        /// The capability.
        capability: &'static str,
        /// Attempts made.
        attempts: usize,
        /// The last failure.
        last: String,
    },
    /// The usage ledger could not be opened.
    #[error("usage ledger: {0}")]
    Ledger(String),
    /// The shared deadline ran out.
    #[error("the {0} s deadline ran out")]
    Deadline(u64),
    /// A streamed answer went over a bound ([`MAX_TOOL_CALL_ARGUMENTS_BYTES`],
    /// [`MAX_TOOL_CALL_NAME_BYTES`], [`MAX_ANSWER_BYTES`]): the request ends there, on no
    /// other target.
    #[error("the answer from {target} is too large: {what} exceeds {limit} bytes")]
    TooLarge {
        /// The target.
        target: String,
        /// What went over (`a tool call's arguments`, `a tool call's name`, `the answer`).
        what: &'static str,
        /// The bound, in bytes.
        limit: usize,
    },
    /// A stream broke after output reached the caller: not retried, not switched.
    #[error("the stream from {target} broke after {delivered_chars} characters: {reason}")]
    Interrupted {
        /// The target.
        target: String,
        /// Characters already delivered.
        delivered_chars: usize,
        /// Why.
        reason: String,
    },
}

impl StewardError for LlmError {
    fn code(&self) -> &'static str {
        match self {
            Self::NotConfigured(_) => "LLM_NOT_CONFIGURED",
            Self::Invalid(_) => "LLM_INVALID_REQUEST",
            Self::Unavailable { .. } => "LLM_UNAVAILABLE",
            Self::Deadline(_) => "LLM_DEADLINE",
            Self::Ledger(_) => "LLM_LEDGER_UNAVAILABLE",
            Self::Interrupted { .. } => "LLM_STREAM_INTERRUPTED",
            Self::TooLarge { .. } => "LLM_ANSWER_TOO_LARGE",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::NotConfigured(_)
            | Self::Unavailable { .. }
            | Self::Deadline(_)
            | Self::Ledger(_) => ErrorKind::Unavailable,
            Self::Invalid(_) => ErrorKind::InvalidInput,
            Self::Interrupted { .. } | Self::TooLarge { .. } => ErrorKind::Unavailable,
        }
    }
}

/// Cost in millionths of a USD.
pub(crate) fn cost_micros(rates: Option<&Rates>, u: &TokenUsage) -> i64 {
    let Some(r) = rates else { return 0 };
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
    let usd = (u.input as f64 * r.input
        + u.output as f64 * r.output
        + u.cache_read as f64 * r.cache_read
        + u.cache_write as f64 * r.cache_write)
        / 1_000_000.0;
    #[allow(clippy::cast_possible_truncation)]
    let micros = (usd * 1_000_000.0).round() as i64;
    micros
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml: &str, vars: &[(&str, &str)]) -> Result<Option<LlmConfig>, LlmConfigError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CONFIG_FILE), toml).unwrap();
        let vars: Vec<(String, String)> =
            vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        LlmConfig::load_with(dir.path(), &|k| {
            vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn tiers_map_to_targets_and_aliases_collapse() {
        let c = config(
            r#"
[llm]
deadline_secs = 30
tier_numbering = "design"
[llm.targets.big]
base_url = "https://big.example.com/v1"
model = "big-1"
api_key = "k"
[llm.targets.big-again]
base_url = "https://big.example.com/v1/"
model = "big-1"
api_key = "k"
[llm.targets.small]
base_url = "http://127.0.0.1:8080/v1"
model = "small"
tools = false
[llm.tiers]
tier-1 = ["big", "big-again", "small"]
[llm.rates.big-1]
input = 3.0
output = 15.0
"#,
            &[],
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.deadline, Duration::from_secs(30));
        let names = |v: Vec<(String, Target)>| v.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        assert_eq!(names(c.route(Capability::Tier1, false)), ["big", "small"]);
        assert_eq!(names(c.route(Capability::Tier1, true)), ["big"], "small takes no tools");
        assert!(c.route(Capability::Tier3, false).is_empty(), "an unmapped tier has no target");
        let u = TokenUsage { input: 1_000_000, output: 100_000, ..TokenUsage::default() };
        assert_eq!(cost_micros(c.rates.get("big-1"), &u), 4_500_000);
        // The environment's target serves every unmapped tier.
        let env = config(
            "",
            &[("STEWARD_LLM_BASE_URL", "http://localhost:9/v1"), ("STEWARD_LLM_MODEL", "m")],
        )
        .unwrap()
        .unwrap();
        assert_eq!(names(env.route(Capability::Tier4, false)), [ENV_TARGET]);
        assert_eq!(config("", &[]).unwrap(), None);
        for bad in [
            "[llm.targets.a]\nbase_url = \"ftp://x\"\nmodel = \"m\"",
            "[llm.targets.a]\nbase_url = \"http://example.com/v1\"\nmodel = \"m\"\napi_key = \"k\"",
            "[llm.targets.a]\nbase_url = \"http://127.0.0.1/v1\"\nmodel = \"m\"\n[llm.tiers]\ntier-9 = [\"a\"]",
            "[llm.targets.a]\nbase_url = \"http://127.0.0.1/v1\"\nmodel = \"m\"\n[llm.tiers]\ntier-1 = [\"b\"]",
            "[llm]\ndeadline_secs = 0\n[llm.targets.a]\nbase_url = \"http://127.0.0.1/v1\"\nmodel = \"m\"",
        ] {
            assert!(config(bad, &[]).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_design_numbering_is_read_as_is_and_the_old_one_renumbered_with_a_warning() {
        let targets = r#"
[llm.targets.cloud]
base_url = "https://cloud.example.com/v1"
model = "big-1"
api_key = "k"
[llm.targets.local]
base_url = "http://127.0.0.1:8080/v1"
model = "small"
"#;
        let names = |c: &LlmConfig, cap| {
            c.route(cap, false).into_iter().map(|(n, _)| n).collect::<Vec<_>>()
        };
        // The design's numbering: tier-1 is the local rung, tier-6 the strongest.
        let design = format!(
            "[llm]\ntier_numbering = \"design\"\n{targets}{}",
            r#"
[llm.tiers]
tier-1 = ["local"]
tier-6 = ["cloud"]
local-embed = ["local"]
"#
        );
        let c = config(&design, &[]).unwrap().unwrap();
        assert_eq!(names(&c, Capability::Tier1), ["local"]);
        assert_eq!(names(&c, Capability::Tier6), ["cloud"]);
        assert!(Capability::Tier1 < Capability::Tier6, "ordered weakest to strongest");
        // A file written for the old numbering (tier-1 the strongest): read as its author meant,
        // whether it says so or (as every file written before the key did) not.
        let old_tiers = r#"
[llm.tiers]
tier-1 = ["cloud"]
tier-6 = ["local"]
local-embed = ["local"]
"#;
        for old in [
            format!("{targets}{old_tiers}"),
            format!("[llm]\ntier_numbering = \"old\"\n{targets}{old_tiers}"),
        ] {
            let c = config(&old, &[]).unwrap().unwrap();
            assert_eq!(names(&c, Capability::Tier1), ["local"], "{old}");
            assert_eq!(names(&c, Capability::Tier6), ["cloud"], "{old}");
            assert_eq!(names(&c, Capability::LocalEmbed), ["local"], "{old}");
        }
        // The warning says what was renumbered and how to silence it; with nothing to
        // renumber, nothing is said.
        let named = |pairs: &[(&str, &str)]| -> BTreeMap<String, Vec<String>> {
            pairs.iter().map(|(t, n)| ((*t).to_owned(), vec![(*n).to_owned()])).collect()
        };
        let (_, warning) = read_tiers(named(&[("tier-1", "cloud")]), None).unwrap();
        let warning = warning.unwrap();
        assert!(warning.contains("tier-1 → tier-6"), "{warning}");
        assert!(warning.contains(r#"tier_numbering = "design""#), "{warning}");
        let (_, warning) = read_tiers(named(&[("tier-1", "cloud")]), Some("old")).unwrap();
        assert!(warning.is_some());
        let (_, warning) = read_tiers(named(&[("tier-1", "cloud")]), Some("design")).unwrap();
        assert_eq!(warning, None);
        let (_, warning) = read_tiers(named(&[("local-embed", "local")]), None).unwrap();
        assert_eq!(warning, None);
        let e = config(&format!("[llm]\ntier_numbering = \"reversed\"\n{targets}"), &[]);
        assert!(e.unwrap_err().0.contains("tier_numbering"));
    }

    #[test]
    fn a_request_reads_from_json_and_refuses_what_it_does_not_know() {
        let r = ChatRequest::from_json(
            r#"{"capability": "tier-4", "messages": [{"role": "user", "content": "hi"}],
                "attribution": {"service": "notebook", "action": "replay"}}"#,
        )
        .unwrap();
        assert_eq!(r.capability, Capability::Tier4);
        assert_eq!(r.messages[0].content.as_deref(), Some("hi"));
        assert!(r.tools.is_empty() && r.max_tokens.is_none());
        assert_eq!(r.attribution.action.as_deref(), Some("replay"));
        for bad in [
            r#"{"capability": "gpt-5", "messages": []}"#,
            r#"{"capability": "tier-1", "messages": [], "model": "x"}"#,
            r#"{"capability": "tier-1", "messages": [], "attribution": {"who": "x"}}"#,
            r#"{"messages": []}"#,
            "[]",
        ] {
            let e = ChatRequest::from_json(bad).unwrap_err();
            assert_eq!(e.code(), "LLM_INVALID_REQUEST", "{bad}");
        }
    }
}
