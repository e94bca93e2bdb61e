//! Differential test: for every message of the CPython, mail-parser and Apple emlx corpora,
//! subject, from, to, cc, date, message-id, attachment names and normalized body text must agree
//! with Python's `email` package (the oracle outputs in `corpora/oracles`, `*/expected_python_email.jsonl`)
//! on ≥ 99% of fields. Every disagreement must be listed, with its reason, in
//! `tests/mail/differential-allowlist.txt`; a listed entry that now agrees fails the test too, so
//! the list stays honest.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use serde_json::Value;
use steward_connectors::mail::{
    emlx::frame_emlx,
    mime::{MessageContext, parse_message},
};
use steward_core::{
    Limits,
    mirror::{ParseLimits, ParsedMessage},
};

use super::fixtures::with_corpora;

const SETS: [(&str, &str); 3] = [
    ("cpython-email", "cpython-email/expected_python_email.jsonl"),
    ("stalwart-mail-parser", "stalwart-mail-parser/expected_python_email.jsonl"),
    ("apple-emlx", "apple-emlx/expected_python_email.jsonl"),
];

fn parse_file(path: &Path) -> Option<ParsedMessage> {
    let bytes = std::fs::read(path).expect("corpus file");
    let limits = ParseLimits::from(&Limits::default());
    let ctx = MessageContext::default();
    if path.to_string_lossy().ends_with(".emlx") {
        let frame = frame_emlx(&bytes).ok()?;
        parse_message(frame.message, &ctx, &limits, None).ok()
    } else {
        parse_message(&bytes, &ctx, &limits, None).ok()
    }
}

