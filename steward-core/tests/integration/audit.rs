//! Audit: redaction anchored on the gitleaks rule set — one synthetic secret per rule, planted
//! in tool arguments, headers and error text, must leave no finding in the stored rows — and
//! benign identifiers must survive.

use proptest::{
    strategy::{Strategy, ValueTree},
    test_runner::{Config, RngAlgorithm, TestRng, TestRunner},
};
use regex::{Regex, RegexBuilder};
use serde_json::{Value, json};
use steward_core::{
    Limits,
    audit::{AuditEvent, AuditLog, AuditQuery, Risk, redact::redactor},
};

#[derive(serde::Deserialize)]
struct File {
    rules: Vec<RuleDef>,
}

#[derive(serde::Deserialize)]
struct RuleDef {
    id: String,
    regex: Option<String>,
    #[serde(default)]
    keywords: Vec<String>,
}

/// A rule as gitleaks applies it: a finding needs one keyword (case-insensitive) and a match.
struct Rule {
    id: String,
    re: Regex,
    src: String,
    keywords: Vec<String>,
}

impl Rule {
    fn finds(&self, text: &str) -> bool {
        let lower = text.to_lowercase();
        (self.keywords.is_empty() || self.keywords.iter().any(|k| lower.contains(k.as_str())))
            && self.re.is_match(text)
    }
}

fn rules() -> Vec<Rule> {
    let file: File =
        toml::from_str(include_str!("../../data/gitleaks/gitleaks.toml")).expect("gitleaks.toml");
    file.rules
        .into_iter()
        .filter_map(|r| {
            let src = r.regex?;
            let re = RegexBuilder::new(&src).size_limit(64 << 20).build().ok()?;
            let keywords = r.keywords.iter().map(|k| k.to_lowercase()).collect();
            Some(Rule { id: r.id, re, src, keywords })
        })
        .collect()
}

/// A pattern a string generator can use: no case flag, anchors, word boundaries or laziness.
fn generable(src: &str) -> String {
    src.replace("(?i)", "")
        .replace("\\b", "")
        .replace("\\z", "")
        .replace("}?", "}")
        .replace("*?", "*")
        .replace("+?", "+")
        .replace("??", "?")
        .replace("|$)", ")")
        .replace("(?:$|", "(?:")
        .trim_start_matches('^')
        .trim_end_matches('$')
        .to_owned()
}

/// A string the rule matches, from its own regex (regenerated, not copied).
/// Planted after the rule's first keyword, as secrets appear in text ("facebook token: …").
fn sample(rule: &Rule, runner: &mut TestRunner) -> Option<String> {
    let strategy = proptest::string::string_regex(&generable(&rule.src)).ok()?;
    let kw = rule.keywords.first().map_or("", String::as_str);
    for _ in 0..50 {
        let s = strategy.new_tree(runner).ok()?.current();
        let planted = format!("{kw}: {s} ");
        if rule.finds(&planted) && !s.contains('\n') {
            return Some(planted);
        }
    }
    eprintln!("no sample for {}", rule.id);
    None
}

