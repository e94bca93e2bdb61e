//! Thread resolution: all five rules, out-of-order arrival, the ±14-day window.

use std::collections::BTreeMap;

use steward_connectors::mail::MaildirSource;
use steward_core::mirror::SyncOptions;

use super::fixtures::{Mail, steward, write};

/// Writes `mails` as Maildir files (mtime = given) and mirrors them; returns thread ids by
/// Message-ID.
fn thread_map(mails: &[(Mail<'_>, i64)]) -> BTreeMap<String, i64> {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    std::fs::create_dir_all(md.join("new")).unwrap();
    for (i, (m, mtime)) in mails.iter().enumerate() {
        write(&md.join("cur").join(format!("{i}.host:2,S")), &m.bytes(), *mtime);
    }
    let s = steward(dir.path());
    let opts = SyncOptions { account: Some("t".into()), cancel: None };
    let summary = s.mirror().sync(&MaildirSource::new(&md), &opts, &mut |_| {}).unwrap();
    assert_eq!(summary.error_count, 0);
    let db = rusqlite::Connection::open(dir.path().join("home/mirror.db")).unwrap();
    let mut stmt = db.prepare("SELECT rfc_message_id, thread_id FROM messages").unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
}

const D1: &str = "Mon, 6 Jan 2025 10:00:00 +0000";
const D2: &str = "Tue, 7 Jan 2025 10:00:00 +0000";
const D3: &str = "Wed, 8 Jan 2025 10:00:00 +0000";

#[test]
fn reply_graph_joins_even_when_children_arrive_first() {
    // Backfill goes newest first, so both replies are mirrored before their parent.
    let root = Mail::new("root@x", "Budget", D1);
    let mut a = Mail::new("a@x", "Something else", D2);
    a.in_reply_to = Some("root@x");
    a.from = "Carol <carol@example.org>";
    a.to = "Dan <dan@example.org>";
    let mut b = Mail::new("b@x", "Unrelated words", D3);
    b.references = &["root@x"];
    b.from = "Eve <eve@example.org>";
    b.to = "Frank <frank@example.org>";
    let t = thread_map(&[(root, 100), (a, 200), (b, 300)]);
    assert_eq!(t["root@x"], t["a@x"]);
    assert_eq!(t["root@x"], t["b@x"]);
}

#[test]
fn references_use_the_nearest_known_ancestor() {
    let r = Mail::new("r@x", "Plan", D1);
    let mut c = Mail::new("c@x", "Plan B", D2);
    c.references = &["unknown@x", "r@x", "also-unknown@x"];
    c.from = "Z <z@example.org>";
    c.to = "Y <y@example.org>";
    let t = thread_map(&[(r, 300), (c, 100)]);
    assert_eq!(t["r@x"], t["c@x"]);
}

#[test]
fn gmail_thread_id_groups_without_reply_headers() {
    let mut a = Mail::new("ga@x", "Tickets", D1);
    a.gm_thrid = Some("1700000000000000001");
    let mut b = Mail::new("gb@x", "Different subject entirely", D2);
    b.gm_thrid = Some("1700000000000000001");
    b.from = "Q <q@example.org>";
    b.to = "W <w@example.org>";
    let mut c = Mail::new("gc@x", "Tickets", D3);
    c.gm_thrid = Some("1700000000000000999");
    let t = thread_map(&[(a, 100), (b, 200), (c, 300)]);
    assert_eq!(t["ga@x"], t["gb@x"]);
    // A different Gmail thread id is not merged by the subject fallback.
    assert_ne!(t["ga@x"], t["gc@x"]);
}

#[test]
fn subject_fallback_needs_a_shared_participant_within_14_days() {
    let a = Mail::new("s1@x", "Preventivo bagno", "Mon, 6 Jan 2025 10:00:00 +0000");
    // Italian reply prefix, same participants, 13 days later: joins.
    let b = Mail::new("s2@x", "R: Preventivo bagno", "Sun, 19 Jan 2025 10:00:00 +0000");
    // Same subject, 45 days after the thread's last activity: a new thread.
    let c = Mail::new("s3@x", "Re: Preventivo bagno", "Wed, 5 Mar 2025 10:00:00 +0000");
    // Same subject and day, nobody in common: a new thread.
    let mut d = Mail::new("s4@x", "Preventivo bagno", "Tue, 7 Jan 2025 10:00:00 +0000");
    d.from = "Stranger <stranger@example.net>";
    d.to = "Other <other@example.net>";
    let t = thread_map(&[(a, 100), (b, 200), (c, 300), (d, 150)]);
    assert_eq!(t["s1@x"], t["s2@x"]);
    assert_ne!(t["s1@x"], t["s3@x"]);
    assert_ne!(t["s1@x"], t["s4@x"]);
    assert_ne!(t["s3@x"], t["s4@x"]);
}

#[test]
fn unrelated_messages_get_new_threads_and_counts_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    let mut reply = Mail::new("r2@x", "Re: one", D2);
    reply.in_reply_to = Some("r1@x");
    let mails = [Mail::new("r1@x", "one", D1), reply, Mail::new("r3@x", "two", D3)];
    for (i, m) in mails.iter().enumerate() {
        write(&md.join("cur").join(format!("{i}:2,")), &m.bytes(), 100 + i as i64);
    }
    let s = steward(dir.path());
    let opts = SyncOptions { account: Some("t".into()), cancel: None };
    let sum = s.mirror().sync(&MaildirSource::new(&md), &opts, &mut |_| {}).unwrap();
    assert_eq!(sum.threads, 2);
    let db = rusqlite::Connection::open(dir.path().join("home/mirror.db")).unwrap();
    let (count, first, last, people): (i64, i64, i64, String) = db
        .query_row(
            "SELECT message_count, first_activity, last_activity, participants FROM threads WHERE norm_subject = 'one'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(count, 2);
    assert_eq!(last - first, 86_400);
    assert!(people.contains("alice@example.org") && people.contains("bob@example.org"));
}

#[test]
fn existing_identity_keeps_its_thread_when_content_changes() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    let a = Mail::new("k1@x", "Keep", D1);
    let mut b = Mail::new("k2@x", "Re: Keep", D2);
    b.in_reply_to = Some("k1@x");
    write(&md.join("cur/a:2,S"), &a.bytes(), 100);
    write(&md.join("cur/b:2,S"), &b.bytes(), 200);
    let s = steward(dir.path());
    let opts = SyncOptions { account: Some("t".into()), cancel: None };
    let src = MaildirSource::new(&md);
    s.mirror().sync(&src, &opts, &mut |_| {}).unwrap();
    // The reply is edited and loses its reply header: it is the same message, same thread.
    let mut edited = Mail::new("k2@x", "Totally new subject", D2);
    edited.body = "edited";
    write(&md.join("cur/b:2,S"), &edited.bytes(), 500);
    let sum = s.mirror().sync(&src, &opts, &mut |_| {}).unwrap();
    assert_eq!((sum.added, sum.updated), (0, 1));
    let db = rusqlite::Connection::open(dir.path().join("home/mirror.db")).unwrap();
    let threads: i64 =
        db.query_row("SELECT count(DISTINCT thread_id) FROM messages", [], |r| r.get(0)).unwrap();
    assert_eq!(threads, 1);
    let body: String = db
        .query_row("SELECT body_text FROM message_bodies b JOIN messages m ON m.id = b.message_id WHERE m.rfc_message_id = 'k2@x'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(body.trim(), "edited");
}
