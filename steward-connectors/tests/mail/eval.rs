//! Retrieval evaluation over a real mirror and index: labeled queries scored by the core.

use steward_connectors::mail::MaildirSource;
use steward_core::{StewardError, eval::parse_cases, mirror::SyncOptions};

use super::fixtures::{Mail, steward, write};

#[test]
fn labeled_queries_are_scored_per_kind_and_bad_cases_are_typed() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    let mails = [
        ("tax-1@x", "Tax return documents from the accountant", "Please sign the tax return."),
        ("tax-2@x", "Re: Tax return documents from the accountant", "Signed, attached."),
        ("trip-1@x", "Train tickets to Milan", "Platform 7, coach 5."),
        ("dinner-1@x", "Dinner on Friday", "At eight, the usual place."),
    ];
    for (i, (id, subject, body)) in mails.iter().enumerate() {
        let mut m = Mail::new(id, subject, "Tue, 01 Dec 2026 10:00:00 +0000");
        m.body = body;
        write(&md.join(format!("cur/{i}:2,S")), &m.bytes(), 1_790_000_000 + i as i64);
    }
    let s = steward(dir.path());
    let opts = SyncOptions { account: Some("a".into()), cancel: None };
    s.sync_mail(&MaildirSource::new(&md), &opts, &mut |_| {}).unwrap();

    let cases = parse_cases(
        r#"
{"kind": "exact", "request": {"text": "train tickets milan"}, "expected": ["<trip-1@x>"]}
{"kind": "exact", "request": {"text": "dinner friday"}, "expected": ["dinner-1@x"], "k": 5}
{"kind": "thread", "request": {"text": "tax return", "per_message": true}, "expected": ["tax-1@x", "tax-2@x"]}
{"kind": "miss", "request": {"text": "quarterly board minutes"}, "expected": ["trip-1@x"]}
"#,
    )
    .unwrap();
    let r = s.eval_retrieval(&cases).unwrap();
    assert_eq!(r.cases.len(), 4);
    assert_eq!((r.cases[0].hit_ranks.clone(), r.cases[0].reciprocal_rank), (vec![1], 1.0));
    assert_eq!(r.cases[1].k, 5);
    assert_eq!(r.cases[2].recall, 1.0, "{:?}", r.cases[2]);
    assert!((r.cases[2].ndcg - 1.0).abs() < 1e-12, "both relevant at ranks 1 and 2");
    assert_eq!((r.cases[3].recall, r.cases[3].reciprocal_rank, r.cases[3].ndcg), (0.0, 0.0, 0.0));
    assert_eq!(r.by_kind["exact"].cases, 2);
    assert_eq!(r.by_kind["exact"].mrr, 1.0);
    assert_eq!(r.by_kind["miss"].recall, 0.0);
    assert!((r.overall.recall - 0.75).abs() < 1e-12, "{:?}", r.overall);

    // Typed errors name the case.
    let err = parse_cases("{\"request\": {}, \"expected\": [\"a@x\"]}\n{nope").unwrap_err();
    assert_eq!(err.code(), "EVAL_BAD_CASE");
    assert!(err.to_string().starts_with("case 2:"), "{err}");
    let no_labels = parse_cases("{\"request\": {\"text\": \"x\"}, \"expected\": []}").unwrap();
    assert_eq!(s.eval_retrieval(&no_labels).unwrap_err().code(), "EVAL_BAD_CASE");
    let big_k =
        parse_cases("{\"request\": {\"text\": \"x\"}, \"expected\": [\"a@x\"], \"k\": 1000}")
            .unwrap();
    assert_eq!(s.eval_retrieval(&big_k).unwrap_err().code(), "EVAL_BAD_CASE");
}
