//! Pre-approved actions: the capability registry, the constraints a grant puts on every
//! argument, and the deterministic guard that checks a background action against them.
//!
//! A grant is future authority a person approved once (an L2 approval whose card says in words
//! what may happen). It names a registered capability — never an arbitrary tool — and
//! constrains each argument: `exact`, `template` (`{{state.x}}`, `{{event.x}}` from the
//! source's registered fields only), `one_of`, `range`, or `relative_time` (a registered
//! timestamp plus a fixed minute offset, frozen to an exact instant before execution).
//! Extra fields are always denied. None of this is decided by a model.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{WatchError, WatchRule, at_path};
use crate::time::{CivilTime, parse_instant};

/// Grants per rule.
/// Fixed (not a setting).
pub const MAX_GRANTS_PER_RULE: usize = 4;
/// Values of one `one_of`.
/// Fixed (not a setting).
pub const MAX_ONE_OF: usize = 32;
/// Longest template.
/// Fixed (not a setting).
pub const MAX_TEMPLATE_CHARS: usize = 2_000;
/// Largest `exact` value, bytes of JSON.
/// Fixed (not a setting).
pub const MAX_EXACT_BYTES: usize = 8 * 1024;
/// The largest offset of a `relative_time`, minutes (a week).
/// Fixed (not a setting).
pub const MAX_RELATIVE_MINUTES: i64 = 10_080;
/// Outcomes one continuation may name.
/// Fixed (not a setting).
pub const MAX_CONTINUATION_OUTCOMES: usize = 8;
/// Arguments one grant may constrain.
/// Fixed (not a setting).
pub const MAX_CONSTRAINED_FIELDS: usize = 16;
/// Items of a list a constraint or filter names as a value (recipients, for example).
/// Fixed (not a setting).
pub const MAX_VALUE_ITEMS: usize = 50;

/// The schema a model fills for a constraint's or filter's value: text, a number, a boolean
/// or a bounded list of those (the wire type stays any JSON; the checks bound it).
pub(crate) fn value_schema() -> Value {
    serde_json::json!({
        "type": ["string", "number", "boolean", "array"],
        "items": { "type": ["string", "number", "boolean"] },
        "maxItems": MAX_VALUE_ITEMS,
    })
}

fn exact_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::Schema::try_from(value_schema()).unwrap_or_default()
}

fn one_of_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let schema = serde_json::json!({
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_ONE_OF,
        "items": value_schema(),
    });
    schemars::Schema::try_from(schema).unwrap_or_default()
}

fn constrained_fields_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let constraint = generator.subschema_for::<Constraint>();
    let schema = serde_json::json!({
        "type": "object",
        "maxProperties": MAX_CONSTRAINED_FIELDS,
        "additionalProperties": constraint,
    });
    schemars::Schema::try_from(schema).unwrap_or_default()
}
/// Attempts one continuation may make, counting the first.
/// Fixed (not a setting).
pub const MAX_CONTINUATION_ATTEMPTS: u32 = 10;
/// The longest wait before a continuation's next attempt, minutes.
/// Fixed (not a setting).
pub const MAX_CONTINUATION_MINUTES: i64 = 1_440;

/// One pre-approved capability of a rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// A registered capability (`mail.send`, `mail.reply`, `calendar.create_event`).
    pub tool: String,
    /// How often it may run for this watch (absent: the capability's limit; never more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_invocations: Option<u32>,
    /// What each argument may be.
    #[serde(default)]
    pub constraints: Constraints,
}

/// The constraints of a grant's arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Constraints {
    /// Must be true: an argument without a constraint is refused.
    #[serde(default = "yes")]
    pub deny_extra_fields: bool,
    /// Field name → constraint (at most [`MAX_CONSTRAINED_FIELDS`]).
    #[serde(default)]
    #[schemars(schema_with = "constrained_fields_schema")]
    pub fields: BTreeMap<String, Constraint>,
}

fn yes() -> bool {
    true
}

impl Default for Constraints {
    fn default() -> Self {
        Self { deny_extra_fields: true, fields: BTreeMap::new() }
    }
}

