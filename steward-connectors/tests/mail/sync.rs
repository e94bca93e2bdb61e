//! Sync modes on real Maildir files: backfill recent-first, idempotent re-runs, reconcile of
//! renames, moves, deletions and reappearances, the All Mail rule, bad files.

use std::path::Path;

use steward_connectors::mail::{
    MaildirSource,
    demo::{DemoOptions, generate_maildir},
};
use steward_core::mirror::{SyncOptions, SyncSummary};

use super::fixtures::{Mail, steward, write};

fn sync(s: &steward_core::Steward, md: &Path) -> SyncSummary {
    let opts = SyncOptions { account: Some("acct".into()), cancel: None };
    s.mirror().sync(&MaildirSource::new(md), &opts, &mut |_| {}).unwrap()
}

fn db(dir: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(dir.join("home/mirror.db")).unwrap()
}

/// Every row of every mirror table except the run log, as text: equal dumps mean nothing changed.
fn dump(dir: &Path) -> String {
    let c = db(dir);
    let mut out = String::new();
    for t in [
        "accounts",
        "mailboxes",
        "threads",
        "messages",
        "message_bodies",
        "message_addresses",
        "message_refs",
        "source_files",
        "message_paths",
        "attachments",
        "blobs",
    ] {
        let mut stmt = c.prepare(&format!("SELECT * FROM {t} ORDER BY 1, 2")).unwrap();
        let n = stmt.column_count();
        let rows = stmt
            .query_map([], |r| {
                Ok((0..n)
                    .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
                    .collect::<Vec<_>>()
                    .join("|"))
            })
            .unwrap();
        for r in rows {
            out.push_str(t);
            out.push(':');
            out.push_str(&r.unwrap());
            out.push('\n');
        }
    }
    out
}

#[test]
fn backfill_then_rerun_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    let report = generate_maildir(&md, &DemoOptions::new(300)).unwrap();
    let s = steward(dir.path());
    let first = sync(&s, &md);
    assert_eq!(first.mode, steward_core::mirror::SyncMode::Backfill);
    assert_eq!(first.added as usize, report.messages);
    assert_eq!(first.error_count, 3, "{:?}", first.errors);
    assert_eq!(first.added + first.copies + first.error_count, report.files as u64);
    let before = dump(dir.path());
    let second = sync(&s, &md);
    assert_eq!(second.mode, steward_core::mirror::SyncMode::Reconcile);
    assert_eq!(
        (
            second.added,
            second.updated,
            second.copies,
            second.paths_removed,
            second.soft_deleted,
            second.error_count
        ),
        (0, 0, 0, 0, 0, 0)
    );
    assert_eq!(second.files_unchanged, report.files as u64);
    assert_eq!(before, dump(dir.path()), "an unchanged source must not change the mirror");
    s.mirror().database().integrity_check().unwrap();
}

#[test]
fn backfill_goes_most_recent_first() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    for i in 0..20 {
        let id = format!("m{i}@x");
        let subject = format!("s{i}");
        write(
            &md.join(format!("cur/{i}:2,S")),
            &Mail::new(&id, &subject, "Mon, 6 Jan 2025 10:00:00 +0000").bytes(),
            1_000 + i,
        );
    }
    let s = steward(dir.path());
    sync(&s, &md);
    let c = db(dir.path());
    let mut stmt = c.prepare("SELECT rfc_message_id FROM messages ORDER BY id").unwrap();
    let order: Vec<String> =
        stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    let expected: Vec<String> = (0..20).rev().map(|i| format!("m{i}@x")).collect();
    assert_eq!(order, expected);
}