#[test]
fn planted_secrets_leave_no_finding_and_benign_ids_survive() {
    let rules = rules();
    assert!(rules.len() >= 218, "{} rules compiled", rules.len());
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open(dir.path(), &Limits::default()).unwrap();
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    let mut planted = 0;
    for rule in &rules {
        let Some(secret) = sample(rule, &mut runner) else { continue };
        planted += 1;
        let payload = json!({
            "to": ["bob@example.org"],
            "note": format!("here it is {secret} ok"),
            "headers": {"X-Trace": format!(" {secret} ")},
            "body": format!("{secret} and more text"),
            "list": [format!(" {secret} ")],
        });
        log.record(&AuditEvent {
            actor: "agent:assistant",
            event_type: "tool.error",
            risk: Risk::High,
            chat: Some("c1"),
            tool: Some("mail.send"),
            correlation_id: None,
            payload: &payload,
            at: 1,
        });
    }
    // The usual suspects beyond gitleaks.
    let extra = json!({
        "Authorization": "Bearer abcdef0123456789abcdef",
        "header": "Authorization: Bearer abcdef0123456789abcdef",
        "smtp": "smtp://mario:s3cr3t-pass@mail.example.it:587",
        "imap_password": "hunter2hunter2",
        "error": "login failed: password=Tr0ub4dor&3 for user mario",
        "url": "https://api.example.com/v1?api_key=ZXhhbXBsZWtleQ&page=2",
        "openai": "sk-proj-abcdefghijklmnopqrstuvwx",
        "pem": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx\n-----END RSA PRIVATE KEY-----",
    });
    log.record(&AuditEvent {
        actor: "agent:assistant",
        event_type: "tool.error",
        risk: Risk::High,
        chat: None,
        tool: Some("mail.send"),
        correlation_id: None,
        payload: &extra,
        at: 2,
    });
    assert_eq!(log.failures(), 0);
    // Re-scan what was written with the same rules.
    let stored = log.query(&AuditQuery { limit: 200, ..AuditQuery::default() }).unwrap();
    let mut rows = stored;
    let more = log.query(&AuditQuery { limit: 200, offset: 200, ..AuditQuery::default() }).unwrap();
    rows.extend(more);
    assert_eq!(rows.len(), planted + 1);
    let mut findings = Vec::new();
    for row in &rows {
        let text = row.payload.to_string();
        for rule in &rules {
            if rule.finds(&text) {
                findings.push((rule.id.clone(), text.chars().take(160).collect::<String>()));
            }
        }
    }
    eprintln!("planted {planted} rule samples (+ Bearer, URL credentials, password=, sk-, PEM)");
    assert!(
        findings.is_empty(),
        "{} findings: {:?}",
        findings.len(),
        &findings[..findings.len().min(5)]
    );
    let last = &rows[0].payload;
    for leaked in [
        "abcdef0123456789abcdef",
        "s3cr3t-pass",
        "hunter2",
        "Tr0ub4dor",
        "ZXhhbXBsZWtleQ",
        "abcdefghijklmnop",
        "MIIEow",
    ] {
        assert!(!last.to_string().contains(leaked), "{leaked} leaked: {last}");
    }
    assert_eq!(last["url"], "https://api.example.com/v1?api_key=[REDACTED]&page=2");
    // Benign identifiers: < 1% changed.
    let mut benign: Vec<String> = Vec::new();
    for i in 0..200u64 {
        benign.push(format!("<{:x}.{i}@mail.example.org>", i * 7_919));
        benign.push(format!(
            "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
            i * 12_345,
            i,
            i,
            i,
            i * 99_991
        ));
        benign.push(format!("S{:05}", 1_700 + i));
        benign.push(format!("{}", 1_764_000_000_123u64 + i * 1_001));
        benign.push(format!("{:064x}", (i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)));
    }
    let r = redactor();
    let changed = benign.iter().filter(|b| r.mask_text(b) != **b).count();
    eprintln!("benign identifiers changed: {changed} of {}", benign.len());
    assert!(changed * 100 < benign.len(), "{changed} of {} benign ids mangled", benign.len());
}

#[test]
fn structure_caps_and_queries() {
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open(dir.path(), &Limits::default()).unwrap();
    let long = "x".repeat(5_000);
    let mut deep = json!("bottom");
    for _ in 0..20 {
        deep = json!({ "d": deep });
    }
    let payload = json!({
        "body": long,
        "subject": long,
        "password": "p",
        "items": (0..100).collect::<Vec<_>>(),
        "deep": deep,
        "maybe_token": null,
    });
    assert!(log.record(&AuditEvent {
        actor: "Ada",
        event_type: "approval.resolved",
        risk: Risk::Medium,
        chat: Some("c1"),
        tool: Some("mail.send"),
        correlation_id: Some("op-1"),
        payload: &payload,
        at: 100,
    }));
    let rows = log.query(&AuditQuery::default()).unwrap();
    let p = &rows[0].payload;
    assert_eq!(p["body"].as_str().unwrap().chars().count(), 120);
    assert_eq!(p["subject"].as_str().unwrap().chars().count(), 600);
    assert_eq!(p["password"], "[REDACTED]");
    assert_eq!(p["maybe_token"], Value::Null, "absent stays absent");
    assert_eq!(p["items"].as_array().unwrap().len(), 33);
    assert!(p.to_string().contains("[depth limit]"));
    let q = |f: &dyn Fn(&mut AuditQuery)| {
        let mut q = AuditQuery::default();
        f(&mut q);
        log.query(&q).unwrap().len()
    };
    assert_eq!(q(&|q| q.actor = Some("Ada".into())), 1);
    assert_eq!(q(&|q| q.actor = Some("Bob".into())), 0);
    assert_eq!(q(&|q| q.risk = Some("medium".into())), 1);
    assert_eq!(q(&|q| q.after = Some(101)), 0);
    assert_eq!(q(&|q| q.text = Some("REDACTED".into())), 1);
    assert_eq!(q(&|q| q.text = Some("100%_".into())), 0);
    assert!(log.query(&AuditQuery { limit: 201, ..AuditQuery::default() }).is_err());
}

#[test]
fn a_secret_across_the_cut_is_masked_before_the_cut() {
    let r = redactor();
    // The token starts just before the 600-character cut of a plain string and the
    // 120-character snippet of a body; either way no part of it may survive.
    let note = format!("{} token=supersecretvalue123456 and more text", "a".repeat(590));
    let body = format!(
        "{} Authorization: Bearer abcdefghijklmnop0123456789 {}",
        "b".repeat(100),
        "c".repeat(5_000)
    );
    let out = r.redact(&json!({"note": note, "body": body}));
    let text = out.to_string();
    assert!(!text.contains("supersec") && !text.contains("abcdefgh"), "{text}");
    assert!(out["note"].as_str().unwrap().chars().count() <= 600);
    assert!(out["body"].as_str().unwrap().chars().count() <= 120);
}