/// What one argument may be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Constraint {
    /// Exactly this value.
    Exact {
        /// The value.
        #[schemars(schema_with = "exact_schema")]
        value: Value,
    },
    /// This text with `{{state.x}}` / `{{event.x}}` filled from registered fields.
    Template {
        /// The text.
        template: String,
    },
    /// One of these values.
    OneOf {
        /// The values (1..=[`MAX_ONE_OF`]).
        #[schemars(schema_with = "one_of_schema")]
        values: Vec<Value>,
    },
    /// A number within bounds (inclusive; at least one bound).
    Range {
        /// Lower bound.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<f64>,
        /// Upper bound.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<f64>,
    },
    /// A registered timestamp plus `minutes`, frozen to an RFC 3339 instant.
    RelativeTime {
        /// `state.<field>` or `event.<field>`, registered as a time by the source.
        field: String,
        /// Minutes after it (negative: before).
        minutes: i64,
    },
}

/// A bounded follow-up: when the action's structured outcome is one of `outcomes`, a child
/// time watch tries again after `after_minutes`, with exactly the same grants and context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Continuation {
    /// Outcomes that schedule another attempt (`not_answered`, `busy`, …).
    #[schemars(length(min = 1, max = MAX_CONTINUATION_OUTCOMES))]
    pub outcomes: Vec<String>,
    /// Minutes until the next attempt (1..=[`MAX_CONTINUATION_MINUTES`]).
    pub after_minutes: i64,
    /// Attempts in all, counting the first (1..=[`MAX_CONTINUATION_ATTEMPTS`]).
    pub max_attempts: u32,
}

/// A write tool that may be granted, and the shape of what it accepts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Capability {
    /// The tool.
    pub tool: String,
    /// Fields a grant may constrain (and an action may carry).
    pub allowed_fields: Vec<String>,
    /// Fields every action carries (so every grant must constrain them).
    pub required_fields: Vec<String>,
    /// Every field an action carries must be constrained (else an allowed field may be free).
    pub constraints_mandatory: bool,
    /// The most invocations one watch may make.
    pub max_invocations: u32,
}

impl Capability {
    /// A capability over these fields.
    pub fn new(tool: &str, allowed: &[&str], required: &[&str], max_invocations: u32) -> Self {
        Self {
            tool: tool.to_owned(),
            allowed_fields: allowed.iter().map(|s| (*s).to_owned()).collect(),
            required_fields: required.iter().map(|s| (*s).to_owned()).collect(),
            constraints_mandatory: true,
            max_invocations,
        }
    }
}

/// The write tools that may be granted. A tool not registered here is never available to a
/// background turn, whatever a definition says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapabilityRegistry {
    caps: BTreeMap<String, Capability>,
}

impl CapabilityRegistry {
    /// No capabilities: watches notify only.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Steward's own: sending and replying to mail, creating a calendar event (each once per
    /// watch, every field constrained).
    pub fn builtin() -> Self {
        let mut r = Self::empty();
        for cap in [
            Capability::new(
                "mail.send",
                &["to", "cc", "bcc", "subject", "body"],
                &["to", "subject", "body"],
                1,
            ),
            Capability::new(
                "mail.reply",
                &["message_id", "body", "reply_all"],
                &["message_id", "body"],
                1,
            ),
            Capability::new(
                "calendar.create_event",
                &["title", "start", "end", "attendees", "description", "location", "calendar"],
                &["title", "start", "end"],
                1,
            ),
        ] {
            r.caps.insert(cap.tool.clone(), cap);
        }
        r
    }

    /// Registers (or replaces) a capability.
    pub fn register(&mut self, cap: Capability) -> Result<(), WatchError> {
        crate::policy::check_tool_name(&cap.tool)
            .map_err(|e| WatchError::Invalid(e.to_string()))?;
        if cap.max_invocations == 0 || cap.max_invocations > 100 {
            return Err(WatchError::Invalid(format!(
                "capability {}: max_invocations must be 1..=100",
                cap.tool
            )));
        }
        if let Some(f) = cap.required_fields.iter().find(|f| !cap.allowed_fields.contains(f)) {
            return Err(WatchError::Invalid(format!(
                "capability {}: required field {f} is not allowed",
                cap.tool
            )));
        }
        self.caps.insert(cap.tool.clone(), cap);
        Ok(())
    }

