//! The three on-disk formats against the real corpora.

use std::collections::BTreeSet;

use steward_connectors::mail::{EmlxSource, MaildirSource, MboxFlavor, MboxSource};
use steward_core::mirror::{MailSource, SyncOptions};

use super::fixtures::{steward, with_corpora};

#[test]
fn maildir_corpus_folders_and_flags() {
    with_corpora(|root| {
        let src = MaildirSource::new(root.join("stalwart-mail-parser/resources/maildir"));
        let files = src.scan().unwrap();
        assert_eq!(files.len(), 6);
        let boxes: BTreeSet<String> = files.iter().map(|f| f.mailbox.name.clone()).collect();
        let want: BTreeSet<String> =
            ["INBOX", "My Folder", "My Folder/Nested Folder"].map(String::from).into();
        assert_eq!(boxes, want);
        let dir = tempfile::tempdir().unwrap();
        let s = steward(dir.path());
        let opts = SyncOptions { account: Some("corpus".into()), cancel: None };
        let sum = s.mirror().sync(&src, &opts, &mut |_| {}).unwrap();
        assert_eq!(sum.error_count, 0, "{:?}", sum.errors);
        assert_eq!(sum.added + sum.copies, 6);
    });
}

#[test]
fn emlx_corpus_framing_partials_and_attachment_files() {
    with_corpora(|root| {
        let base = root.join("apple-emlx");
        let dir = tempfile::tempdir().unwrap();
        let s = steward(dir.path());
        let opts = SyncOptions { account: Some("apple".into()), cancel: None };
        let sum = s.mirror().sync(&EmlxSource::new(&base), &opts, &mut |_| {}).unwrap();
        // invalid.emlx (no count line) and broken2.emlx (no count) are framing errors; nothing else.
        let bad: BTreeSet<String> =
            sum.errors.iter().map(|e| e.path.rsplit('/').next().unwrap().to_owned()).collect();
        assert_eq!(
            bad,
            ["broken2.emlx", "invalid.emlx"].map(String::from).into(),
            "{:?}",
            sum.errors
        );
        assert!(sum.errors.iter().all(|e| e.code == "MAIL_BAD_FRAMING"));
        let c = rusqlite::Connection::open(dir.path().join("home/mirror.db")).unwrap();
        // Partial files with text are `partial`, full files `full`.
        let states: Vec<(String, String)> = {
            let mut st = c.prepare("SELECT f.path, m.body_state FROM message_paths p JOIN source_files f ON f.id = p.file_id JOIN messages m ON m.id = p.message_id").unwrap();
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
        };
        assert!(
            states.iter().any(|(p, s)| p.ends_with("207046.partial.emlx") && s == "partial"),
            "{states:?}"
        );
        // 114892.partial.emlx has the same Message-ID as a complete copy (terhechte 1.emlx): the
        // logical message is full, whichever file arrived first.
        assert!(
            states.iter().any(|(p, s)| p.ends_with("114892.partial.emlx") && s == "full"),
            "{states:?}"
        );
        assert!(states.iter().any(|(p, s)| p.ends_with("plaintext.emlx") && s == "full"));
        // plaintext.emlx's trailer: read + draft, date-received 1581000000.
        let (flags, received): (i64, i64) = c
            .query_row("SELECT flags, received_at FROM messages WHERE rfc_message_id = '7A129E26-2C1F-4517-B6B5-39460ED50E12@example.com'", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        assert_eq!((flags & 1, flags & 8, received), (1, 8, 1_581_000_000));
        // Attachments stripped from a partial file are read from Attachments/<id>/<part>/.
        let msgs = base.join("partial-emlx-converter/test/__testdata/input");
        for (id, part, name) in [
            ("207046", "2", "Tübingen.pdf"),
            ("465622", "2", "7.10_第2回研究会.pdf"),
            (
                "136153",
                "2",
                "ReallyReallyReallyReallyReallyReallyReallyReallyReallyReallylong_filename.xls",
            ),
            ("229417", "2", "Warnmeldung_unbekannter_Art.png"),
        ] {
            let want =
                std::fs::read(msgs.join("Attachments").join(id).join(part).join(name)).unwrap();
            let shas: Vec<Option<String>> = {
                let mut st = c
                    .prepare(
                        "SELECT a.sha256 FROM attachments a JOIN message_paths p ON p.message_id = a.message_id
                         JOIN source_files f ON f.id = p.file_id WHERE f.path LIKE ?1",
                    )
                    .unwrap();
                st.query_map([format!("%{id}.partial.emlx")], |r| r.get(0))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect()
            };
            let found = shas
                .iter()
                .flatten()
                .any(|sha| std::fs::read(s.mirror().blob_path(sha).unwrap()).unwrap() == want);
            assert!(found, "{id}: bytes of {name} not in the blob store ({shas:?})");
        }
    });
}

#[test]
fn mbox_corpus_mirrors_every_message() {
    with_corpora(|root| {
        let dir = tempfile::tempdir().unwrap();
        let s = steward(dir.path());
        let opts = SyncOptions { account: Some("mbox".into()), cancel: None };
        let src =
            MboxSource::new(root.join("oracles/mbox/cpython_msgs.mbox")).flavor(MboxFlavor::Mboxo);
        let sum = s.mirror().sync(&src, &opts, &mut |_| {}).unwrap();
        let c = rusqlite::Connection::open(dir.path().join("home/mirror.db")).unwrap();
        let paths: i64 =
            c.query_row("SELECT count(*) FROM message_paths", [], |r| r.get(0)).unwrap();
        let distinct_ids: i64 =
            c.query_row("SELECT count(*) FROM messages", [], |r| r.get(0)).unwrap();
        // 48 messages; several CPython fixtures share a Message-ID, so they are copies of one.
        assert_eq!(paths, 48);
        assert_eq!(sum.added as i64, distinct_ids);
        assert_eq!(sum.added + sum.copies + sum.unchanged, 48);
        let again = s.mirror().sync(&src, &opts, &mut |_| {}).unwrap();
        assert_eq!((again.added, again.updated, again.files_unchanged), (0, 0, 1));
    });
}
