//! The lexical (BM25) index built from a mirror: diacritics both ways, boosts, absent terms,
//! query syntax treated as text.

use steward_connectors::mail::MaildirSource;
use steward_core::{StewardError, index::LexicalIndex, mirror::SyncOptions};

use super::fixtures::{Mail, message_rowid, mirror_maildir, steward, write};

#[test]
fn bm25_over_the_mirror_folds_diacritics_and_ignores_syntax() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    let mut a = Mail::new("a@x", "Certificazione energetica", "Mon, 6 Jan 2025 10:00:00 +0000");
    a.body = "Perché la planimetria è già pronta.";
    a.from = "Marco Rossi <marco@studio-rossi.it>";
    let mut b = Mail::new("b@x", "Lunch", "Mon, 6 Jan 2025 11:00:00 +0000");
    b.body = "The certificazione came up briefly. Zebrafish 4821.";
    let mut c = Mail::new("c@x", "Unrelated", "Mon, 6 Jan 2025 12:00:00 +0000");
    c.body = "Nothing to see here.";
    for (i, m) in [a, b, c].iter().enumerate() {
        write(&md.join(format!("cur/{i}:2,S")), &m.bytes(), 100 + i as i64);
    }
    let s = steward(dir.path());
    mirror_maildir(&s, &md);
    let lex = LexicalIndex::open(&dir.path().join("home/index/lexical")).unwrap();
    assert_eq!(lex.rebuild(s.mirror()).unwrap(), 3);
    assert_eq!(lex.len(), 3);
    let id = |mid: &str| message_rowid(dir.path(), mid);
    let top = |q: &str| lex.search(q, 8).unwrap().first().map(|h| h.id);
    // Diacritics both ways.
    assert_eq!(top("perche gia"), Some(id("a@x")));
    assert_eq!(top("PERCHÉ già"), Some(id("a@x")));
    // The subject match outranks a body mention.
    let hits = lex.search("certificazione", 8).unwrap();
    assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), vec![id("a@x"), id("b@x")]);
    assert!(hits[0].score > hits[1].score);
    // People: a sender's name and address domain.
    assert_eq!(top("marco"), Some(id("a@x")));
    assert_eq!(top("studio-rossi"), Some(id("a@x")));
    // Rare tokens, absent terms, and query syntax that is only text.
    assert_eq!(top("zebrafish"), Some(id("b@x")));
    assert!(lex.search("xylophone", 8).unwrap().is_empty());
    assert_eq!(top("\"zebrafish\" AND (4821*) from:"), Some(id("b@x")));
    assert!(lex.search("   ()*:\"  ", 8).unwrap().is_empty());
    assert_eq!(lex.search("x", 0).unwrap_err().code(), "LIMIT_OUT_OF_RANGE");
    assert_eq!(lex.search("x", 501).unwrap_err().code(), "LIMIT_OUT_OF_RANGE");
    // Rebuilding replaces, never duplicates; a reopened index keeps its documents.
    lex.rebuild(s.mirror()).unwrap();
    drop(lex);
    let again = LexicalIndex::open(&dir.path().join("home/index/lexical")).unwrap();
    assert_eq!(again.len(), 3);
}

