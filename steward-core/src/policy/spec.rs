//! Tool specifications: what a tool is called, what it does to the world, and the input schema
//! a model must fill. A schema the model cannot fill correctly is a bug, so registering one
//! is an error: every parameter described, no free-form objects, no unbounded arrays.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Level, PolicyError};

/// Deepest nesting of schemas checked (a recursive type deeper than this is refused).
/// Fixed (not a setting).
pub const MAX_SCHEMA_DEPTH: usize = 16;
/// Longest tool name.
/// Fixed (not a setting).
pub const MAX_TOOL_NAME: usize = 64;
/// Largest input schema an outside server's tool may have, bytes of JSON.
/// Fixed (not a setting).
pub const MAX_EXTERNAL_SCHEMA_BYTES: usize = 32 * 1024;
/// Deepest JSON nesting of an outside server's input schema.
/// Fixed (not a setting).
pub const MAX_EXTERNAL_SCHEMA_NESTING: usize = 32;
/// Longest description of an outside server's tool kept, characters.
/// Fixed (not a setting).
pub const MAX_EXTERNAL_DESCRIPTION_CHARS: usize = 1_000;

/// What running a tool does to the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Effect {
    /// Reads local state only.
    Read,
    /// Changes something; `reversible` when it can be undone (a draft, a label).
    Write {
        /// Whether the change can be undone.
        reversible: bool,
    },
    /// Changes something that cannot be undone or leaves the machine (a sent mail, a deletion).
    Destructive,
}

impl Effect {
    /// A short name: `read`, `reversible write`, `write`, `destructive`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write { reversible: true } => "reversible write",
            Self::Write { reversible: false } => "write",
            Self::Destructive => "destructive",
        }
    }
}

/// A registered tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// Namespaced name, `namespace.verb` (`mail.send`).
    pub name: String,
    /// What the tool does, for the model and the approval card.
    pub description: String,
    /// JSON Schema of the input (generated with schemars, checked at registration).
    pub input_schema: Value,
    /// What it does to the world.
    pub effect: Effect,
    /// The level it runs at unless a person sets another.
    pub default_level: Level,
    /// Scopes it needs (`mail:send`), for grants.
    pub scopes: Vec<String>,
}

impl ToolSpec {
    /// A spec whose input schema is generated from `I`. Fails when the name is not
    /// `namespace.verb` or the schema has an undescribed parameter, a free-form object or an
    /// unbounded array.
    pub fn new<I: schemars::JsonSchema>(
        name: &str,
        description: &str,
        effect: Effect,
        default_level: Level,
    ) -> Result<Self, PolicyError> {
        let schema = serde_json::to_value(schemars::schema_for!(I))
            .map_err(|e| PolicyError::BadSchema { tool: name.to_owned(), reason: e.to_string() })?;
        Self::with_schema(name, description, effect, default_level, schema)
    }

    /// A spec with a hand-written schema, checked like a generated one.
    pub fn with_schema(
        name: &str,
        description: &str,
        effect: Effect,
        default_level: Level,
        input_schema: Value,
    ) -> Result<Self, PolicyError> {
        check_name(name)?;
        if description.trim().is_empty() {
            return Err(PolicyError::BadSchema {
                tool: name.to_owned(),
                reason: "the tool has no description".to_owned(),
            });
        }
        let defs =
            input_schema.get("$defs").and_then(Value::as_object).cloned().unwrap_or_default();
        let check = Checker { tool: name, defs: &defs };
        check.object_root(&input_schema)?;
        Ok(Self {
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema,
            effect,
            default_level,
            scopes: Vec::new(),
        })
    }

    /// A tool the outside server `server` offers (under [`super::EXTERNAL_NAMESPACE`]). Its
    /// schema is the server's, so it is checked only for what the gate and the model request
    /// rely on — an object schema of at most [`MAX_EXTERNAL_SCHEMA_BYTES`], nested at most
    /// [`MAX_EXTERNAL_SCHEMA_NESTING`] deep, with local `$ref`s only. Its description is cut to
    /// [`MAX_EXTERNAL_DESCRIPTION_CHARS`] and says whose words it is. Its effect is an
    /// irreversible write whatever the server's annotations say (they are hints from an
    /// untrusted party), and it is gated ([`Level::Confirm`]) until a person lowers it — never
    /// below `logged`.
    pub fn external(
        name: &str,
        server: &str,
        description: &str,
        input_schema: Value,
    ) -> Result<Self, PolicyError> {
        check_name(name)?;
        let bad = |reason: String| PolicyError::BadSchema { tool: name.to_owned(), reason };
        let size = serde_json::to_vec(&input_schema).map_or(usize::MAX, |b| b.len());
        if size > MAX_EXTERNAL_SCHEMA_BYTES {
            return Err(bad(format!(
                "the schema is {size} bytes (at most {MAX_EXTERNAL_SCHEMA_BYTES})"
            )));
        }
        if input_schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(bad("the input must be an object".to_owned()));
        }
        external_node(&input_schema, 0).map_err(bad)?;
        let description: String = description
            .trim()
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(MAX_EXTERNAL_DESCRIPTION_CHARS)
            .collect();
        let description = format!(
            "[from the outside MCP server {server}; its description, not Steward's] {}",
            if description.is_empty() { "(none given)" } else { description.as_str() }
        );
        Ok(Self {
            name: name.to_owned(),
            description,
            input_schema,
            effect: Effect::Write { reversible: false },
            default_level: Level::Confirm,
            scopes: Vec::new(),
        })
    }

    /// Adds the scopes the tool needs.
    #[must_use]
    pub fn scopes(mut self, scopes: &[&str]) -> Self {
        self.scopes = scopes.iter().map(|s| (*s).to_owned()).collect();
        self
    }
}