#[test]
fn reconcile_follows_renames_moves_deletions_and_returns() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    std::fs::create_dir_all(md.join(".Archive/cur")).unwrap();
    let a = Mail::new("a@x", "A", "Mon, 6 Jan 2025 10:00:00 +0000");
    let b = Mail::new("b@x", "B", "Mon, 6 Jan 2025 11:00:00 +0000");
    write(&md.join("new/1.host"), &a.bytes(), 100);
    write(&md.join("cur/2.host:2,S"), &b.bytes(), 200);
    let s = steward(dir.path());
    sync(&s, &md);
    let flags = |id: &str| -> (i64, String, Option<i64>) {
        db(dir.path())
            .query_row(
                "SELECT m.flags, b.name, m.deleted_at FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id WHERE rfc_message_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap()
    };
    assert_eq!(flags("a@x"), (0, "INBOX".into(), None));

    // A mail client reads A: new/1.host moves to cur/1.host:2,RS.
    std::fs::rename(md.join("new/1.host"), md.join("cur/1.host:2,RS")).unwrap();
    let r = sync(&s, &md);
    assert_eq!((r.added, r.updated, r.paths_removed, r.soft_deleted), (0, 1, 1, 0));
    assert_eq!(flags("a@x"), (3, "INBOX".into(), None));

    // B is archived: it moves to another folder; attribution follows.
    std::fs::rename(md.join("cur/2.host:2,S"), md.join(".Archive/cur/2.host:2,S")).unwrap();
    let r = sync(&s, &md);
    assert_eq!((r.added, r.copies, r.paths_removed, r.soft_deleted), (0, 1, 1, 0));
    assert_eq!(flags("b@x").1, "Archive");

    // A is deleted on disk: soft-deleted, not lost; its thread no longer counts it.
    let a_bytes = std::fs::read(md.join("cur/1.host:2,RS")).unwrap();
    std::fs::remove_file(md.join("cur/1.host:2,RS")).unwrap();
    let r = sync(&s, &md);
    assert_eq!((r.paths_removed, r.soft_deleted), (1, 1));
    assert!(flags("a@x").2.is_some());
    let live: i64 = db(dir.path()).query_row("SELECT message_count FROM threads t JOIN messages m ON m.thread_id = t.id WHERE m.rfc_message_id = 'a@x'", [], |r| r.get(0)).unwrap();
    assert_eq!(live, 0);

    // ...and it comes back.
    write(&md.join("cur/1.host:2,RS"), &a_bytes, 900);
    let r = sync(&s, &md);
    assert_eq!((r.added, r.restored, r.soft_deleted), (0, 1, 0));
    assert!(flags("a@x").2.is_none());
    let total: i64 =
        db(dir.path()).query_row("SELECT count(*) FROM messages", [], |r| r.get(0)).unwrap();
    assert_eq!(total, 2, "no duplicate after delete and return");
}