/// Python writes undecodable bytes as lone surrogates (`\udc80`–`\udcff`), which JSON parsers
/// reject; they become U+FFFD, as a Rust decoder would produce.
fn replace_lone_surrogates(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find("\\udc") {
        let (before, after) = rest.split_at(i);
        let high_before = before.len() >= 6
            && before[before.len() - 6..].to_ascii_lowercase().starts_with("\\ud")
            && matches!(
                before.as_bytes()[before.len() - 3],
                b'8' | b'9' | b'a' | b'b' | b'A' | b'B'
            );
        out.push_str(before);
        if high_before {
            out.push_str(&after[..6]);
        } else {
            out.push_str("\\ufffd");
        }
        rest = &after[6..];
    }
    out.push_str(rest);
    out
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn norm_body(s: &str) -> String {
    let s = s.replace("\r\n", "\n");
    let lines: Vec<&str> = s.lines().map(str::trim_end).collect();
    lines.join("\n").trim().to_owned()
}

fn oracle_addrs(v: &Value) -> Vec<(String, String)> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| {
                    let addr = x.get("addr")?.as_str()?.trim().to_lowercase();
                    if addr.is_empty() {
                        return None;
                    }
                    let name =
                        x.get("name").and_then(Value::as_str).map(squash).unwrap_or_default();
                    Some((name, addr))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn our_addrs(list: &[steward_core::mirror::Address]) -> Vec<(String, String)> {
    list.iter()
        .map(|a| (a.name.as_deref().map(squash).unwrap_or_default(), a.addr.trim().to_lowercase()))
        .collect()
}

fn iso_to_unix(s: &str) -> Option<i64> {
    // YYYY-MM-DDTHH:MM:SS[.ffffff]±HH:MM
    let b = s.as_bytes();
    if b.len() < 25 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let tz = &s[s.len() - 6..];
    let sign = if tz.starts_with('-') { -1 } else { 1 };
    let off = sign * (tz[1..3].parse::<i64>().ok()? * 3600 + tz[4..6].parse::<i64>().ok()? * 60);
    let (yy, mm) = if mo <= 2 { (y - 1, mo + 9) } else { (y, mo - 3) };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * mm + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + se - off)
}

/// Compares one message; returns the names of the fields that disagree.
fn compare(o: &Value, m: Option<&ParsedMessage>) -> (usize, Vec<&'static str>) {
    let Some(m) = m else {
        return (1, vec!["parse"]);
    };
    let mut bad = Vec::new();
    let mut n = 0;
    let mut check = |field: &'static str, ok: bool| {
        n += 1;
        if !ok {
            bad.push(field);
        }
    };
    let subj = o.get("subject").and_then(Value::as_str).map(squash);
    check(
        "subject",
        subj == m
            .subject
            .as_deref()
            .map(squash)
            .filter(|s| !s.is_empty())
            .or(if subj.as_deref() == Some("") { Some(String::new()) } else { None }),
    );
    check("from", oracle_addrs(&o["from"]) == our_addrs(&m.from));
    check("to", oracle_addrs(&o["to"]) == our_addrs(&m.to));
    check("cc", oracle_addrs(&o["cc"]) == our_addrs(&m.cc));
    let date = match &o["date"] {
        Value::String(s) => iso_to_unix(s),
        _ => None,
    };
    check("date", date == m.date);
    let mid = o
        .get("message_id")
        .and_then(Value::as_str)
        .map(|s| s.trim().trim_start_matches('<').trim_end_matches('>').trim().to_owned())
        .filter(|s| !s.is_empty());
    check("message_id", mid == m.message_id);
    // Python's iter_attachments() lists only direct children of the top-level multipart; the
    // mirror lists every attachment however deep. Agreement: we list every name Python lists,
    // and every extra name we list is a named part Python saw too (its `parts` walk).
    let listed: BTreeSet<String> = o["attachments"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let walked: BTreeSet<String> = o["parts"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p.get("filename").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let ours: BTreeSet<String> = m.attachments.iter().filter_map(|a| a.name.clone()).collect();
    check(
        "attachments",
        listed.is_subset(&ours) && ours.is_subset(&walked.union(&listed).cloned().collect()),
    );
    if let Some(body) = o.get("body_text_plain").and_then(Value::as_str) {
        check("body", norm_body(body) == norm_body(&m.body_text));
    }
    (n, bad)
}

#[test]
fn agrees_with_python_email_on_99_percent_of_fields() {
    with_corpora(|root| {
        let allow_text = include_str!("differential-allowlist.txt");
        let mut allowed: BTreeMap<(String, String), String> = BTreeMap::new();
        for line in allow_text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
            let mut parts = line.splitn(3, '\t');
            let (Some(file), Some(field), Some(reason)) =
                (parts.next(), parts.next(), parts.next())
            else {
                panic!("malformed allow-list line: {line:?}");
            };
            assert!(!reason.trim().is_empty(), "allow-list entry without a reason: {line}");
            allowed.insert((file.to_owned(), field.to_owned()), reason.to_owned());
        }
        let (mut fields, mut disagreements) = (0usize, BTreeSet::new());
        let mut messages = 0;
        for (dir, jsonl) in SETS {
            let text = std::fs::read_to_string(root.join(jsonl)).expect("oracle file");
            for line in text.lines() {
                let o: Value =
                    serde_json::from_str(&replace_lone_surrogates(line)).expect("oracle json");
                let rel = o["file"].as_str().expect("file").trim_start_matches("./");
                let path = root.join(dir).join(rel);
                let parsed = parse_file(&path);
                let key = format!("{dir}/{rel}");
                if o.get("fatal").is_some() {
                    // Python could not read it at all: we must reject it too, not invent a message.
                    fields += 1;
                    if parsed.is_some() {
                        disagreements.insert((key, "fatal".to_owned()));
                    }
                    continue;
                }
                messages += 1;
                let (n, bad) = compare(&o, parsed.as_ref());
                fields += n;
                if std::env::var_os("STEWARD_DIFF_VERBOSE").is_some()
                    && !bad.is_empty()
                    && let Some(m) = &parsed
                {
                    eprintln!(
                        "== {key} {bad:?}\n oracle: subject={} from={} to={} cc={} att={} body={:?}\n ours:   subject={:?} from={:?} to={:?} cc={:?} att={:?} body={:?}",
                        o["subject"],
                        o["from"],
                        o["to"],
                        o["cc"],
                        o["attachments"],
                        o["body_text_plain"]
                            .as_str()
                            .map(|b| b.chars().take(160).collect::<String>()),
                        m.subject,
                        m.from,
                        m.to,
                        m.cc,
                        m.attachments.iter().map(|a| a.name.clone()).collect::<Vec<_>>(),
                        m.body_text.chars().take(160).collect::<String>()
                    );
                }
                for f in bad {
                    disagreements.insert((key.clone(), f.to_owned()));
                }
            }
        }
        let unlisted: Vec<_> = disagreements.iter().filter(|k| !allowed.contains_key(*k)).collect();
        let stale: Vec<_> = allowed.keys().filter(|k| !disagreements.contains(*k)).collect();
        let agree = fields - disagreements.len();
        let rate = agree as f64 / fields as f64;
        eprintln!(
            "differential: {messages} messages, {fields} fields, {} disagreements, agreement {:.2}%",
            disagreements.len(),
            rate * 100.0
        );
        assert!(messages >= 170, "expected the whole corpus, saw {messages} messages");
        assert!(
            unlisted.is_empty(),
            "disagreements missing from the allow-list:\n{}",
            unlisted.iter().map(|(f, k)| format!("{f}\t{k}")).collect::<Vec<_>>().join("\n")
        );
        assert!(stale.is_empty(), "allow-list entries that now agree (remove them): {stale:?}");
        assert!(rate >= 0.99, "agreement {rate:.4} is below 99%");
    });
}

#[test]
fn mbox_oracle_payloads_per_flavour() {
    use steward_connectors::mail::mbox::{MboxFlavor, split_mbox};
    with_corpora(|root| {
        let dir = root.join("oracles/mbox");
        // Python's mailbox module is mboxo: bodies stay as written.
        let file = std::fs::File::open(dir.join("synthetic_from_quoting.mbox")).expect("mbox");
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("synthetic_from_quoting.expected.json"))
                .expect("json"),
        )
        .expect("json");
        let mut got = Vec::new();
        split_mbox(std::io::BufReader::new(file), MboxFlavor::Mboxo, u64::MAX, |m, _| got.push(m))
            .expect("split");
        let exp = expected.as_array().expect("array");
        assert_eq!(got.len(), exp.len());
        for (g, e) in got.iter().zip(exp) {
            let text = String::from_utf8_lossy(&g.bytes);
            let body = text.split_once("\n\n").map(|x| x.1).unwrap_or_default();
            assert_eq!(body, e["payload"].as_str().expect("payload"));
        }
        // The CPython messages written into one mbox come back one for one, subjects intact.
        let file = std::fs::File::open(dir.join("cpython_msgs.mbox")).expect("mbox");
        let mut msgs = Vec::new();
        split_mbox(std::io::BufReader::new(file), MboxFlavor::Mboxo, u64::MAX, |m, _| msgs.push(m))
            .expect("split");
        let exp: Vec<Value> = std::fs::read_to_string(dir.join("cpython_msgs.expected.jsonl"))
            .expect("jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        assert_eq!(msgs.len(), exp.len());
        let limits = ParseLimits::from(&Limits::default());
        let mut agree = 0;
        for (m, e) in msgs.iter().zip(&exp) {
            let p =
                parse_message(&m.bytes, &MessageContext::default(), &limits, None).expect("parses");
            let want = e["subject"].as_str().map(squash);
            if p.subject.as_deref().map(squash) == want {
                agree += 1;
            }
        }
        assert_eq!(agree, exp.len(), "subjects from the mbox");
    });
}
