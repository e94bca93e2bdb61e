//! Authority benchmark: `decide` throughput, create + resolve an approval, and an audit insert
//! with redaction of a 2 KB payload. `cargo bench -p steward-core --bench authority`.

use std::time::Instant;

use schemars::JsonSchema;
use serde_json::json;
use steward_core::{
    Limits, Steward,
    approval::{NewApproval, Resolution},
    audit::{AuditEvent, AuditLog, Risk},
    policy::{DecisionContext, Effect, Level, Policy, Rule, ToolRegistry, ToolSpec, decide},
};

/// Bench input.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Input {
    /// Recipients.
    #[schemars(length(max = 50))]
    to: Vec<String>,
}

fn p50(v: Vec<f64>) -> f64 {
    quantile(v, 0.5)
}

fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q) as usize]
}

fn main() {
    let mut reg = ToolRegistry::new();
    let effects = [Effect::Read, Effect::Write { reversible: true }, Effect::Destructive];
    let mut names = Vec::new();
    for ns in ["mail", "calendar", "contacts", "docs", "trains", "shell"] {
        for (i, verb) in ["search", "read", "draft", "send", "delete", "update"].iter().enumerate()
        {
            let name = format!("{ns}.{verb}");
            let spec = ToolSpec::new::<Input>(&name, "bench tool", effects[i % 3], Level::Confirm)
                .expect("spec");
            reg.register(spec).expect("register");
            names.push(name);
        }
    }
    names.push("unknown.tool".into());
    let mut policy = Policy::default();
    policy.deny_namespace("shell").expect("prefix");
    policy.allow_reads.insert("mail.search".into());
    policy.rules.insert("docs.delete".into(), Rule::Deny { reason: "no".into() });
    policy.overrides.insert("calendar.draft".into(), Level::Auto);
    let input = json!({"to": ["a@example.org"]});
    let ctx = DecisionContext::default();
    let n = 2_000_000;
    let t = Instant::now();
    let mut gates = 0usize;
    for i in 0..n {
        let d = decide(&reg, &policy, &names[i % names.len()], &input, &ctx);
        gates += usize::from(matches!(d, steward_core::policy::Decision::Gate { .. }));
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "| `decide` ({} tools, mixed rules) | **{:.1} M decisions/s** ({gates} gates) |",
        names.len(),
        n as f64 / secs / 1e6
    );

    let dir = tempfile::tempdir().expect("tmp");
    let steward = Steward::builder().home(dir.path().join("home")).open().expect("open");
    let approvals = steward.approvals().expect("approvals");
    let me = steward.human("Ada").expect("human");
    let mut times = Vec::new();
    for i in 0..2_000i64 {
        let req = NewApproval {
            chat: Some("bench".into()),
            requested_by: "agent:bench".into(),
            tool: "mail.send".into(),
            input: json!({"to": [format!("p{i}@example.org")], "subject": "Hi", "body": "x".repeat(200)}),
            summary: "Send".into(),
            level: Level::Confirm,
            timeout_secs: None,
            taint: None,
        };
        let t = Instant::now();
        let card = approvals.request(&req, None, 1_800_000_000 + i).expect("request");
        approvals
            .resolve(card.id, &Resolution::Approve, None, &me, None, None, 1_800_000_000 + i)
            .expect("resolve");
        times.push(t.elapsed().as_secs_f64());
    }
    println!(
        "| create + resolve an approval (steward.db, audited) | **{:.2} ms p50** |",
        p50(times) * 1e3
    );

    std::fs::create_dir_all(dir.path().join("audit-only")).expect("dir");
    let log = AuditLog::open(&dir.path().join("audit-only"), &Limits::default()).expect("audit");
    let payload = json!({
        "to": ["bob@example.org", "carol@example.org"],
        "subject": "Quarterly numbers and the signed contract",
        "body": "Hello Bob, ".repeat(120),
        "summary": "Quarterly report for the board, numbers attached; see the thread with Carol. ".repeat(6),
        "headers": {"Authorization": "Bearer abcdef0123456789abcdef", "X-Mailer": "steward"},
        "note": "token=abc123def456 see https://example.org/x?sig=deadbeef",
    });
    assert!(payload.to_string().len() >= 2_048, "{}", payload.to_string().len());
    let redactor = steward_core::audit::redact::redactor();
    let mut only = Vec::new();
    for _ in 0..2_000 {
        let t = Instant::now();
        std::hint::black_box(redactor.redact(&payload));
        only.push(t.elapsed().as_secs_f64());
    }
    println!("| redaction alone, same payload | {:.1} µs p50 |", p50(only) * 1e6);
    let mut times = Vec::new();
    for i in 0..5_000i64 {
        let t = Instant::now();
        log.record(&AuditEvent {
            actor: "agent:bench",
            event_type: "tool.call",
            risk: Risk::Medium,
            chat: Some("bench"),
            tool: Some("mail.send"),
            correlation_id: None,
            payload: &payload,
            at: i,
        });
        times.push(t.elapsed().as_secs_f64());
    }
    println!(
        "| audit insert with redaction, {} B payload | **{:.1} µs p50** ({:.1} µs p99, checkpoints included) |",
        payload.to_string().len(),
        quantile(times.clone(), 0.5) * 1e6,
        quantile(times, 0.99) * 1e6
    );

    // Journal: append an operation (audited) and move it to backend_returned (audited).
    std::fs::create_dir_all(dir.path().join("journal")).expect("dir");
    let home = dir.path().join("journal");
    let steward = steward_core::Steward::builder().home(&home).open().expect("open");
    let journal = steward.journal().expect("journal");
    let mut times = Vec::new();
    for i in 0..2_000i64 {
        let t = Instant::now();
        let op = journal
            .record(
                &steward_core::journal::NewOperation {
                    kind: "mail.send".into(),
                    idempotency_key: format!("bench-{i}"),
                    input: json!({"to": ["bob@example.org"], "subject": "Numbers", "body": "Hello Bob, ".repeat(100)}),
                    expected: json!({"message_id": format!("{i}@steward.local")}),
                    approval_id: Some(i),
                    scheduled_for: None,
                },
                i,
            )
            .expect("record");
        journal
            .transition(
                op.id,
                steward_core::journal::OpState::BackendReturned,
                &steward_core::journal::OpUpdate {
                    backend_result: Some(json!({"smtp": "250 2.0.0 OK"})),
                    ..Default::default()
                },
                i,
            )
            .expect("transition");
        times.push(t.elapsed().as_secs_f64());
    }
    println!(
        "| journal append + transition (ops.db, both audited) | **{:.2} ms p50** |",
        p50(times) * 1e3
    );
}
