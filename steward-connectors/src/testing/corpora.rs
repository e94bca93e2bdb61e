//! The external corpora (`../shared/corpora`), found through `STEWARD_CORPORA` (`scripts/test`
//! points it there). One rule for every test that reads them: a missing corpus is a visible
//! skip on a developer's machine and a failure where it must be present — when `CI` is set or
//! `STEWARD_REQUIRE_CORPORA=1` (`scripts/test` sets it whenever it found the corpora).

use std::{io::Write as _, path::PathBuf};

/// Whether a missing corpus fails the test instead of skipping it: `CI` or
/// `STEWARD_REQUIRE_CORPORA` set to anything but empty, `0` or `false`.
pub fn corpora_required() -> bool {
    let on = |name: &str| {
        std::env::var(name)
            .is_ok_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
    };
    on("CI") || on("STEWARD_REQUIRE_CORPORA")
}

/// The corpora's root directory; `None` (after a `SKIP` line) when there is none.
///
/// # Panics
/// When it is missing and [`corpora_required`].
pub fn corpora() -> Option<PathBuf> {
    corpus("")
}

/// `relative` inside the corpora (a file or a directory); `None` (after a `SKIP` line) when it
/// is not there.
///
/// The `SKIP` line names the running test (libtest names each test's thread after it) and is
/// written to the process's stderr directly, past libtest's capture, so `cargo test` shows it
/// and `scripts/test` counts it as a skipped test.
///
/// # Panics
/// When it is missing and [`corpora_required`].
pub fn corpus(relative: &str) -> Option<PathBuf> {
    let why = match std::env::var_os("STEWARD_CORPORA").filter(|v| !v.is_empty()) {
        None => "STEWARD_CORPORA is not set".to_owned(),
        Some(root) => {
            let path = PathBuf::from(root).join(relative);
            if path.exists() {
                return Some(path);
            }
            format!("{} does not exist", path.display())
        }
    };
    let test = std::thread::current().name().unwrap_or("<unnamed>").to_owned();
    assert!(
        !corpora_required(),
        "{test} needs the corpora, but {why}. With CI or STEWARD_REQUIRE_CORPORA=1 set a missing \
         corpus is a failure; point STEWARD_CORPORA at ../shared/corpora (scripts/test does)."
    );
    // One write, so the line is never interleaved with another test's output.
    let line =
        format!("SKIP {test}: {why} (scripts/test points STEWARD_CORPORA at ../shared/corpora)\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    None
}

/// A differential test's allow-list (`key<TAB>reason` lines; `#` comments and blank lines
/// skipped), by key.
///
/// # Panics
/// On a line without a tab or without a reason.
pub fn allow_list(text: &str) -> std::collections::BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (key, reason) = l.split_once('\t').unwrap_or((l, ""));
            assert!(!reason.trim().is_empty(), "{key:?}: expected key<TAB>reason");
            (key.trim().to_owned(), reason.to_owned())
        })
        .collect()
}

/// Fails unless the disagreements found are exactly the allow-listed ones: a disagreement not
/// in `list` (a regression, or a new difference to explain) and a listed one that agrees now
/// (a stale entry) both fail.
///
/// # Panics
/// As described.
pub fn check_allow_list(
    list: &str,
    allowed: &std::collections::BTreeMap<String, String>,
    disagree: &std::collections::BTreeSet<String>,
) {
    let unlisted: Vec<&String> = disagree.iter().filter(|k| !allowed.contains_key(*k)).collect();
    let stale: Vec<&String> = allowed.keys().filter(|k| !disagree.contains(*k)).collect();
    assert!(unlisted.is_empty(), "disagreements not in {list}: {unlisted:#?}");
    assert!(stale.is_empty(), "{list} entries that agree now (remove them): {stale:#?}");
}
