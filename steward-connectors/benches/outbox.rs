//! Confirmation speed: one pass over 100 journaled sends against a 100,000-message mirror of the
//! same account (a generated Maildir). 50 sends have their Sent copy with our Message-ID, 25 a
//! copy whose Message-ID the server replaced (found by fields), 25 none (a miss is counted).
//!
//! The Sent copies are written by a transport that files the message lettre builds straight
//! into the Maildir's Sent folder: this measures confirmation, not SMTP.
//!
//! `STEWARD_BENCH_DIR` (default `target/bench-data`) keeps the generated Maildir between runs.

use std::{
    path::{Path, PathBuf},
    sync::atomic::{AtomicUsize, Ordering},
    time::Instant,
};

use steward_connectors::mail::{
    MaildirSource,
    demo::{DemoOptions, generate_maildir},
    smtp::build_message,
};
use steward_core::{
    Steward,
    mirror::SyncOptions,
    outbox::{MailDraft, MailTransport, OutgoingMail, Receipt, SubmitError},
};

const MESSAGES: usize = 100_000;
const OPS: usize = 100;
const RUNS: usize = 20;

/// Files each message as a Sent copy, optionally with its Message-ID replaced, or drops it.
struct FileToSent {
    dir: PathBuf,
    n: AtomicUsize,
}

impl MailTransport for FileToSent {
    fn submit(&self, mail: &OutgoingMail) -> Result<Receipt, SubmitError> {
        let i = self.n.fetch_add(1, Ordering::Relaxed);
        let bytes = build_message(mail)?.formatted();
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if i % 4 == 3 {
            return Ok(Receipt { response: "250 dropped".into() });
        }
        if i % 4 == 2 {
            text = text.replace(&mail.message_id, &format!("replaced-{i}@mx.example"));
        }
        std::fs::write(self.dir.join(format!("cur/outbox-{i}:2,S")), text).expect("write copy");
        Ok(Receipt { response: "250 ok".into() })
    }
}

fn ensure_maildir(base: &Path) -> PathBuf {
    let maildir = base.join(format!("maildir-outbox-{MESSAGES}"));
    if !maildir.join(".complete").exists() {
        let _ = std::fs::remove_dir_all(&maildir);
        let mut opts = DemoOptions::new(MESSAGES);
        opts.gmail_copies = false;
        generate_maildir(&maildir, &opts).expect("generate");
        std::fs::write(maildir.join(".complete"), b"").expect("marker");
    }
    // This bench's own Sent copies, from a previous run, go.
    let sent = maildir.join(".Sent");
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(sent.join(sub)).expect("sent dir");
    }
    for e in std::fs::read_dir(sent.join("cur")).expect("read sent").flatten() {
        if e.file_name().to_string_lossy().starts_with("outbox-") {
            let _ = std::fs::remove_file(e.path());
        }
    }
    maildir
}

fn main() {
    let base = std::env::var_os("STEWARD_BENCH_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-data"),
        PathBuf::from,
    );
    std::fs::create_dir_all(&base).expect("bench dir");
    let maildir = ensure_maildir(&base);
    let work = tempfile::tempdir().expect("tmp");
    let home = work.path().join("home");
    let now = steward_core::time::now_secs();
    {
        let s = Steward::builder().home(&home).open().expect("open");
        let transport = FileToSent { dir: maildir.join(".Sent"), n: AtomicUsize::new(0) };
        for i in 0..OPS {
            let draft = MailDraft {
                account: "me".into(),
                from: "ada@example.org".into(),
                to: vec![format!("friend{i}@example.org")],
                cc: vec!["carol@example.org".into()],
                subject: format!("Plans for week {i}"),
                body: format!("Hello,\n\nhere is the plan for week {i}.\n\nAda"),
                ..MailDraft::default()
            };
            let mail = s.prepare_mail(&draft, now).expect("prepare");
            s.send_mail(&mail, &format!("bench:{i}"), None, None, &transport, now).expect("send");
        }
        let opts = SyncOptions { account: Some("me".into()), cancel: None };
        let t = Instant::now();
        let summary =
            s.mirror().sync(&MaildirSource::new(&maildir), &opts, &mut |_| {}).expect("mirror");
        println!(
            "mirrored {} messages (+{} Sent copies) in {:.1} s",
            summary.added,
            OPS / 4 * 3,
            t.elapsed().as_secs_f64()
        );
    }
    // Each run starts from the same journal (the pass changes it): the file and its WAL.
    let journal_files = ["ops.db", "ops.db-wal"];
    for f in journal_files {
        if home.join(f).exists() {
            std::fs::copy(home.join(f), work.path().join(f)).expect("save journal");
        }
    }
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..RUNS {
        let _ = std::fs::remove_file(home.join("ops.db-shm"));
        for f in journal_files {
            let _ = std::fs::remove_file(home.join(f));
            if work.path().join(f).exists() {
                std::fs::copy(work.path().join(f), home.join(f)).expect("restore journal");
            }
        }
        let s = Steward::builder().home(&home).open().expect("open");
        let ops = s.list_write_operations(None, 0, 3).expect("list");
        assert_eq!(ops.len(), 3, "the journal was restored");
        let t = Instant::now();
        let report = s.confirm_pass(now + 10).expect("pass");
        times.push(t.elapsed().as_secs_f64());
        last = Some(report);
    }
    times.sort_by(f64::total_cmp);
    let report = last.expect("a run");
    assert_eq!(report.checked, OPS);
    assert_eq!(report.confirmed, OPS / 4 * 3, "{report:?}");
    println!(
        "| confirmation pass, {OPS} operations vs a {MESSAGES}-message mirror ({} confirmed, {} not seen) | **{:.1} ms p50** (max {:.1} ms, {RUNS} runs) |",
        report.confirmed,
        report.pending,
        times[times.len() / 2] * 1e3,
        times[times.len() - 1] * 1e3
    );
}
