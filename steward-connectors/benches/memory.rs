//! Memory at 10,000 notes (markdown files written as a person or an import would leave them):
//! a cold index from the files, an unchanged reconcile, warm `memory_search` (p50 and p95 of
//! `RUNS` questions), forgetting one subject (receipt included); then a mail → memory
//! promotion pass over a 40,000-message demo mailbox with no model configured, which is the
//! hash and the deterministic prefilter of every thread active in the last 30 days (threads
//! per second), and a second, unchanged pass.
//!
//! `cargo bench -p steward-connectors --bench memory` (`scripts/bench memory`).

use std::time::{Duration, Instant};

use steward_connectors::mail::{
    MaildirSource,
    demo::{DemoOptions, generate_maildir},
};
use steward_core::{
    Steward,
    memory::{ForgetSelector, MemoryQuery},
    mirror::SyncOptions,
};

const NOTES: usize = 10_000;
const SUBJECTS: usize = 500;
const RUNS: usize = 300;
const MESSAGES: usize = 40_000;

const WORDS: &[&str] = &[
    "birthday",
    "dentist",
    "office",
    "bicycle",
    "garden",
    "roof",
    "invoice",
    "school",
    "lease",
    "holiday",
    "allergy",
    "coffee",
    "tea",
    "piano",
    "football",
    "doctor",
    "bank",
    "insurance",
    "car",
    "train",
    "flight",
    "hotel",
    "wedding",
    "project",
    "budget",
    "meeting",
    "recipe",
    "vegetarian",
    "museum",
    "library",
    "passport",
    "apartment",
    "plumber",
    "electrician",
    "kindergarten",
    "gym",
    "swimming",
    "concert",
    "theatre",
    "pharmacy",
    "vet",
    "cat",
    "dog",
    "lawyer",
    "accountant",
    "tax",
    "pension",
    "mortgage",
    "boat",
    "mountain",
];

fn id(i: usize) -> String {
    const A: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut n = i as u64 * 2_654_435_761 + 97;
    let mut s = String::from("m");
    for _ in 0..12 {
        s.push(A[(n % 32) as usize] as char);
        n /= 32;
        n += 7919 * (i as u64 + 1);
    }
    s
}

fn note(i: usize) -> String {
    let w = |k: usize| WORDS[(i * 7 + k * 13 + i / 3) % WORDS.len()];
    format!(
        "---\nid: {}\nkind: fact\nsubject: person:p{}@example.org\ncreated: 2026-01-01T00:00:00Z\n\
         sources:\n- type: mail\n  message_id: n{i}@example.org\n  quote: about the {} and the {}\n\
         proposed_by: memory-promoter\nreview:\n  by: ada\n  at: 2026-01-02T00:00:00Z\n  \
         decision: accepted\n---\n\nPerson {} mentioned the {} near the {}; note {i} also says \
         the {} matters for the {}.\n",
        id(i),
        i % SUBJECTS,
        w(0),
        w(1),
        i % SUBJECTS,
        w(0),
        w(1),
        w(2),
        w(3)
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let notes = home.join("memory/notes");
    std::fs::create_dir_all(&notes).expect("notes dir");
    for i in 0..NOTES {
        std::fs::write(notes.join(format!("note-{i}-{}.md", id(i))), note(i)).expect("write note");
    }
    let s = Steward::builder().home(&home).open().expect("open");

    let t = Instant::now();
    let r = s.memory_reconcile().expect("reconcile");
    let cold = t.elapsed();
    assert_eq!((r.notes, r.problem_count), (NOTES, 0), "{r:?}");
    println!("index {NOTES} notes from their files        {:>8.0} ms", ms(cold));

    let mut unchanged = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let r = s.memory_reconcile().expect("reconcile");
        unchanged.push(t.elapsed());
        assert_eq!(r.read, 0);
    }
    unchanged.sort();
    println!("reconcile, nothing changed (median of 5)    {:>8.1} ms", ms(unchanged[2]));

    let mut times = Vec::with_capacity(RUNS);
    let mut found = 0usize;
    for k in 0..RUNS + 20 {
        let q = format!("{} {}", WORDS[k % WORDS.len()], WORDS[(k * 3 + 1) % WORDS.len()]);
        let t = Instant::now();
        let hits = s
            .memory_search(&MemoryQuery { text: q, limit: 10, ..MemoryQuery::default() })
            .expect("search");
        if k >= 20 {
            times.push(t.elapsed());
            found += hits.len();
        }
    }
    times.sort();
    println!(
        "memory_search, warm: p50 {:.3} ms  p95 {:.3} ms  ({} hits over {RUNS} questions)",
        ms(times[RUNS / 2]),
        ms(times[RUNS * 95 / 100]),
        found
    );

    let ada = s.human("ada").expect("person");
    let mut forget = Vec::new();
    for subject in 0..5 {
        let sel = ForgetSelector::Subject(format!("person:p{subject}@example.org"));
        let t = Instant::now();
        let receipt = s.memory_forget(&ada, &sel, false).expect("forget");
        forget.push(t.elapsed());
        assert_eq!(receipt.notes.len(), NOTES / SUBJECTS);
    }
    forget.sort();
    println!(
        "forget one subject ({} notes), receipt: median {:.1} ms  max {:.1} ms",
        NOTES / SUBJECTS,
        ms(forget[2]),
        ms(forget[4])
    );

    // Promotion: the mailbox's newest message is now, so its last 30 days are active.
    let md = dir.path().join("maildir");
    let opts = DemoOptions {
        newest: chrono::Utc::now().timestamp(),
        malformed: false,
        ..DemoOptions::new(MESSAGES)
    };
    generate_maildir(&md, &opts).expect("demo");
    let sync = SyncOptions { account: Some("demo".to_owned()), cancel: None };
    s.sync_mail(&MaildirSource::new(&md), &sync, &mut |_| {}).expect("sync");
    let t = Instant::now();
    let first = s.promote_mail(None).expect("promote");
    let first_t = t.elapsed();
    let t = Instant::now();
    let second = s.promote_mail(None).expect("promote");
    let second_t = t.elapsed();
    assert_eq!(first.calls, 0);
    println!(
        "promotion pass, no model: {} threads ({} filtered, {} for the model) in {:.0} ms = {:.0} threads/s",
        first.threads,
        first.filtered,
        first.remaining,
        ms(first_t),
        first.threads as f64 / first_t.as_secs_f64()
    );
    println!(
        "promotion pass again: {} threads ({} unchanged) in {:.0} ms = {:.0} threads/s",
        second.threads,
        second.unchanged,
        ms(second_t),
        second.threads as f64 / second_t.as_secs_f64()
    );
}
