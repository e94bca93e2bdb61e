//! The frontends cannot drift apart silently: every public operation of the core facade
//! (`impl Steward` in steward-core) has a UniFFI and a Python counterpart, or a reason it has
//! none, in `bindings/parity.toml`.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    ffi: Option<String>,
    python: Option<String>,
    reason: Option<String>,
    ffi_reason: Option<String>,
    python_reason: Option<String>,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `pub fn` names inside top-level `impl Steward {` blocks.
fn facade() -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(&root().join("steward-core/src"), &mut files);
    let mut out = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let mut inside = false;
        for line in text.lines() {
            if line.starts_with("impl Steward {") {
                inside = true;
            } else if line.starts_with('}') {
                inside = false;
            } else if inside && let Some(rest) = line.strip_prefix("    pub fn ") {
                out.insert(rest.split(['(', '<']).next().unwrap().to_owned());
            }
        }
    }
    out
}

/// Function names defined in the files under `dir` (`pub fn x` for the FFI, any `fn x` for the
/// Python module, whose methods are not `pub`).
fn defined(dir: &str, prefix: &str) -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(&root().join(dir), &mut files);
    let mut out = BTreeSet::new();
    for f in files {
        for line in std::fs::read_to_string(&f).unwrap().lines() {
            if let Some((_, rest)) = line.split_once(prefix) {
                out.insert(rest.split(['(', '<']).next().unwrap().to_owned());
            }
        }
    }
    out
}

#[test]
fn every_facade_operation_has_binding_counterparts_or_a_reason() {
    let ops = facade();
    assert!(ops.len() > 30 && ops.contains("search"), "the facade was not read: {ops:?}");
    let table: BTreeMap<String, Entry> =
        toml::from_str(&std::fs::read_to_string(root().join("bindings/parity.toml")).unwrap())
            .unwrap();
    let ffi = defined("steward-ffi/src", "pub fn ");
    let python = defined("steward-py/src", "fn ");
    let mut problems = Vec::new();
    for op in &ops {
        let Some(e) = table.get(op) else {
            problems.push(format!("{op}: no entry in bindings/parity.toml"));
            continue;
        };
        let explained =
            |side: &str, name: &Option<String>, why: &Option<String>, have: &BTreeSet<String>| {
                match (name, why.as_ref().or(e.reason.as_ref())) {
                    (Some(n), _) if have.contains(n) => None,
                    (Some(n), _) => Some(format!("{op}: {side} names {n}, which does not exist")),
                    (None, Some(r)) if !r.trim().is_empty() => None,
                    (None, _) => Some(format!("{op}: no {side} counterpart and no reason")),
                }
            };
        problems.extend(explained("ffi", &e.ffi, &e.ffi_reason, &ffi));
        problems.extend(explained("python", &e.python, &e.python_reason, &python));
    }
    for stale in table.keys().filter(|k| !ops.contains(*k)) {
        problems
            .push(format!("{stale}: in bindings/parity.toml but not an operation of the facade"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
