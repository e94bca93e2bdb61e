//! Steward's recurrence expansion against the 146 RRULE → instances cases of libical's
//! `icalrecur_test.txt` (`../shared/corpora/libical-recur`, found through `STEWARD_CORPORA`):
//! libical is the ground truth; every case where Steward disagrees is in `recur-allowlist.txt`
//! with its reason, and the test fails on a disagreement not listed there and on a listed one
//! that no longer disagrees. It prints the agreement.

use std::collections::BTreeSet;

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use steward_connectors::testing::{allow_list, check_allow_list, corpus};
use steward_core::calendar::first_walls;

const ALLOWED: &str = include_str!("recur-allowlist.txt");

/// One case: its line (of the RRULE), rule, start, optional START-AT, expected instances
/// (`None`: libical refuses the rule).
struct Case {
    line: usize,
    rule: String,
    dtstart: String,
    start_at: Option<String>,
    instances: Option<Vec<String>>,
}

fn cases(text: &str) -> Vec<Case> {
    let mut out = Vec::new();
    let mut cur: Option<Case> = None;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        if line.is_empty() {
            out.extend(cur.take());
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (k, v) = line.split_once(':').unwrap_or((line, ""));
        let c = cur.get_or_insert_with(|| Case {
            line: n + 1,
            rule: String::new(),
            dtstart: String::new(),
            start_at: None,
            instances: None,
        });
        match k {
            "RRULE" => c.rule = v.to_owned(),
            "DTSTART" => c.dtstart = v.trim().to_owned(),
            "START-AT" => c.start_at = Some(v.trim().to_owned()),
            "INSTANCES" => {
                let v = v.trim();
                c.instances = (!v.starts_with("***") && !v.is_empty())
                    .then(|| v.split(',').map(|s| s.trim().to_owned()).collect());
            }
            _ => {}
        }
    }
    out.extend(cur);
    out
}

/// A libical time (`YYYYMMDD`, `YYYYMMDDTHHMMSS`, `…Z`) as a wall-clock time.
fn wall(s: &str) -> Option<NaiveDateTime> {
    let s = s.trim_end_matches('Z');
    NaiveDate::parse_from_str(s, "%Y%m%d")
        .map(|d| d.and_time(NaiveTime::MIN))
        .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y%m%dT%H%M%S"))
        .ok()
}

/// A wall-clock time written like `like` (a date, or a date-time with `Z` when it had one).
fn write(w: NaiveDateTime, like: &str) -> String {
    if like.len() == 8 {
        w.format("%Y%m%d").to_string()
    } else if like.ends_with('Z') {
        w.format("%Y%m%dT%H%M%SZ").to_string()
    } else {
        w.format("%Y%m%dT%H%M%S").to_string()
    }
}

#[test]
fn steward_agrees_with_libical_on_its_recurrence_cases_or_says_why_not() {
    let Some(path) = corpus("libical-recur/icalrecur_test.txt") else { return };
    let text = std::fs::read_to_string(path).unwrap();
    let cases = cases(&text);
    assert_eq!(cases.len(), 146, "libical's recurrence cases");
    let allowed = allow_list(ALLOWED);
    let mut disagree: BTreeSet<String> = BTreeSet::new();
    let verbose = std::env::var_os("STEWARD_DIFF_VERBOSE").is_some();
    for c in &cases {
        let start = wall(&c.dtstart).expect("a DTSTART");
        let n = c.instances.as_ref().map_or(1, |i| i.len() + 1);
        let ours = first_walls(start, c.dtstart.len() == 8, &c.rule, n).map(|ws| {
            let from = c.start_at.as_deref().and_then(wall);
            ws.into_iter()
                .filter(|w| from.is_none_or(|f| *w >= f))
                .map(|w| write(w, &c.dtstart))
                .collect::<Vec<_>>()
        });
        let theirs = c.instances.as_ref().map(|i| {
            let from = c.start_at.as_deref().and_then(wall);
            i.iter()
                .filter(|s| from.is_none_or(|f| wall(s).is_some_and(|w| w >= f)))
                .cloned()
                .collect::<Vec<_>>()
        });
        let same = match (&ours, &theirs) {
            (Ok(a), Some(b)) => a == b,
            (Err(_), None) => true,
            _ => false,
        };
        if !same {
            disagree.insert(c.line.to_string());
            if verbose {
                eprintln!(
                    "line {} {} from {}:\n  libical {:?}\n  steward {:?}",
                    c.line, c.rule, c.dtstart, theirs, ours
                );
            }
        }
    }
    let agree = cases.len() - disagree.len();
    eprintln!(
        "recurrence: Steward agrees with libical on {agree} of {} cases ({:.1} %)",
        cases.len(),
        100.0 * agree as f64 / cases.len() as f64
    );
    check_allow_list("recur-allowlist.txt", &allowed, &disagree);
}
