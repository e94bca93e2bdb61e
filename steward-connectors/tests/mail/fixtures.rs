//! Shared fixtures: the corpora location, temp homes, and small message builders.

use std::path::{Path, PathBuf};

use steward_core::{Limits, Steward};

/// The external corpora, when `STEWARD_CORPORA` points at them; otherwise a visible skip, or
/// a failure under `CI` / `STEWARD_REQUIRE_CORPORA=1` (the one rule:
/// `steward_connectors::testing::corpus`).
pub(crate) fn corpora() -> Option<PathBuf> {
    steward_connectors::testing::corpora()
}

/// Runs `f` with the corpora; without them, what [`corpora`] does.
pub(crate) fn with_corpora(f: impl FnOnce(&Path)) {
    if let Some(dir) = corpora() {
        f(&dir);
    }
}

/// A fresh Steward in a temp dir. Two parser threads and small batches, so batching is exercised.
pub(crate) fn steward(dir: &Path) -> Steward {
    let mut limits = Limits::default();
    limits.ingest_batch = 7;
    limits.ingest_threads = 2;
    Steward::builder().home(dir.join("home")).limits(limits).open().expect("open steward")
}

/// Writes `bytes` to `path`, creating parents, with the given mtime (Unix seconds).
pub(crate) fn write(path: &Path, bytes: &[u8], mtime: i64) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, bytes).expect("write");
    set_mtime(path, mtime);
}

pub(crate) fn set_mtime(path: &Path, mtime: i64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).expect("open");
    f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(mtime as u64))
        .expect("mtime");
}

/// A minimal RFC 822 message.
pub(crate) struct Mail<'a> {
    pub(crate) id: Option<&'a str>,
    pub(crate) from: &'a str,
    pub(crate) to: &'a str,
    pub(crate) subject: &'a str,
    pub(crate) date: &'a str,
    pub(crate) in_reply_to: Option<&'a str>,
    pub(crate) references: &'a [&'a str],
    pub(crate) gm_thrid: Option<&'a str>,
    pub(crate) body: &'a str,
}

impl<'a> Mail<'a> {
    pub(crate) fn new(id: &'a str, subject: &'a str, date: &'a str) -> Self {
        Self {
            id: Some(id),
            from: "Alice <alice@example.org>",
            to: "Bob <bob@example.org>",
            subject,
            date,
            in_reply_to: None,
            references: &[],
            gm_thrid: None,
            body: "hello",
        }
    }

    pub(crate) fn bytes(&self) -> Vec<u8> {
        let mut s = String::new();
        s.push_str(&format!(
            "From: {}\nTo: {}\nSubject: {}\nDate: {}\n",
            self.from, self.to, self.subject, self.date
        ));
        if let Some(id) = self.id {
            s.push_str(&format!("Message-ID: <{id}>\n"));
        }
        if let Some(p) = self.in_reply_to {
            s.push_str(&format!("In-Reply-To: <{p}>\n"));
        }
        if !self.references.is_empty() {
            let r: Vec<String> = self.references.iter().map(|r| format!("<{r}>")).collect();
            s.push_str(&format!("References: {}\n", r.join(" ")));
        }
        if let Some(g) = self.gm_thrid {
            s.push_str(&format!("X-GM-THRID: {g}\n"));
        }
        s.push('\n');
        s.push_str(self.body);
        s.push('\n');
        s.into_bytes()
    }
}

/// Mirrors the Maildir at `md` into `s` as account "a".
pub(crate) fn mirror_maildir(s: &Steward, md: &Path) -> steward_core::mirror::SyncSummary {
    let opts = steward_core::mirror::SyncOptions { account: Some("a".into()), cancel: None };
    s.mirror().sync(&steward_connectors::mail::MaildirSource::new(md), &opts, &mut |_| {}).unwrap()
}

/// The mirror's id of the message with this Message-ID.
pub(crate) fn message_rowid(dir: &Path, message_id: &str) -> i64 {
    rusqlite::Connection::open(dir.join("home/mirror.db"))
        .unwrap()
        .query_row("SELECT id FROM messages WHERE rfc_message_id = ?1", [message_id], |r| r.get(0))
        .unwrap()
}