#[test]
fn sync_mail_keeps_the_index_in_step_with_the_mirror() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    let mut a = Mail::new("s1@x", "Quarterly zebrafish report", "Mon, 6 Jan 2025 10:00:00 +0000");
    a.body = "numbers";
    write(&md.join("cur/1:2,S"), &a.bytes(), 100);
    let s = steward(dir.path());
    let src = MaildirSource::new(&md);
    let opts = SyncOptions { account: Some("a".into()), cancel: None };
    let lex_dir = s.lexical_index_dir();
    let first = s.sync_mail(&src, &opts, &mut |_| {}).unwrap();
    let hits = |q: &str| LexicalIndex::open(&lex_dir).unwrap().search(q, 8).unwrap().len();
    let watermark = || LexicalIndex::open(&lex_dir).unwrap().watermark().unwrap();
    assert_eq!(hits("zebrafish"), 1, "searchable as soon as sync_mail returns");
    assert_eq!(watermark(), Some(first.run_id));

    // New mail and a deletion in one reconcile: the index follows incrementally.
    let mut b = Mail::new("s2@x", "Platypus minutes", "Mon, 6 Jan 2025 11:00:00 +0000");
    b.body = "meeting";
    write(&md.join("cur/2:2,S"), &b.bytes(), 200);
    std::fs::remove_file(md.join("cur/1:2,S")).unwrap();
    let second = s.sync_mail(&src, &opts, &mut |_| {}).unwrap();
    assert_eq!((second.added, second.soft_deleted), (1, 1));
    assert_eq!(hits("platypus"), 1);
    assert_eq!(hits("zebrafish"), 0, "a soft-deleted message leaves the index");
    assert_eq!(watermark(), Some(second.run_id));

    // Nothing changed: only the watermark moves.
    let third = s.sync_mail(&src, &opts, &mut |_| {}).unwrap();
    assert!(!third.changed);
    assert_eq!(watermark(), Some(third.run_id));

    // An index that fell behind (a crash between the mirror's commit and the index's) catches
    // up from its watermark; an index claiming a run the mirror never had is rebuilt.
    LexicalIndex::open(&lex_dir).unwrap().set_watermark(-7).unwrap();
    write(&md.join("cur/1:2,S"), &a.bytes(), 300);
    let fourth = s.sync_mail(&src, &opts, &mut |_| {}).unwrap();
    assert_eq!(fourth.restored, 1);
    assert_eq!(hits("zebrafish"), 1);
    assert_eq!(hits("platypus"), 1);
    assert_eq!(LexicalIndex::open(&lex_dir).unwrap().len(), 2, "no duplicates after a rebuild");
    assert_eq!(watermark(), Some(fourth.run_id));
}

#[test]
fn a_run_that_crashed_before_finishing_is_still_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("Maildir");
    write(
        &md.join("cur/1:2,S"),
        &Mail::new("k1@x", "Walrus agenda", "Mon, 6 Jan 2025 10:00:00 +0000").bytes(),
        100,
    );
    let s = steward(dir.path());
    let src = MaildirSource::new(&md);
    let opts = SyncOptions { account: Some("a".into()), cancel: None };
    s.sync_mail(&src, &opts, &mut |_| {}).unwrap();
    // A mirror-only run commits a new message, then "crashes" before recording its end and
    // before the index sees it.
    write(
        &md.join("cur/2:2,S"),
        &Mail::new("k2@x", "Narwhal budget", "Mon, 6 Jan 2025 11:00:00 +0000").bytes(),
        200,
    );
    let crashed = s.mirror().sync(&src, &opts, &mut |_| {}).unwrap();
    // (Backdated a minute, so that "written since the next run started" cannot cover it.)
    let db = rusqlite::Connection::open(dir.path().join("home/mirror.db")).unwrap();
    db.execute(
        "UPDATE sync_runs SET finished_at = NULL, started_at = started_at - 60 WHERE id = ?1",
        [crashed.run_id],
    )
    .unwrap();
    db.execute(
        "UPDATE messages SET updated_at = updated_at - 60 WHERE rfc_message_id = 'k2@x'",
        [],
    )
    .unwrap();
    // The next run finds nothing new on disk, yet the index must catch up with the crashed run.
    let next = s.sync_mail(&src, &opts, &mut |_| {}).unwrap();
    assert_eq!(next.added, 0);
    let lex = LexicalIndex::open(&s.lexical_index_dir()).unwrap();
    assert_eq!(lex.search("narwhal", 8).unwrap().len(), 1);
    assert_eq!(lex.search("walrus", 8).unwrap().len(), 1);
    assert_eq!(lex.len(), 2);
    // An index claiming a run this mirror never had is rebuilt, not trusted.
    lex.set_watermark(1_000_000).unwrap();
    drop(lex);
    s.sync_mail(&src, &opts, &mut |_| {}).unwrap();
    let lex = LexicalIndex::open(&s.lexical_index_dir()).unwrap();
    assert_eq!(lex.len(), 2);
    assert_eq!(lex.watermark().unwrap(), Some(s.mirror().last_finished_run().unwrap()));
}