#[test]
fn all_mail_never_overrides_a_specific_mailbox() {
    for all_mail_first in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let md = dir.path().join("Maildir");
        let m = Mail::new("g@x", "Label me", "Mon, 6 Jan 2025 10:00:00 +0000").bytes();
        let (t_all, t_label) = if all_mail_first { (300, 100) } else { (100, 300) };
        write(&md.join(".[Gmail].All Mail/cur/1:2,S"), &m, t_all);
        write(&md.join(".Lavoro/cur/1:2,S"), &m, t_label);
        std::fs::create_dir_all(md.join("cur")).unwrap();
        let s = steward(dir.path());
        let r = sync(&s, &md);
        assert_eq!((r.added, r.copies), (1, 1));
        let name: String = db(dir.path())
            .query_row(
                "SELECT b.name FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(name, "Lavoro", "all_mail_first = {all_mail_first}");
        // Dropping the label copy leaves All Mail as the only (and so attributed) mailbox.
        std::fs::remove_dir_all(md.join(".Lavoro")).unwrap();
        sync(&s, &md);
        let name: String = db(dir.path())
            .query_row(
                "SELECT b.name FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(name, "[Gmail]/All Mail");
    }
}

#[test]
fn bad_files_are_per_file_errors_and_heal_when_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    write(
        &md.join("cur/good:2,S"),
        &Mail::new("ok@x", "fine", "Mon, 6 Jan 2025 10:00:00 +0000").bytes(),
        100,
    );
    write(&md.join("cur/empty:2,S"), b"", 100);
    write(&md.join("cur/binary:2,S"), &[0u8, 1, 2, 3, 255, 0, 7, 8], 100);
    let mut trunc = Mail::new("t@x", "cut", "Mon, 6 Jan 2025 10:00:00 +0000").bytes();
    trunc.truncate(40); // cut inside the header block
    write(&md.join("cur/trunc:2,S"), &trunc, 100);
    let s = steward(dir.path());
    let r = sync(&s, &md);
    assert_eq!(r.error_count, 2, "{:?}", r.errors);
    let codes: Vec<&str> = r.errors.iter().map(|e| e.code.as_str()).collect();
    assert!(
        codes.contains(&"MAIL_FILE_EMPTY") && codes.contains(&"MAIL_NOT_A_MESSAGE"),
        "{codes:?}"
    );
    // The truncated file still yields what it holds (a partial header block), like any reader.
    assert_eq!(r.added, 2);
    let stats = s.mirror().stats().unwrap();
    assert_eq!(stats.error_count, 2);
    assert_eq!(stats.errors.len(), 2);
    // Fixing the file clears its error on the next reconcile.
    write(
        &md.join("cur/empty:2,S"),
        &Mail::new("fixed@x", "now fine", "Mon, 6 Jan 2025 10:00:00 +0000").bytes(),
        500,
    );
    let r = sync(&s, &md);
    assert_eq!((r.added, r.error_count), (1, 0));
    assert_eq!(s.mirror().stats().unwrap().error_count, 1);
}

#[test]
fn demo_mirror_has_every_role_body_state_and_shared_blobs() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    generate_maildir(&md, &DemoOptions::new(400)).unwrap();
    let s = steward(dir.path());
    sync(&s, &md);
    let st = s.mirror().stats().unwrap();
    for role in ["inbox", "sent", "archive", "trash", "other"] {
        assert!(
            st.messages_by_role.get(role).copied().unwrap_or(0) > 0,
            "{role}: {:?}",
            st.messages_by_role
        );
    }
    assert!(!st.messages_by_role.contains_key("all_mail"), "All Mail copies must not own messages");
    // The two invoices carry identical PDF bytes under different names: one blob.
    let c = db(dir.path());
    let (names, blobs): (i64, i64) = c
        .query_row(
            "SELECT count(DISTINCT name), count(DISTINCT sha256) FROM attachments WHERE name IN ('fattura_marzo.pdf', 'invoice-4821.pdf')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((names, blobs), (2, 1));
    let sha: String = c
        .query_row(
            "SELECT sha256 FROM attachments WHERE name = 'invoice-4821.pdf' LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let path = s.mirror().blob_path(&sha).expect("blob on disk");
    assert!(std::fs::read(path).unwrap().starts_with(b"%PDF-1.4"));
    // Unread backlog and HTML-only mail come through.
    let unread: i64 =
        c.query_row("SELECT count(*) FROM messages WHERE flags & 1 = 0", [], |r| r.get(0)).unwrap();
    assert!(unread > 0);
    let html: i64 = c
        .query_row(
            "SELECT count(*) FROM message_bodies WHERE body_text LIKE '%track()%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(html, 0, "scripts in HTML mail must not reach the body text");
}

#[test]
fn watch_reconciles_soon_after_a_change() {
    use std::{
        sync::atomic::{AtomicBool, Ordering},
        time::{Duration, Instant},
    };

    use steward_connectors::mail::watch::{WatchOptions, watch_and_sync};

    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    write(
        &md.join("cur/a:2,S"),
        &Mail::new("w1@x", "first", "Mon, 6 Jan 2025 10:00:00 +0000").bytes(),
        100,
    );
    std::fs::create_dir_all(md.join("new")).unwrap();
    let s = steward(dir.path());
    let stop = AtomicBool::new(false);
    let runs = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let src = MaildirSource::new(&md);
            let opts = WatchOptions {
                debounce: Duration::from_millis(50),
                interval: Duration::from_secs(3600),
            };
            watch_and_sync(&s, &src, Some("acct".into()), opts, &stop, &mut |r| {
                runs.lock().unwrap().push(r.unwrap().added);
            })
            .unwrap();
        });
        let live = || s.mirror().stats().unwrap().messages_live;
        let deadline = Instant::now() + Duration::from_secs(20);
        while live() < 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        // A new message lands: the watcher (not a timer: the interval is an hour) mirrors it.
        write(
            &md.join("new/b"),
            &Mail::new("w2@x", "second", "Mon, 6 Jan 2025 11:00:00 +0000").bytes(),
            200,
        );
        while live() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
        assert_eq!(live(), 2, "the watcher did not pick up the new file in time");
    });
    let runs = runs.into_inner().unwrap();
    assert_eq!(runs.first(), Some(&1));
    assert_eq!(runs.iter().sum::<u64>(), 2, "each message added exactly once: {runs:?}");
}

