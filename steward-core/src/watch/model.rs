//! The watch contracts: definitions, rules, triggers, domain events and the adapter trait.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a person asks to watch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WatchDefinition {
    /// The adapter (`time`, `train`, …).
    pub source: String,
    /// What to watch, opaque to the engine (an instant, a `trainRef`, …).
    pub resource_ref: String,
    /// What to do about it (1..=[`super::MAX_RULES`]).
    #[schemars(length(min = 1, max = super::MAX_RULES))]
    pub rules: Vec<WatchRule>,
    /// The person's words, kept for the notification and the audit.
    pub instruction: String,
    /// The chat it came from.
    #[serde(default)]
    pub chat: Option<String>,
    /// When to give up (RFC 3339 with an explicit offset); absent: the adapter's default.
    #[serde(default)]
    pub expires_at: Option<String>,
}

impl WatchDefinition {
    /// Reads a definition from JSON (what a binding passes along); a malformed one is
    /// `WATCH_INVALID`.
    pub fn from_json(json: &str) -> Result<Self, super::WatchError> {
        serde_json::from_str(json).map_err(|e| super::WatchError::Invalid(e.to_string()))
    }
}

/// One rule: exactly one of `event` or `trigger`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WatchRule {
    /// Unique within the watch.
    pub id: String,
    /// A semantic event type of the adapter (`train.departed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// A temporal trigger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
    /// Equality filters on the event's data; dot-separated keys reach nested fields.
    #[serde(default, rename = "where", skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "filter_schema")]
    pub filter: BTreeMap<String, Value>,
    /// Match at most once, ever (participation counts, not delivery).
    #[serde(default)]
    pub once: bool,
    /// Pre-approved actions for this rule (a watch with any needs a person's approval).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 4))]
    pub grants: Vec<super::Grant>,
    /// A bounded retry of the granted action on a structured outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation: Option<super::Continuation>,
}

/// A temporal trigger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Trigger {
    /// `minutes` before a live timestamp of the snapshot (a moving ETA moves the deadline
    /// until the rule fires). The field holds Unix milliseconds, Unix seconds or RFC 3339.
    BeforeTime {
        /// The snapshot field (dot path).
        field: String,
        /// Minutes before it (0..=1440).
        minutes: i64,
    },
    /// An absolute instant: `at` (RFC 3339 with an explicit offset), or `after_minutes`
    /// frozen to an instant when the watch is created.
    TimeReached {
        /// The instant.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<String>,
        /// Minutes after creation (1..=525600); replaced by `at` at creation.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after_minutes: Option<i64>,
    },
}

/// A semantic transition an adapter (or a trigger) reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DomainEvent {
    /// Stable and resource-relative; includes what makes the transition distinct (a new
    /// platform, a stop and its time), so the same transition seen twice is one event.
    pub key: String,
    /// The semantic type (`train.platform_changed`, `time.reached`, `watch.expired`).
    #[serde(rename = "type")]
    pub kind: String,
    /// Unix seconds.
    pub at: i64,
    /// What rules filter on and the notification may use.
    pub data: Value,
    /// The state before, when it matters.
    #[serde(default)]
    pub previous: Option<Value>,
    /// The state after.
    #[serde(default)]
    pub current: Option<Value>,
    /// A deterministic text for when no generated notification is available.
    pub fallback_text: String,
}

/// A source's failure to produce a snapshot (the watch keeps its previous one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SourceError(pub String);

/// A source of snapshots and the transitions between them. The engine has no source-specific
/// branch: everything a source means is here.
pub trait WatchAdapter: Send + Sync {
    /// The source name definitions use.
    fn source(&self) -> &str;
    /// Checks a resource reference before a watch is created (`Err` says why not).
    fn check_ref(&self, resource_ref: &str) -> Result<(), String> {
        let _ = resource_ref;
        Ok(())
    }
    /// Checks a rule against what this source means (a stop rule needs a stop selector, …);
    /// `Err` says why not.
    fn check_rule(&self, rule: &WatchRule) -> Result<(), String> {
        let _ = rule;
        Ok(())
    }
    /// The snapshot and event fields a grant may read (templates and `relative_time`).
    fn grant_fields(&self) -> super::GrantFields {
        super::GrantFields::default()
    }
    /// The current state of the resource at `now` (Unix seconds).
    fn snapshot(&self, resource_ref: &str, now: i64) -> Result<Value, SourceError>;
    /// The transitions from `previous` to `current`.
    fn events(&self, previous: &Value, current: &Value, now: i64) -> Vec<DomainEvent>;
    /// When a watch without an explicit expiry ends (Unix seconds).
    fn default_expiry(&self, snapshot: &Value, created_at: i64) -> i64;
    /// Whether nothing more can happen (the watch completes).
    fn is_terminal(&self, snapshot: &Value) -> bool;
    /// Seconds until the next poll should happen, when the source knows better than the
    /// default (clamped to [`super::MIN_URGENT_POLL_SECS`]).
    fn urgency(&self, snapshot: &Value) -> Option<u64> {
        let _ = snapshot;
        None
    }
}

/// The value at a dot path (`stops.0.name`) of a JSON value.
pub fn at_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |cur, key| match cur {
        Value::Object(m) => m.get(key),
        Value::Array(a) => key.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn filter_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let schema = serde_json::json!({
        "type": "object",
        "maxProperties": super::MAX_FILTERS,
        "additionalProperties": super::grants::value_schema(),
    });
    schemars::Schema::try_from(schema).unwrap_or_default()
}
