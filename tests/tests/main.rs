//! End-to-end: several real sources into one home, as separate accounts.

use std::path::PathBuf;

mod bounds;
mod injection;

use steward_connectors::mail::{EmlxSource, MaildirSource, MboxFlavor, MboxSource};
use steward_core::{
    Steward,
    mirror::{MailSource, SyncOptions},
};

/// The external corpora; without them a visible skip, or a failure under `CI` /
/// `STEWARD_REQUIRE_CORPORA=1` (`steward_connectors::testing::corpora`).
fn corpora() -> Option<PathBuf> {
    steward_connectors::testing::corpora()
}

#[test]
fn three_formats_three_accounts_one_home() {
    let Some(root) = corpora() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let steward = Steward::builder().home(dir.path().join("home")).open().unwrap();
    let sources: Vec<(&str, Box<dyn MailSource>)> = vec![
        (
            "maildir",
            Box::new(MaildirSource::new(root.join("stalwart-mail-parser/resources/maildir"))),
        ),
        ("apple", Box::new(EmlxSource::new(root.join("apple-emlx")))),
        (
            "mbox",
            Box::new(
                MboxSource::new(root.join("oracles/mbox/cpython_msgs.mbox"))
                    .flavor(MboxFlavor::Mboxo),
            ),
        ),
        // The same mbox again under another account: identities are per account.
        (
            "mbox-copy",
            Box::new(
                MboxSource::new(root.join("oracles/mbox/cpython_msgs.mbox"))
                    .flavor(MboxFlavor::Mboxo),
            ),
        ),
    ];
    let mut added = Vec::new();
    for (account, source) in &sources {
        let opts = SyncOptions { account: Some((*account).to_owned()), cancel: None };
        let s = steward.mirror().sync(source.as_ref(), &opts, &mut |_| {}).unwrap();
        added.push(s.added);
    }
    assert!(added.iter().all(|&a| a > 0), "{added:?}");
    assert_eq!(added[2], added[3], "a second account gets its own copy of every message");

    let c = rusqlite::Connection::open(dir.path().join("home/mirror.db")).unwrap();
    let accounts: i64 = c.query_row("SELECT count(*) FROM accounts", [], |r| r.get(0)).unwrap();
    assert_eq!(accounts, 4);
    // No thread spans two accounts.
    let mixed: i64 = c
        .query_row(
            "SELECT count(*) FROM messages m JOIN threads t ON t.id = m.thread_id WHERE t.account_id != m.account_id",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(mixed, 0);
    let stats = steward.mirror().stats().unwrap();
    assert_eq!(stats.messages_live, added.iter().sum::<u64>());
    // Everything converged: a second pass over every source changes nothing.
    for (account, source) in &sources {
        let opts = SyncOptions { account: Some((*account).to_owned()), cancel: None };
        let s = steward.mirror().sync(source.as_ref(), &opts, &mut |_| {}).unwrap();
        assert_eq!((s.added, s.updated, s.soft_deleted), (0, 0, 0), "{account}");
    }
    steward.mirror().database().integrity_check().unwrap();
}