    /// The capability named `tool`.
    pub fn get(&self, tool: &str) -> Option<&Capability> {
        self.caps.get(tool)
    }

    /// Every capability, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Capability> {
        self.caps.values()
    }

    fn names(&self) -> String {
        self.caps.keys().cloned().collect::<Vec<_>>().join(", ")
    }
}

/// The fields of a source a grant may read: `state.<path>` (the snapshot) and `event.<path>`
/// (the event's data) for templates, and timestamps for `relative_time`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrantFields {
    /// Usable in templates.
    pub text: Vec<String>,
    /// Usable as the base of a `relative_time` (Unix ms, Unix seconds or RFC 3339 values).
    pub time: Vec<String>,
}

impl GrantFields {
    /// From string slices.
    pub fn new(text: &[&str], time: &[&str]) -> Self {
        let own = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect();
        Self { text: own(text), time: own(time) }
    }
}

/// The placeholders of a template (`state.x`, `event.y`), or why it is malformed.
fn placeholders(template: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or("an unclosed {{ in the template")?;
        out.push(after[..end].trim());
        rest = &after[end + 2..];
    }
    if rest.contains("}}") {
        return Err("a stray }} in the template".to_owned());
    }
    Ok(out)
}

/// Checks one rule's grants and continuation against the registry and the source's fields.
pub(crate) fn check_rule_grants(
    rule: &WatchRule,
    caps: &CapabilityRegistry,
    fields: &GrantFields,
) -> Result<(), WatchError> {
    let bad = |m: String| Err(WatchError::Invalid(format!("rule {}: {m}", rule.id)));
    if rule.grants.len() > MAX_GRANTS_PER_RULE {
        return bad(format!("at most {MAX_GRANTS_PER_RULE} grants"));
    }
    let mut tools = BTreeSet::new();
    for g in &rule.grants {
        let Some(cap) = caps.get(&g.tool) else {
            return bad(format!(
                "{:?} cannot be granted: only registered capabilities can ({})",
                g.tool,
                caps.names()
            ));
        };
        if !tools.insert(g.tool.as_str()) {
            return bad(format!("{} is granted twice", g.tool));
        }
        if g.max_invocations.is_some_and(|n| n == 0 || n > cap.max_invocations) {
            return bad(format!("{}: max_invocations must be 1..={}", g.tool, cap.max_invocations));
        }
        if !g.constraints.deny_extra_fields {
            return bad(format!("{}: extra fields are always denied", g.tool));
        }
        if g.constraints.fields.len() > MAX_CONSTRAINED_FIELDS {
            return bad(format!("{}: at most {MAX_CONSTRAINED_FIELDS} constrained fields", g.tool));
        }
        for (name, c) in &g.constraints.fields {
            if !cap.allowed_fields.contains(name) {
                return bad(format!(
                    "{}: field {name} is not one of {}",
                    g.tool,
                    cap.allowed_fields.join(", ")
                ));
            }
            check_constraint(c, fields).map_err(|m| {
                WatchError::Invalid(format!("rule {}: {}.{name}: {m}", rule.id, g.tool))
            })?;
        }
        if let Some(f) = cap.required_fields.iter().find(|f| !g.constraints.fields.contains_key(*f))
        {
            return bad(format!("{}: the required field {f} needs a constraint", g.tool));
        }
    }
    if let Some(c) = &rule.continuation {
        if rule.grants.is_empty() {
            return bad("a continuation needs a grant to retry".to_owned());
        }
        let word_ok = |o: &String| {
            !o.is_empty() && o.len() <= 64 && o.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        };
        if c.outcomes.is_empty()
            || c.outcomes.len() > MAX_CONTINUATION_OUTCOMES
            || !c.outcomes.iter().all(word_ok)
        {
            return bad(format!(
                "a continuation names 1..={MAX_CONTINUATION_OUTCOMES} outcomes of a-z and _"
            ));
        }
        if !(1..=MAX_CONTINUATION_MINUTES).contains(&c.after_minutes) {
            return bad(format!(
                "continuation after_minutes must be 1..={MAX_CONTINUATION_MINUTES}"
            ));
        }
        if !(1..=MAX_CONTINUATION_ATTEMPTS).contains(&c.max_attempts) {
            return bad(format!(
                "continuation max_attempts must be 1..={MAX_CONTINUATION_ATTEMPTS}"
            ));
        }
    }
    Ok(())
}

