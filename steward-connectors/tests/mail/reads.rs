//! Bounded reads: body windows, soft-deleted messages, thread pages.

use steward_connectors::mail::{
    MaildirSource,
    demo::{DemoOptions, generate_maildir},
};
use steward_core::{
    StewardError,
    mirror::{BodyWindow, ReadError, SyncOptions},
};

use super::fixtures::{Mail, message_rowid, mirror_maildir, steward, write};

#[test]
fn body_windows_reassemble_the_body_and_never_exceed_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    let mut m = Mail::new("long@x", "Long one", "Mon, 6 Jan 2025 10:00:00 +0000");
    let body = "Già fatto: perché no? ".repeat(900); // ~19,800 characters
    m.body = &body;
    write(&md.join("cur/1:2,S"), &m.bytes(), 100);
    let s = steward(dir.path());
    mirror_maildir(&s, &md);
    let first = s.mirror().read_message(1, BodyWindow::first()).unwrap();
    assert_eq!(first.subject, "Long one");
    assert_eq!(first.from[0].addr, "alice@example.org");
    assert_eq!(first.date.as_deref(), Some("2025-01-06T10:00:00Z"));
    assert_eq!(first.body.text.chars().count(), 6_000, "the default window");
    let mut text = String::new();
    let mut window = BodyWindow { offset: 0, max_chars: 12_000 };
    loop {
        let r = s.mirror().read_message(1, window).unwrap();
        assert!(r.body.text.chars().count() <= 12_000);
        text.push_str(&r.body.text);
        match r.body.next_offset {
            Some(next) => window.offset = next,
            None => break,
        }
    }
    assert_eq!(text.trim_end(), body.trim_end());
    let too_big =
        s.mirror().read_message(1, BodyWindow { offset: 0, max_chars: 12_001 }).unwrap_err();
    assert_eq!(too_big.code(), "LIMIT_OUT_OF_RANGE");
    let zero = s.mirror().read_message(1, BodyWindow { offset: 0, max_chars: 0 }).unwrap_err();
    assert_eq!(zero.code(), "LIMIT_OUT_OF_RANGE");
}

#[test]
fn soft_deleted_and_unknown_messages_are_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    write(
        &md.join("cur/1:2,S"),
        &Mail::new("gone@x", "bye", "Mon, 6 Jan 2025 10:00:00 +0000").bytes(),
        100,
    );
    write(
        &md.join("cur/2:2,S"),
        &Mail::new("stay@x", "hi", "Mon, 6 Jan 2025 10:00:00 +0000").bytes(),
        100,
    );
    let s = steward(dir.path());
    let opts = SyncOptions { account: Some("a".into()), cancel: None };
    s.mirror().sync(&MaildirSource::new(&md), &opts, &mut |_| {}).unwrap();
    let id_of = |mid: &str| message_rowid(dir.path(), mid);
    let gone = id_of("gone@x");
    assert!(s.mirror().read_message(gone, BodyWindow::first()).is_ok());
    std::fs::remove_file(md.join("cur/1:2,S")).unwrap();
    s.mirror().sync(&MaildirSource::new(&md), &opts, &mut |_| {}).unwrap();
    let err = s.mirror().read_message(gone, BodyWindow::first()).unwrap_err();
    assert!(matches!(err, ReadError::MessageNotFound { .. }));
    assert_eq!(err.code(), "MESSAGE_NOT_FOUND");
    assert_eq!(
        s.mirror().read_message(999_999, BodyWindow::first()).unwrap_err().code(),
        "MESSAGE_NOT_FOUND"
    );
    assert!(s.mirror().read_message(id_of("stay@x"), BodyWindow::first()).is_ok());
}

#[test]
fn thread_pages_run_newest_first_with_a_continuation() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    generate_maildir(&md, &DemoOptions::new(400)).unwrap();
    let s = steward(dir.path());
    mirror_maildir(&s, &md);
    let (thread, count): (i64, i64) = rusqlite::Connection::open(dir.path().join("home/mirror.db"))
        .unwrap()
        .query_row(
            "SELECT id, message_count FROM threads ORDER BY message_count DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(count >= 4, "the demo has long threads ({count})");
    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let page = s.mirror().read_thread(thread, offset, 3).unwrap();
        assert!(page.messages.len() <= 3);
        assert!(page.messages.iter().all(|e| e.snippet.chars().count() <= 120));
        seen.extend(page.messages.iter().map(|e| (e.date.clone(), e.id)));
        match page.next_offset {
            Some(n) => offset = n,
            None => break,
        }
    }
    assert_eq!(seen.len() as i64, count);
    let dates: Vec<_> = seen.iter().map(|(d, _)| d.clone()).collect();
    let mut sorted = dates.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(dates, sorted, "newest first");
    assert_eq!(s.mirror().read_thread(thread, 0, 101).unwrap_err().code(), "LIMIT_OUT_OF_RANGE");
    assert_eq!(s.mirror().read_thread(987_654, 0, 5).unwrap_err().code(), "THREAD_NOT_FOUND");
}