/// Checks an outside schema's nesting and references.
fn external_node(v: &Value, depth: usize) -> Result<(), String> {
    if depth > MAX_EXTERNAL_SCHEMA_NESTING {
        return Err(format!("nested deeper than {MAX_EXTERNAL_SCHEMA_NESTING}"));
    }
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref")
                && !r.as_str().is_some_and(|r| r.starts_with("#/"))
            {
                return Err(format!("a reference outside the schema: {r}"));
            }
            m.values().try_for_each(|c| external_node(c, depth + 1))
        }
        Value::Array(a) => a.iter().try_for_each(|c| external_node(c, depth + 1)),
        _ => Ok(()),
    }
}

/// `namespace.verb[.more]`: lowercase ASCII letters, digits and `_`, at least two segments.
pub(crate) fn check_name(name: &str) -> Result<(), PolicyError> {
    let ok = name.len() <= MAX_TOOL_NAME
        && name.split('.').count() >= 2
        && name.split('.').all(|seg| {
            !seg.is_empty()
                && seg.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        });
    if ok { Ok(()) } else { Err(PolicyError::BadToolName(name.to_owned())) }
}

struct Checker<'a> {
    tool: &'a str,
    defs: &'a Map<String, Value>,
}

impl Checker<'_> {
    fn fail(&self, path: &str, reason: &str) -> PolicyError {
        PolicyError::BadSchema { tool: self.tool.to_owned(), reason: format!("{path}: {reason}") }
    }

    /// Follows `$ref: #/$defs/X` (one level at a time).
    fn resolve<'v>(&'v self, schema: &'v Value, path: &str) -> Result<&'v Value, PolicyError> {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let name = r
                    .strip_prefix("#/$defs/")
                    .ok_or_else(|| self.fail(path, &format!("unsupported reference {r}")))?;
                self.defs.get(name).ok_or_else(|| self.fail(path, &format!("missing {r}")))
            }
            None => Ok(schema),
        }
    }

    fn object_root(&self, schema: &Value) -> Result<(), PolicyError> {
        let s = self.resolve(schema, "input")?;
        let is_object = |v: &Value| v.get("type").and_then(Value::as_str) == Some("object");
        // An object, or a tagged union whose every alternative is one.
        let union = ["oneOf", "anyOf"].iter().find_map(|k| s.get(*k).and_then(Value::as_array));
        let ok = match union {
            _ if is_object(s) => true,
            Some(alts) if !alts.is_empty() => {
                alts.iter().all(|a| self.resolve(a, "input").is_ok_and(is_object))
            }
            _ => false,
        };
        if !ok {
            return Err(self.fail("input", "the input must be an object"));
        }
        self.node(schema, "input", 0)
    }

    fn node(&self, schema: &Value, path: &str, depth: usize) -> Result<(), PolicyError> {
        if depth > MAX_SCHEMA_DEPTH {
            return Err(self.fail(path, "nested too deeply (recursive type?)"));
        }
        let s = self.resolve(schema, path)?;
        let Some(obj) = s.as_object() else {
            // `true` (anything goes) is a free-form value.
            return Err(self.fail(path, "accepts any value"));
        };
        for key in ["anyOf", "oneOf", "allOf"] {
            if let Some(list) = obj.get(key).and_then(Value::as_array) {
                for (i, alt) in list.iter().enumerate() {
                    self.node(alt, &format!("{path}/{key}[{i}]"), depth + 1)?;
                }
            }
        }
        let types: Vec<&str> = match obj.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let combined =
            ["anyOf", "oneOf", "allOf", "enum", "const"].iter().any(|k| obj.contains_key(*k));
        if types.is_empty() && !combined {
            return Err(self.fail(path, "has no type (accepts any value)"));
        }
        if types.contains(&"object") {
            let props = obj.get("properties").and_then(Value::as_object);
            match obj.get("additionalProperties") {
                Some(Value::Bool(false)) => {}
                // A bounded map whose values have a schema (`where` filters, constraints).
                Some(values @ Value::Object(_))
                    if obj.get("maxProperties").and_then(Value::as_u64).is_some() =>
                {
                    self.node(values, &format!("{path}{{}}"), depth + 1)?;
                }
                _ => return Err(self.fail(path, "is a free-form object (allows unknown keys)")),
            }
            for (name, prop) in props.into_iter().flatten() {
                let p = format!("{path}.{name}");
                // A discriminator (`const`) leaves nothing to fill but its one value.
                let discriminator = prop.get("const").is_some();
                let described = discriminator
                    || prop
                        .get("description")
                        .and_then(Value::as_str)
                        .is_some_and(|d| !d.trim().is_empty())
                    || self
                        .resolve(prop, &p)?
                        .get("description")
                        .and_then(Value::as_str)
                        .is_some_and(|d| !d.trim().is_empty());
                if !described {
                    return Err(self.fail(&p, "has no description"));
                }
                self.node(prop, &p, depth + 1)?;
            }
        }
        if types.contains(&"array") {
            if obj.get("maxItems").and_then(Value::as_u64).is_none() {
                return Err(self.fail(path, "is an unbounded array (no maxItems)"));
            }
            match obj.get("items") {
                Some(items) => self.node(items, &format!("{path}[]"), depth + 1)?,
                None => return Err(self.fail(path, "is an array of anything")),
            }
        }
        Ok(())
    }
}