fn check_constraint(c: &Constraint, fields: &GrantFields) -> Result<(), String> {
    match c {
        Constraint::Exact { value } => {
            if value.is_null() || value.to_string().len() > MAX_EXACT_BYTES {
                return Err(format!(
                    "an exact value is non-null and at most {MAX_EXACT_BYTES} bytes"
                ));
            }
        }
        Constraint::Template { template } => {
            if template.is_empty() || template.chars().count() > MAX_TEMPLATE_CHARS {
                return Err(format!("a template is 1..={MAX_TEMPLATE_CHARS} characters"));
            }
            for p in placeholders(template)? {
                if !fields.text.iter().any(|f| f == p) {
                    return Err(format!(
                        "{{{{{p}}}}} is not a registered field of this source ({})",
                        if fields.text.is_empty() {
                            "none".to_owned()
                        } else {
                            fields.text.join(", ")
                        }
                    ));
                }
            }
        }
        Constraint::OneOf { values } => {
            if values.is_empty() || values.len() > MAX_ONE_OF || values.iter().any(Value::is_null) {
                return Err(format!("one_of takes 1..={MAX_ONE_OF} non-null values"));
            }
        }
        Constraint::Range { min, max } => {
            let finite = |x: &Option<f64>| x.is_none_or(f64::is_finite);
            if (min.is_none() && max.is_none()) || !finite(min) || !finite(max) {
                return Err("a range has a finite min, max or both".to_owned());
            }
            if let (Some(a), Some(b)) = (min, max)
                && a > b
            {
                return Err("a range's min is above its max".to_owned());
            }
        }
        Constraint::RelativeTime { field, minutes } => {
            if !fields.time.contains(field) {
                return Err(format!(
                    "{field} is not a registered time of this source ({})",
                    if fields.time.is_empty() { "none".to_owned() } else { fields.time.join(", ") }
                ));
            }
            if minutes.abs() > MAX_RELATIVE_MINUTES {
                return Err(format!("minutes must be within ±{MAX_RELATIVE_MINUTES}"));
            }
        }
    }
    Ok(())
}

/// What a granted action's templates and times read: the watch's state at the event and the
/// event's data (for a continuation: the parent's, inherited).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GrantContext {
    /// The snapshot.
    pub state: Value,
    /// The event's data.
    pub event: Value,
}

impl GrantContext {
    fn lookup(&self, path: &str) -> Option<&Value> {
        let (ns, rest) = path.split_once('.')?;
        match ns {
            "state" => at_path(&self.state, rest),
            "event" => at_path(&self.event, rest),
            _ => None,
        }
    }