/// A real Maildir behind a source that fails to read one path, as a flaky disk or a permission
/// change would.
struct Unreadable {
    inner: MaildirSource,
    path_part: &'static str,
}

impl steward_core::mirror::MailSource for Unreadable {
    fn format(&self) -> &'static str {
        self.inner.format()
    }
    fn root(&self) -> &Path {
        self.inner.root()
    }
    fn default_account(&self) -> String {
        self.inner.default_account()
    }
    fn scan(
        &self,
    ) -> Result<Vec<steward_core::mirror::SourceFile>, steward_core::mirror::SourceError> {
        self.inner.scan()
    }
    fn read(
        &self,
        file: &steward_core::mirror::SourceFile,
        limits: &steward_core::mirror::ParseLimits,
        each: &mut dyn FnMut(steward_core::mirror::ParsedMessage),
    ) -> Result<(), steward_core::mirror::FileError> {
        if file.path.to_string_lossy().contains(self.path_part) {
            return Err(steward_core::mirror::FileError::Io {
                reason: "Input/output error (os error 5)".into(),
            });
        }
        self.inner.read(file, limits, each)
    }
}

#[test]
fn an_unreadable_file_keeps_its_message_and_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    write(
        &md.join("cur/a:2,S"),
        &Mail::new("keep@x", "keep", "Mon, 6 Jan 2025 10:00:00 +0000").bytes(),
        100,
    );
    write(
        &md.join("cur/b:2,S"),
        &Mail::new("other@x", "other", "Mon, 6 Jan 2025 10:00:00 +0000").bytes(),
        100,
    );
    let s = steward(dir.path());
    sync(&s, &md);
    // The file changes on disk and cannot be read this time.
    super::fixtures::set_mtime(&md.join("cur/a:2,S"), 500);
    let opts = SyncOptions { account: Some("acct".into()), cancel: None };
    let flaky = Unreadable { inner: MaildirSource::new(&md), path_part: "cur/a:2" };
    let r = s.mirror().sync(&flaky, &opts, &mut |_| {}).unwrap();
    assert_eq!((r.error_count, r.soft_deleted, r.paths_removed), (1, 0, 0), "{:?}", r.errors);
    assert_eq!(r.errors[0].code, "MAIL_FILE_UNREADABLE");
    assert_eq!(s.mirror().stats().unwrap().messages_live, 2, "a read error must not delete mail");
    // Nothing changed on disk since, yet the next run retries the file and clears the error.
    let r = sync(&s, &md);
    assert_eq!((r.error_count, r.files_unchanged, r.unchanged), (0, 1, 1));
    assert_eq!(s.mirror().stats().unwrap().error_count, 0);
}

