//! Every bound says where it is set: a numeric constant of the core, the connectors or the
//! server names the setting it is the default (or an end) of — a [`Limits`] field, a
//! `config.toml` key, a parameter — or says it is fixed. A new bound that says neither fails
//! here, so a bound a person might tune cannot hide in a constant.
//!
//! [`Limits`]: steward_core::Limits

use std::path::{Path, PathBuf};

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

/// Whether a doc comment says where its bound is set.
fn placed(doc: &str) -> bool {
    let doc = doc.to_lowercase();
    let fixed = doc.split(|c: char| !c.is_alphanumeric()).any(|w| w == "fixed");
    fixed
        || ["limits::", "default of", "upper end of", "lower end of"]
            .iter()
            .any(|w| doc.contains(w))
}

#[test]
fn every_numeric_bound_names_its_setting_or_says_it_is_fixed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned();
    let numeric = ["usize", "u64", "u32", "u16", "u8", "i64", "i32", "f64", "f32", "Duration"];
    let mut files = Vec::new();
    for dir in ["steward-core/src", "steward-connectors/src", "steward-server/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    files.retain(|f| f.file_name().is_some_and(|n| n != "tests.rs"));
    let (mut seen, mut unplaced) = (0, Vec::new());
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            // Public bounds wherever they are; private ones at module level (a test's or a
            // function's own constants are not bounds of the system).
            let Some(rest) = t
                .strip_prefix("pub const ")
                .or_else(|| t.strip_prefix("pub(crate) const "))
                .or_else(|| line.strip_prefix("const "))
            else {
                continue;
            };
            let Some((name, ty)) = rest.split_once(": ") else { continue };
            if !numeric.iter().any(|n| ty.starts_with(&format!("{n} ")) || ty.starts_with(n)) {
                continue;
            }
            seen += 1;
            let doc: String = lines[..i]
                .iter()
                .rev()
                .map(|l| l.trim_start())
                .take_while(|l| l.starts_with("///") || l.starts_with("#["))
                .collect::<Vec<_>>()
                .join(" ");
            if !placed(&doc) {
                unplaced.push(format!(
                    "{}:{} {name}",
                    f.strip_prefix(&root).unwrap().display(),
                    i + 1
                ));
            }
        }
    }
    assert!(seen > 200, "the scan found the bounds ({seen})");
    assert!(
        unplaced.is_empty(),
        "bounds that name no setting and are not marked fixed:\n{}",
        unplaced.join("\n")
    );
}
