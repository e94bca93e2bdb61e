//! Steward's iCalendar reading against Python `icalendar`'s on every calendar of the corpora
//! (`oracles/ics_python_icalendar.jsonl`): per file, whether it is read at all, and its
//! events' UID, SUMMARY, DTSTART (a date, a floating wall-clock time, or the instant a zoned
//! or UTC time names) and whether it repeats. A file `icalendar` refuses agrees when Steward
//! reads no event from it (it reports per-item errors instead of refusing the whole file). Every file where the
//! two disagree is in `ics-allowlist.txt` with its reason; the test fails on a disagreement
//! not listed there and on a listed one that no longer disagrees. It prints the agreement.

use std::collections::BTreeSet;

use steward_connectors::{
    calendar::read_ics,
    testing::{allow_list, check_allow_list, corpus},
};
use steward_core::calendar::{Event, EventTime};

const ALLOWED: &str = include_str!("ics-allowlist.txt");

/// An event as the oracle records it: UID, SUMMARY, DTSTART, repeats.
type Seen = (Option<String>, Option<String>, String, bool);

fn dtstart(t: &EventTime) -> String {
    match t {
        EventTime::Date(d) => d.format("%Y-%m-%d").to_string(),
        EventTime::Floating(w) => w.format("%Y-%m-%dT%H:%M:%S").to_string(),
        EventTime::Utc(w) => w.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        EventTime::Zoned(_, _) => utc(t.instant(chrono_tz::Tz::UTC)),
    }
}

fn utc(t: chrono::DateTime<chrono::FixedOffset>) -> String {
    t.naive_utc().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn ours(e: &Event) -> Seen {
    // A UID Steward made for an event without one is not the source's.
    let uid = Some(e.uid.clone()).filter(|u| !u.starts_with("steward-"));
    let summary = Some(e.summary.clone()).filter(|s| !s.is_empty());
    (uid, summary, dtstart(&e.start), e.recurrence.rule.is_some())
}

fn theirs(v: &serde_json::Value) -> Option<Seen> {
    let s = |k: &str| v[k].as_str().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    // A time with an offset is compared as the instant it names.
    let start = v["dtstart"].as_str()?;
    let start = chrono::DateTime::parse_from_rfc3339(start).map_or_else(|_| start.to_owned(), utc);
    Some((s("uid"), s("summary"), start, v["has_rrule"] == true))
}

#[test]
fn steward_reads_the_corpora_calendars_like_python_icalendar_or_says_why_not() {
    let Some(oracle) = corpus("oracles/ics_python_icalendar.jsonl") else { return };
    let root = oracle.parent().and_then(|p| p.parent()).unwrap().to_owned();
    let allowed = allow_list(ALLOWED);
    let verbose = std::env::var_os("STEWARD_DIFF_VERBOSE").is_some();
    let (mut files, mut events, mut events_agree) = (0, 0, 0);
    let mut disagree = BTreeSet::new();
    for line in std::fs::read_to_string(&oracle).unwrap().lines() {
        let rec: serde_json::Value = serde_json::from_str(line).unwrap();
        let file = rec["file"].as_str().unwrap().to_owned();
        files += 1;
        let bytes = std::fs::read(root.join(&file)).unwrap();
        let read = read_ics(&String::from_utf8_lossy(&bytes));
        let a: BTreeSet<Seen> = match &read {
            // The oracle keeps the first 50 events of a file.
            Ok(r) => r.events.iter().take(50).map(ours).collect(),
            Err(_) => BTreeSet::new(),
        };
        let b: BTreeSet<Seen> = match rec["events"].as_array() {
            Some(evs) if rec["ok"] == true => evs.iter().filter_map(theirs).collect(),
            _ => BTreeSet::new(),
        };
        events += b.len();
        events_agree += b.intersection(&a).count();
        let same = a == b;
        if verbose && !same {
            let only = |x: &BTreeSet<Seen>, y: &BTreeSet<Seen>| {
                x.difference(y).cloned().collect::<Vec<_>>()
            };
            eprintln!(
                "{file}:\n  only icalendar {:?}\n  only steward   {:?}\n  errors {:?}",
                only(&b, &a),
                only(&a, &b),
                read.as_ref().map(|r| &r.errors)
            );
        }
        if !same {
            disagree.insert(file);
        }
    }
    assert!(files >= 200, "the oracle covers the corpora's calendars: {files}");
    eprintln!(
        "iCalendar: Steward agrees with Python icalendar on {} of {files} files; {events_agree} of {events} events",
        files - disagree.len()
    );
    check_allow_list("ics-allowlist.txt", &allowed, &disagree);
}