    fn render(&self, template: &str) -> Result<String, String> {
        let mut out = String::with_capacity(template.len());
        let mut rest = template;
        while let Some(start) = rest.find("{{") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find("}}").ok_or("an unclosed {{")?;
            let path = after[..end].trim();
            match self.lookup(path) {
                Some(Value::String(s)) => out.push_str(s),
                Some(v @ (Value::Number(_) | Value::Bool(_))) => out.push_str(&v.to_string()),
                _ => return Err(format!("{path} has no value now")),
            }
            rest = &after[end + 2..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// The frozen instant of a `relative_time`.
    fn instant(&self, field: &str, minutes: i64) -> Result<i64, String> {
        let base = self
            .lookup(field)
            .and_then(super::store::timestamp)
            .ok_or_else(|| format!("{field} has no time now"))?;
        Ok(base + minutes * 60)
    }
}

/// The value of every field a constraint fixes (`exact`, `template`, `relative_time`), and
/// the fields left to choose (`one_of`, `range`).
pub(crate) fn determined_arguments(
    grant: &Grant,
    ctx: &GrantContext,
) -> Result<(Map<String, Value>, Vec<String>), String> {
    let mut args = Map::new();
    let mut open = Vec::new();
    for (name, c) in &grant.constraints.fields {
        match c {
            Constraint::Exact { value } => {
                args.insert(name.clone(), value.clone());
            }
            Constraint::Template { template } => {
                args.insert(name.clone(), Value::String(ctx.render(template)?));
            }
            Constraint::RelativeTime { field, minutes } => {
                let at = ctx.instant(field, *minutes)?;
                args.insert(name.clone(), Value::String(CivilTime::from_unix(at).rfc3339()));
            }
            Constraint::OneOf { .. } | Constraint::Range { .. } => open.push(name.clone()),
        }
    }
    Ok((args, open))
}

/// The second guard: every argument checked against its constraint, extra fields denied,
/// required fields present. Returns the arguments to run (relative times frozen to their
/// canonical instant).
pub(crate) fn guard_arguments(
    grant: &Grant,
    cap: &Capability,
    args: &Value,
    ctx: &GrantContext,
) -> Result<Value, String> {
    let Value::Object(given) = args else {
        return Err("the arguments must be a JSON object".to_owned());
    };
    let mut out = Map::new();
    for (name, v) in given {
        let Some(c) = grant.constraints.fields.get(name) else {
            if cap.constraints_mandatory || !cap.allowed_fields.contains(name) {
                return Err(format!("field {name} is not granted"));
            }
            out.insert(name.clone(), v.clone());
            continue;
        };
        let ok = match c {
            Constraint::Exact { value } => v == value,
            Constraint::Template { template } => {
                v.as_str()
                    == Some(ctx.render(template).map_err(|e| format!("{name}: {e}"))?.as_str())
            }
            Constraint::OneOf { values } => values.contains(v),
            Constraint::Range { min, max } => {
                v.as_f64().is_some_and(|x| min.is_none_or(|m| x >= m) && max.is_none_or(|m| x <= m))
            }
            Constraint::RelativeTime { field, minutes } => {
                let at = ctx.instant(field, *minutes).map_err(|e| format!("{name}: {e}"))?;
                let given_at = v.as_str().and_then(|s| parse_instant(s).ok());
                if given_at == Some(at) {
                    out.insert(name.clone(), Value::String(CivilTime::from_unix(at).rfc3339()));
                    continue;
                }
                false
            }
        };
        if !ok {
            return Err(format!("field {name} is outside its constraint"));
        }
        out.insert(name.clone(), v.clone());
    }
    if let Some(f) = cap.required_fields.iter().find(|f| !given.contains_key(*f)) {
        return Err(format!("the required field {f} is missing"));
    }
    Ok(Value::Object(out))
}

/// The card's words for the authority a definition's grants give.
pub fn describe_grants(rules: &[WatchRule]) -> String {
    let mut parts = Vec::new();
    for r in rules.iter().filter(|r| !r.grants.is_empty()) {
        let when = match (&r.event, &r.trigger) {
            (Some(e), _) if r.filter.is_empty() => format!("on {e}"),
            (Some(e), _) => format!(
                "on {e} where {}",
                r.filter.iter().map(|(k, v)| format!("{k} = {v}")).collect::<Vec<_>>().join(", ")
            ),
            (None, Some(super::Trigger::BeforeTime { field, minutes })) => {
                format!("{minutes} minutes before {field}")
            }
            (None, Some(super::Trigger::TimeReached { at, .. })) => {
                format!("at {}", at.as_deref().unwrap_or("the set time"))
            }
            _ => "when it matches".to_owned(),
        };
        for g in &r.grants {
            let fields = g
                .constraints
                .fields
                .iter()
                .map(|(k, c)| match c {
                    Constraint::Exact { value } => format!("{k} exactly {value}"),
                    Constraint::Template { template } => format!("{k} from the text {template:?}"),
                    Constraint::OneOf { values } => format!(
                        "{k} one of {}",
                        values.iter().map(Value::to_string).collect::<Vec<_>>().join(", ")
                    ),
                    Constraint::Range { min, max } => format!(
                        "{k} between {} and {}",
                        min.map_or("any".to_owned(), |x| x.to_string()),
                        max.map_or("any".to_owned(), |x| x.to_string())
                    ),
                    Constraint::RelativeTime { field, minutes } => {
                        format!("{k} at {field} {minutes:+} minutes")
                    }
                })
                .collect::<Vec<_>>()
                .join("; ");
            let times =
                g.max_invocations.map_or_else(String::new, |n| format!(", at most {n} time(s)"));
            parts.push(format!(
                "rule {} ({when}, once: {}): may {} with {fields}{times}",
                r.id, r.once, g.tool
            ));
        }
        if let Some(c) = &r.continuation {
            parts.push(format!(
                "if the outcome is {}, rule {} tries again after {} minutes, up to {} attempts in all",
                c.outcomes.join(" or "),
                r.id,
                c.after_minutes,
                c.max_attempts
            ));
        }
    }
    parts.join(". ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn grant(fields: Value) -> Grant {
        serde_json::from_value(json!({"tool": "mail.reply", "constraints": {"fields": fields}}))
            .unwrap()
    }

    #[test]
    fn ranges_templates_and_extra_fields_at_the_guard() {
        let caps = CapabilityRegistry::builtin();
        let cap = caps.get("mail.reply").unwrap();
        let g = grant(json!({
            "message_id": {"kind": "range", "min": 10, "max": 20},
            "body": {"kind": "template", "template": "Platform {{event.platform}}"}
        }));
        let ctx = GrantContext { state: json!({}), event: json!({"platform": "7"}) };
        let ok = json!({"message_id": 12, "body": "Platform 7"});
        assert_eq!(guard_arguments(&g, cap, &ok, &ctx).unwrap(), ok);
        for bad in [
            json!({"message_id": 21, "body": "Platform 7"}),
            json!({"message_id": 9.5, "body": "Platform 7"}),
            json!({"message_id": "12", "body": "Platform 7"}),
            json!({"message_id": 12, "body": "Platform 8"}),
            json!({"message_id": 12, "body": "Platform 7", "reply_all": true}),
            json!({"body": "Platform 7"}),
            json!([12]),
        ] {
            assert!(guard_arguments(&g, cap, &bad, &ctx).is_err(), "{bad}");
        }
        // A template whose field has no value now refuses, it does not render a blank.
        let empty = GrantContext { state: json!({}), event: json!({}) };
        assert!(guard_arguments(&g, cap, &ok, &empty).unwrap_err().contains("no value"));
        // The same checks at creation.
        let fields = GrantFields::new(&["event.platform"], &[]);
        let rule = |g: Grant| WatchRule {
            id: "r".into(),
            event: Some("e".into()),
            trigger: None,
            filter: std::collections::BTreeMap::new(),
            once: false,
            grants: vec![g],
            continuation: None,
        };
        assert!(check_rule_grants(&rule(g), &caps, &fields).is_ok());
        for bad in [
            json!({"message_id": {"kind": "range", "min": 5, "max": 1}, "body": {"kind": "exact", "value": "x"}}),
            json!({"message_id": {"kind": "range"}, "body": {"kind": "exact", "value": "x"}}),
            json!({"message_id": {"kind": "one_of", "values": []}, "body": {"kind": "exact", "value": "x"}}),
            json!({"message_id": {"kind": "exact", "value": 1}, "body": {"kind": "template", "template": "{{event.platform"}}),
            json!({"message_id": {"kind": "exact", "value": 1}, "body": {"kind": "exact", "value": null}}),
        ] {
            assert!(check_rule_grants(&rule(grant(bad.clone())), &caps, &fields).is_err(), "{bad}");
        }
    }
}
