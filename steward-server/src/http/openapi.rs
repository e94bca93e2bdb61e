//! The OpenAPI 3.1 document, generated from the route table and the core's schemars types.
//!
//! Request shapes (query parameters, bodies) are generated with schemars' deserialize contract
//! and responses with its serialize contract, since a type can read more leniently than it
//! writes (defaults, skipped fields). A type whose two shapes differ is published twice, the
//! request one as `<Name>Input`.

use axum::Json;
use schemars::{
    SchemaGenerator,
    generate::{Contract, SchemaSettings},
};
use serde_json::{Map, Value, json};

use super::{ErrorBody, Route, routes, schema};

const COMPONENTS: &str = "#/components/schemas/";

fn generator(contract: Contract) -> SchemaGenerator {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    settings.meta_schema = None;
    settings.contract = contract;
    settings.into_generator()
}

/// The document for every route of [`routes`].
pub fn document() -> Value {
    let mut reads = generator(Contract::Deserialize);
    let mut writes = generator(Contract::Serialize);
    let error = schema::<ErrorBody>(&mut writes);
    let mut paths: Map<String, Value> = Map::new();
    let mut request_parts = Vec::new();
    for r in routes() {
        let mut op = Map::new();
        op.insert("operationId".into(), json!(operation_id(&r)));
        op.insert("summary".into(), json!(r.summary));
        let mut params: Vec<Value> = path_params(r.path, r.text_id);
        if let Some(q) = r.query {
            let reference = q(&mut reads);
            params.extend(query_params(&reference, &reads));
        }
        if !params.is_empty() {
            op.insert("parameters".into(), Value::Array(params));
        }
        if let Some(b) = r.body {
            let body = b(&mut reads).to_value();
            op.insert(
                "requestBody".into(),
                json!({"required": true, "content": {"application/json": {"schema": body}}}),
            );
        }
        let ok = (r.response)(&mut writes).to_value();
        let mut responses = json!({
            "200": {"description": "OK", "content": {r.content_type: {"schema": ok}}},
            "default": {
                "description": "An error: the core's code and a message",
                "content": {"application/json": {"schema": error.clone().to_value()}},
            },
        });
        if r.public {
            op.insert("security".into(), json!([]));
        } else if let Some(m) = responses.as_object_mut() {
            m.insert(
                "401".into(),
                json!({"description": "No token, a wrong one, or one in the query string",
                       "content": {"application/json": {"schema": error.clone().to_value()}}}),
            );
        }
        op.insert("responses".into(), responses);
        request_parts.push((r.path, r.method.as_str().to_ascii_lowercase(), op));
    }
    // Merge the two contracts' definitions; rename request shapes that differ.
    let out_defs = writes.take_definitions(true);
    let in_defs = reads.take_definitions(true);
    let renamed: Vec<String> = in_defs
        .iter()
        .filter(|(k, v)| out_defs.get(*k).is_some_and(|o| o != *v))
        .map(|(k, _)| k.clone())
        .collect();
    let mut defs = out_defs;
    for (k, mut v) in in_defs {
        rename_refs(&mut v, &renamed);
        let name = if renamed.contains(&k) { format!("{k}Input") } else { k };
        defs.entry(name).or_insert(v);
    }
    for (path, method, mut op) in request_parts {
        for key in ["parameters", "requestBody"] {
            if let Some(v) = op.get_mut(key) {
                rename_refs(v, &renamed);
            }
        }
        let entry = paths.entry(path.to_owned()).or_insert_with(|| json!({}));
        if let Some(m) = entry.as_object_mut() {
            m.insert(method, Value::Object(op));
        }
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Steward",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The local HTTP API of a Steward home. Every route but /health needs \
                            `Authorization: Bearer <token>`.",
        },
        "paths": paths,
        "components": {
            "schemas": defs,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    })
}

/// `GET /openapi.json`.
pub(super) async fn serve_document() -> Json<Value> {
    Json(document())
}

fn operation_id(r: &Route) -> String {
    let mut id = r.method.as_str().to_ascii_lowercase();
    for part in r.path.split('/').filter(|p| !p.is_empty()) {
        id.push('_');
        id.push_str(&part.trim_matches(['{', '}']).replace(['.', '-'], "_"));
    }
    id
}

fn path_params(path: &str, text_id: bool) -> Vec<Value> {
    path.split('/')
        .filter_map(|p| p.strip_prefix('{').and_then(|p| p.strip_suffix('}')))
        .map(|name| {
            let schema = if name == "id" && !text_id {
                json!({"type": "integer", "format": "int64"})
            } else {
                json!({"type": "string", "minLength": 1})
            };
            json!({"name": name, "in": "path", "required": true, "schema": schema})
        })
        .collect()
}

/// One parameter per property of the query type.
fn query_params(reference: &schemars::Schema, g: &SchemaGenerator) -> Vec<Value> {
    let resolved = reference
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix(COMPONENTS))
        .and_then(|name| g.definitions().get(name))
        .cloned()
        .unwrap_or_else(|| reference.clone().to_value());
    let required: Vec<&str> = resolved
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    resolved
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(name, s)| {
                    let mut s = s.clone();
                    let description = s.as_object_mut().and_then(|m| m.remove("description"));
                    let mut p = json!({
                        "name": name, "in": "query",
                        "required": required.contains(&name.as_str()),
                        "schema": s,
                    });
                    if let (Some(d), Some(m)) = (description, p.as_object_mut()) {
                        m.insert("description".into(), d);
                    }
                    p
                })
                .collect()
        })
        .unwrap_or_default()
}

fn rename_refs(v: &mut Value, renamed: &[String]) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get_mut("$ref")
                && let Some(name) = r.strip_prefix(COMPONENTS)
                && renamed.iter().any(|n| n == name)
            {
                *r = format!("{COMPONENTS}{name}Input");
            }
            m.values_mut().for_each(|x| rename_refs(x, renamed));
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rename_refs(x, renamed)),
        _ => {}
    }
}