#[test]
fn nested_maildir_folders_are_mailboxes() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Mail");
    let m = |id: &str| Mail::new(id, "s", "Mon, 6 Jan 2025 10:00:00 +0000").bytes();
    write(&md.join("INBOX/cur/1:2,S"), &m("n1@x"), 100);
    write(&md.join("Work/Clients/cur/2:2,S"), &m("n2@x"), 100);
    write(&md.join("Sent/new/3"), &m("n3@x"), 100);
    let s = steward(dir.path());
    let r = sync(&s, &md);
    assert_eq!(r.added, 3);
    let c = db(dir.path());
    let mut stmt = c.prepare("SELECT name, role FROM mailboxes ORDER BY name").unwrap();
    let boxes: Vec<(String, String)> =
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect();
    assert_eq!(
        boxes,
        [("INBOX", "inbox"), ("Sent", "sent"), ("Work/Clients", "other")]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
}

#[test]
fn a_running_sync_is_followed_from_another_handle_and_observed_as_progress_and_transitions() {
    use std::time::Duration;

    use steward_core::{
        protocol::{Observer, ProtocolEvent},
        status::Health,
    };
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("md");
    generate_maildir(&md, &DemoOptions::new(60)).unwrap();
    let s = steward(dir.path());
    // A second handle on the same home stands for another process (the server).
    let other = steward(dir.path());
    let mut observer = Observer::new(Duration::ZERO);
    assert!(
        other.protocol_observe(&mut observer).unwrap().is_empty(),
        "the first call only records"
    );
    assert_eq!(other.protocol_observation().unwrap().ingest, None);
    let mut events = Vec::new();
    let mut seen_during = Vec::new();
    let opts = SyncOptions { account: Some("acct".into()), cancel: None };
    let summary = s
        .mirror()
        .sync(&MaildirSource::new(&md), &opts, &mut |p| {
            if p.phase != steward_core::mirror::ProgressPhase::Ingesting {
                return;
            }
            // Each committed batch is visible to the other handle at once.
            let run = other.mirror().last_run().unwrap().unwrap();
            assert_eq!((run.files_done, run.finished_at), (p.files_done as i64, None));
            assert_eq!(run.files_total, p.files_total as i64);
            seen_during.push(run.files_done);
            events.extend(other.protocol_observe(&mut observer).unwrap());
        })
        .unwrap();
    events.extend(other.protocol_observe(&mut observer).unwrap());
    // Files, not messages: the demo mailbox also files copies (Sent, labels).
    let total = other.mirror().last_run().unwrap().unwrap().files_total;
    assert!(total >= 60);
    assert_eq!(seen_during.len() as i64, (total + 6) / 7, "one report per batch of 7");

    let progress: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ProtocolEvent::Ingest { progress, .. } => Some(progress.clone()),
            _ => None,
        })
        .collect();
    // The start (first batch), the last batch and the end are always reported; progress in
    // between at most every INGEST_PROGRESS_INTERVAL, never going back.
    assert!(progress.len() >= 3, "{progress:?}");
    assert_eq!((progress[0].files_done, progress[0].finished_at), (7, None));
    assert!(progress.windows(2).all(|w| w[0].files_done <= w[1].files_done), "{progress:?}");
    let last = progress.last().unwrap();
    assert_eq!((last.run_id, last.files_done, last.files_total), (summary.run_id, total, total));
    assert!(last.finished_at.is_some());
    assert_eq!(last.account, "acct");
    // The ingest item went from "never synced" to ok while the run went, then to a warning if
    // the run finished with files in error (the demo mailbox has some).
    let transitions: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ProtocolEvent::Status { name, from, to, .. } if name == "ingest" => Some((*from, *to)),
            _ => None,
        })
        .collect();
    let mut expected = vec![(Some(Health::Unknown), Health::Ok)];
    if summary.error_count > 0 {
        expected.push((Some(Health::Ok), Health::Warning));
    }
    assert_eq!(transitions, expected);
    // Nothing changed since: nothing more to report.
    assert!(other.protocol_observe(&mut observer).unwrap().is_empty());
    let now = other.protocol_observation().unwrap();
    assert_eq!(now.ingest.as_ref(), Some(last));
}
