//! Tools discovered at run time from an outside provider (an MCP server a person configured):
//! they join the toolbox under `mcp.<provider>.<tool>`, start on first use, and are gated
//! and untrusted like anything that came from outside ([`crate::policy::ToolSpec::external`]).
//!
//! The provider (the MCP client in `steward-connectors`) starts its server, lists its tools
//! and runs them; the toolbox decides over them exactly like its own. What the provider's
//! tools return is data: every result names [`super::SourceRef::External`], which is
//! untrusted, so the chat fences it and taint tracking follows values copied from it.

use std::{collections::BTreeMap, sync::Arc};

use serde_json::Value;

use super::ToolExecutor;
use crate::policy::{EXTERNAL_NAMESPACE, ToolSpec};

/// Longest provider name (`[a-z0-9_]`), characters.
/// Fixed (not a setting).
pub const MAX_PROVIDER_NAME_CHARS: usize = 32;
/// Largest input a call to an outside tool may carry, bytes of JSON.
/// Fixed (not a setting).
pub const MAX_EXTERNAL_INPUT_BYTES: usize = 64 * 1024;

/// What a provider's discovery found: each tool's spec with its executor.
pub type ProvidedTools = Vec<(ToolSpec, Arc<dyn ToolExecutor>)>;

/// A source of tools known only once it runs.
pub trait ToolProvider: Send + Sync {
    /// Starts the provider when it is not running and lists its tools: each a spec named
    /// under `mcp.<name>.` (see [`external_name`]) with its executor. An error is the reason
    /// the tool inventory shows; the toolbox asks again on the next use.
    fn discover(&self) -> Result<ProvidedTools, String>;
}

/// Whether `name` can name a provider: 1..=[`MAX_PROVIDER_NAME_CHARS`] of `[a-z0-9_]`.
pub fn valid_provider_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_PROVIDER_NAME_CHARS
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The registry name of the provider `provider`'s tool `tool`: `mcp.<provider>.<tool>`, the
/// tool's name lowercased with every character outside `[a-z0-9_]` made `_`. `None` when
/// nothing of the name is left or the whole is longer than a tool name may be.
pub fn external_name(provider: &str, tool: &str) -> Option<String> {
    let clean: String = tool
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() { c } else { '_' }
        })
        .collect();
    if clean.trim_matches('_').is_empty() {
        return None;
    }
    let name = format!("{EXTERNAL_NAMESPACE}{provider}.{clean}");
    (name.len() <= crate::policy::MAX_TOOL_NAME).then_some(name)
}

/// Checks `input` against an outside tool's `schema` for what the gate and the approval card
/// rely on, before the policy sees it: a JSON object of at most [`MAX_EXTERNAL_INPUT_BYTES`],
/// with every `required` property, no property the schema closes out
/// (`additionalProperties: false`), and each declared property of its declared JSON type.
/// The server checks the rest of its own schema; the input is returned unchanged.
pub fn check_external_input(schema: &Value, input: &Value) -> Result<Value, String> {
    let Some(obj) = input.as_object() else {
        return Err("the input must be a JSON object".to_owned());
    };
    let size = serde_json::to_vec(input).map_or(usize::MAX, |b| b.len());
    if size > MAX_EXTERNAL_INPUT_BYTES {
        return Err(format!("the input is {size} bytes (at most {MAX_EXTERNAL_INPUT_BYTES})"));
    }
    let empty = serde_json::Map::new();
    let props = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for key in required.iter().filter_map(Value::as_str) {
            if !obj.contains_key(key) {
                return Err(format!("missing field `{key}`"));
            }
        }
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    for (key, value) in obj {
        let Some(prop) = props.get(key) else {
            if closed {
                return Err(format!("unknown field `{key}`"));
            }
            continue;
        };
        let types: Vec<&str> = match prop.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => continue,
        };
        if !types.is_empty() && !types.iter().any(|t| of_type(value, t)) {
            return Err(format!("field `{key}` must be {}", types.join(" or ")));
        }
    }
    Ok(input.clone())
}

fn of_type(v: &Value, t: &str) -> bool {
    match t {
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "null" => v.is_null(),
        _ => true,
    }
}

/// A provider's tools once discovered.
pub(super) type Discovered = BTreeMap<String, super::Entry>;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn names_are_made_registry_names_or_refused() {
        assert_eq!(external_name("notes", "Read-Note").as_deref(), Some("mcp.notes.read_note"));
        assert_eq!(external_name("notes", "a.b c").as_deref(), Some("mcp.notes.a_b_c"));
        assert_eq!(external_name("notes", "--"), None);
        assert_eq!(external_name("notes", &"x".repeat(80)), None);
        assert!(valid_provider_name("files_2"));
        assert!(!valid_provider_name("Files"));
        assert!(!valid_provider_name(""));
        assert!(!valid_provider_name(&"a".repeat(33)));
    }

    #[test]
    fn the_input_check_refuses_what_the_schema_rules_out_and_keeps_the_rest() {
        let schema = json!({
            "type": "object",
            "properties": { "path": { "type": "string" }, "n": { "type": ["integer", "null"] } },
            "required": ["path"],
            "additionalProperties": false
        });
        assert!(check_external_input(&schema, &json!({ "path": "a", "n": 3 })).is_ok());
        assert!(check_external_input(&schema, &json!({ "path": "a", "n": null })).is_ok());
        let no_path = check_external_input(&schema, &json!({ "n": 1 })).unwrap_err();
        assert!(no_path.contains("missing field `path`"), "{no_path}");
        let extra = check_external_input(&schema, &json!({ "path": "a", "x": 1 })).unwrap_err();
        assert!(extra.contains("unknown field `x`"), "{extra}");
        let typed = check_external_input(&schema, &json!({ "path": 1 })).unwrap_err();
        assert!(typed.contains("must be string"), "{typed}");
        assert!(check_external_input(&schema, &json!([1])).is_err());
        let big = json!({ "path": "x".repeat(MAX_EXTERNAL_INPUT_BYTES) });
        assert!(check_external_input(&schema, &big).unwrap_err().contains("bytes"));
    }
}
