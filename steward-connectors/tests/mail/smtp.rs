//! Sending through the write journal over real SMTP (aiosmtpd on loopback): the message we build,
//! one delivery per operation whatever is retried, every failure class mapped to `failed` or
//! `unknown`, and confirmation from the Sent copy the person's sync tool files.

use std::{path::PathBuf, time::Duration};

use steward_connectors::{
    mail::{
        MaildirSource,
        smtp::{Security, SmtpConfig, SmtpSender},
    },
    testing::{SinkOptions, SmtpSink},
};
use steward_core::{
    Steward, StewardError,
    journal::OpState,
    mirror::SyncOptions,
    outbox::{MailDraft, Sender},
};

const NOW: i64 = 1_790_000_000;
const ACCOUNT: &str = "me";

struct Rig {
    _dir: tempfile::TempDir,
    root: PathBuf,
    steward: Steward,
    maildir: PathBuf,
}

fn rig() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let maildir = root.join("Mail");
    for sub in ["cur", "new", "tmp", ".Sent/cur", ".Sent/new", ".Sent/tmp"] {
        std::fs::create_dir_all(maildir.join(sub)).unwrap();
    }
    let steward = Steward::builder().home(root.join("home")).open().unwrap();
    Rig { _dir: dir, root, steward, maildir }
}

impl Rig {
    fn sink(&self, mut opts: SinkOptions) -> SmtpSink {
        if opts.sent_maildir.is_none() {
            opts.sent_maildir = Some(self.maildir.join(".Sent"));
        }
        SmtpSink::start(&self.root, &opts)
    }

    fn sync(&self) {
        let opts = SyncOptions { account: Some(ACCOUNT.into()), cancel: None };
        self.steward.mirror().sync(&MaildirSource::new(&self.maildir), &opts, &mut |_| {}).unwrap();
    }

    /// The Sent copy holding `needle`, as text.
    fn sent_copy(&self, needle: &str) -> (PathBuf, String) {
        for e in std::fs::read_dir(self.maildir.join(".Sent/cur")).unwrap() {
            let p = e.unwrap().path();
            let text = std::fs::read_to_string(&p).unwrap();
            if text.contains(needle) {
                return (p, text);
            }
        }
        panic!("no Sent copy contains {needle}");
    }
}

fn sender() -> Sender {
    Sender {
        account: ACCOUNT.into(),
        from: "ada@example.org".into(),
        from_name: Some("Ada".into()),
    }
}

fn smtp(port: u16) -> SmtpSender {
    SmtpSender::new(SmtpConfig::new("127.0.0.1", port, Security::Plain, sender())).unwrap()
}

fn draft(subject: &str) -> MailDraft {
    MailDraft {
        account: ACCOUNT.into(),
        from: "ada@example.org".into(),
        from_name: Some("Ada".into()),
        to: vec!["bob@example.org".into()],
        cc: vec!["carol@example.org".into()],
        subject: subject.into(),
        body: "Hello Bob,\n\nthe numbers are attached.\n\nAda".into(),
        ..MailDraft::default()
    }
}

#[test]
fn a_mail_is_sent_once_with_our_headers_and_confirmed_by_its_sent_copy() {
    let r = rig();
    let sink = r.sink(SinkOptions::default());
    let smtp = smtp(sink.port);
    let file = r.root.join("numbers.csv");
    std::fs::write(&file, "quarter,revenue\nQ3,1200\n").unwrap();
    let mut d = draft("Quarterly numbers");
    d.bcc = vec!["dan@example.org".into()];
    d.attachments = vec![file.display().to_string()];
    let mail = r.steward.prepare_mail(&d, NOW).unwrap();
    let op = r.steward.send_mail(&mail, "ui:1", None, None, &smtp, NOW).unwrap();
    assert_eq!(op.state, OpState::BackendReturned, "{op:?}");
    assert_eq!(op.kind, "mail.send");
    assert!(op.backend_result.as_ref().unwrap()["response"].as_str().unwrap().starts_with("250"));

    let got = sink.deliveries();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["message_id"], format!("<{}>", mail.message_id));
    let rcpt: Vec<&str> =
        got[0]["rcpt_tos"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(rcpt, ["bob@example.org", "carol@example.org", "dan@example.org"]);
    assert!(got[0]["bcc_header"].is_null(), "Bcc must stay out of the headers");
    let (_, text) = r.sent_copy(&mail.message_id);
    assert!(text.contains("Subject: Quarterly numbers"));
    assert!(text.contains("filename=\"numbers.csv\""), "{text}");

    // The same key again: the journaled operation, no second delivery.
    let again = r.steward.send_mail(&mail, "ui:1", None, None, &smtp, NOW + 5).unwrap();
    assert_eq!(again.id, op.id);
    // The same key for another mail is refused.
    let other = r.steward.prepare_mail(&draft("Something else"), NOW).unwrap();
    let err = r.steward.send_mail(&other, "ui:1", None, None, &smtp, NOW).unwrap_err();
    assert_eq!(err.code(), "JOURNAL_KEY_REUSED");
    assert_eq!(sink.deliveries().len(), 1);

    // Not mirrored yet: not confirmed.
    let pass = r.steward.confirm_pass(NOW + 10).unwrap();
    assert_eq!((pass.checked, pass.confirmed, pass.pending), (1, 0, 1));
    r.sync();
    let pass = r.steward.confirm_pass(NOW + 20).unwrap();
    assert_eq!((pass.checked, pass.confirmed), (1, 1));
    let op = r.steward.read_write_operation(op.id).unwrap();
    assert_eq!(op.state, OpState::Confirmed);
    assert_eq!(op.evidence.as_ref().unwrap()["matches"][0]["matched_on"], "message_id");
    assert_eq!(r.steward.confirm_pass(NOW + 30).unwrap().checked, 0, "a confirmed op is done");

    // A reply carries the thread's linkage.
    let mut reply = draft("Re: Quarterly numbers");
    reply.in_reply_to = Some(format!("<{}>", mail.message_id));
    let reply = r.steward.prepare_mail(&reply, NOW + 40).unwrap();
    assert_eq!(reply.references, vec![mail.message_id.clone()]);
    let op = r.steward.send_mail(&reply, "ui:2", None, None, &smtp, NOW + 40).unwrap();
    assert_eq!(op.kind, "mail.reply");
    let (_, text) = r.sent_copy(&reply.message_id);
    assert!(text.contains(&format!("In-Reply-To: <{}>", mail.message_id)), "{text}");
    assert!(text.contains(&format!("References: <{}>", mail.message_id)), "{text}");
    r.sync();
    assert_eq!(r.steward.confirm_pass(NOW + 60).unwrap().confirmed, 1);
    assert_eq!(sink.deliveries().len(), 2);
}

#[test]
fn secrets_and_bad_drafts_are_refused_before_anything_is_journaled() {
    let r = rig();
    let ssh = r.root.join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(ssh.join("id_ed25519"), "-----BEGIN OPENSSH PRIVATE KEY-----").unwrap();
    let mut d = draft("keys");
    d.attachments = vec![ssh.join("id_ed25519").display().to_string()];
    assert_eq!(r.steward.prepare_mail(&d, NOW).unwrap_err().code(), "PATH_SENSITIVE");
    let mut d = draft("home");
    d.attachments = vec![r.root.join("home/ops.db").display().to_string()];
    let _ = r.steward.journal().unwrap();
    assert_eq!(r.steward.prepare_mail(&d, NOW).unwrap_err().code(), "PATH_SENSITIVE");
    for bad in [
        MailDraft { to: vec!["bob@example.org\r\nBcc: eve@evil.example".into()], ..draft("x") },
        MailDraft { to: vec![], cc: vec![], ..draft("x") },
        MailDraft { subject: "two\nlines".into(), ..draft("x") },
        MailDraft { from: "not-an-address".into(), ..draft("x") },
        MailDraft { to: vec!["a@example.org".into(); 51], ..draft("x") },
    ] {
        assert_eq!(
            r.steward.prepare_mail(&bad, NOW).unwrap_err().code(),
            "MAIL_INVALID",
            "{bad:?}"
        );
    }
    assert!(r.steward.list_write_operations(None, 0, 100).unwrap().is_empty());
    // A file that changes after approval is not sent: the bytes must be the journaled ones.
    let sink = r.sink(SinkOptions::default());
    let file = r.root.join("contract.txt");
    std::fs::write(&file, "version 1").unwrap();
    let mut d = draft("contract");
    d.attachments = vec![file.display().to_string()];
    let mail = r.steward.prepare_mail(&d, NOW).unwrap();
    std::fs::write(&file, "version 2, swapped").unwrap();
    let op = r.steward.send_mail(&mail, "k", None, None, &smtp(sink.port), NOW).unwrap();
    assert_eq!(op.state, OpState::Failed);
    assert_eq!(op.backend_result.unwrap()["class"], "build");
    assert!(sink.deliveries().is_empty());
}

fn send_through(r: &Rig, smtp: &SmtpSender, key: &str) -> steward_core::journal::Operation {
    let mail = r.steward.prepare_mail(&draft(key), NOW).unwrap();
    r.steward.send_mail(&mail, key, None, None, smtp, NOW).unwrap()
}

fn class(op: &steward_core::journal::Operation) -> String {
    op.backend_result.as_ref().unwrap()["class"].as_str().unwrap().to_owned()
}

#[test]
fn every_failure_class_is_failed_or_unknown_never_retried() {
    let r = rig();
    // A refused recipient: nothing accepted.
    let sink = r.sink(SinkOptions {
        reject_rcpt: Some("carol@example.org".into()),
        ..SinkOptions::default()
    });
    let op = send_through(&r, &smtp(sink.port), "rcpt");
    assert_eq!((op.state, class(&op).as_str()), (OpState::Failed, "recipient_refused"));
    assert!(sink.deliveries().is_empty());
    drop(sink);

    // Wrong credentials.
    let sink = r.sink(SinkOptions {
        auth: Some("ada:Corr3ct-Horse-B4ttery".into()),
        ..SinkOptions::default()
    });
    let wrong = SmtpSender::new(
        SmtpConfig::new("127.0.0.1", sink.port, Security::Plain, sender())
            .with_credentials("ada", "Wr0ng-Horse-B4ttery"),
    )
    .unwrap();
    let op = send_through(&r, &wrong, "auth");
    assert_eq!((op.state, class(&op).as_str()), (OpState::Failed, "auth"), "{:?}", op.error);
    let right = SmtpSender::new(
        SmtpConfig::new("127.0.0.1", sink.port, Security::Plain, sender())
            .with_credentials("ada", "Corr3ct-Horse-B4ttery"),
    )
    .unwrap();
    assert_eq!(send_through(&r, &right, "auth-ok").state, OpState::BackendReturned);
    assert_eq!(sink.deliveries().len(), 1);
    // Credentials never reach the journal, the audit trail or any other store.
    for e in std::fs::read_dir(r.root.join("home")).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            let bytes = std::fs::read(&p).unwrap();
            for pw in ["Corr3ct-Horse-B4ttery", "Wr0ng-Horse-B4ttery"] {
                let found = bytes.windows(pw.len()).any(|w| w == pw.as_bytes());
                assert!(!found, "{pw} found in {}", p.display());
            }
        }
    }
    // Implicit TLS against a plain-text server: the handshake fails, nothing is sent.
    let tls =
        SmtpSender::new(SmtpConfig::new("127.0.0.1", sink.port, Security::Tls, sender())).unwrap();
    let op = send_through(&r, &tls, "tls");
    assert_eq!((op.state, class(&op).as_str()), (OpState::Failed, "tls"), "{:?}", op.error);
    // STARTTLS that the server does not offer is refused, not downgraded.
    let starttls =
        SmtpSender::new(SmtpConfig::new("127.0.0.1", sink.port, Security::StartTls, sender()))
            .unwrap();
    let op = send_through(&r, &starttls, "starttls");
    assert_eq!((op.state, class(&op).as_str()), (OpState::Failed, "tls"), "{:?}", op.error);
    let port = sink.port;
    drop(sink);

    // Nobody listening.
    let op = send_through(&r, &smtp(port), "connect");
    assert_eq!((op.state, class(&op).as_str()), (OpState::Failed, "connect"));

    // The server says no to the message itself.
    let sink = r.sink(SinkOptions { after_data: Some("reject"), ..SinkOptions::default() });
    let op = send_through(&r, &smtp(sink.port), "rejected");
    assert_eq!((op.state, class(&op).as_str()), (OpState::Failed, "rejected"));
    drop(sink);

    // A timeout after DATA: the server kept the message. Unknown, never failed-and-retryable.
    let sink = r.sink(SinkOptions { after_data: Some("hang"), ..SinkOptions::default() });
    let mut cfg = SmtpConfig::new("127.0.0.1", sink.port, Security::Plain, sender());
    cfg.timeout = Duration::from_secs(2);
    let op = send_through(&r, &SmtpSender::new(cfg).unwrap(), "hang");
    assert_eq!((op.state, class(&op).as_str()), (OpState::Unknown, "timeout"));
    assert_eq!(sink.deliveries().len(), 1);
    drop(sink);

    // The connection drops after DATA: unknown too.
    let sink = r.sink(SinkOptions { after_data: Some("drop"), ..SinkOptions::default() });
    let op = send_through(&r, &smtp(sink.port), "drop");
    assert_eq!(
        (op.state, class(&op).as_str()),
        (OpState::Unknown, "connection_reset"),
        "{:?}",
        op.error
    );
    assert_eq!(sink.deliveries().len(), 1);
    drop(sink);

    // Both unknowns were delivered; their Sent copies confirm them. The failed ones are never
    // examined and nothing is re-sent.
    r.sync();
    let pass = r.steward.confirm_pass(NOW + 30).unwrap();
    assert_eq!((pass.checked, pass.confirmed), (3, 3), "{pass:?}"); // auth-ok, hang, drop
    assert_eq!(r.steward.list_write_operations(Some(OpState::Failed), 0, 100).unwrap().len(), 6);

    // Plain text to another machine is refused by configuration.
    let far = SmtpConfig::new("192.0.2.10", 25, Security::Plain, sender());
    assert_eq!(SmtpSender::new(far).unwrap_err().code(), "MAIL_CONFIG");
}

/// Rewrites the Message-ID of the Sent copy holding `id` (some servers replace it).
fn rewrite_message_id(r: &Rig, id: &str, new: &str) {
    let (path, text) = r.sent_copy(id);
    std::fs::write(&path, text.replace(id, new)).unwrap();
}

#[test]
fn without_our_message_id_every_field_must_match_and_two_matches_are_not_a_confirmation() {
    let r = rig();
    let sink = r.sink(SinkOptions::default());
    let smtp = smtp(sink.port);
    // One mail whose copy lost our Message-ID: confirmed on its fields.
    let a = r.steward.prepare_mail(&draft("Lunch on Friday"), NOW).unwrap();
    let op_a = r.steward.send_mail(&a, "a", None, None, &smtp, NOW).unwrap();
    rewrite_message_id(&r, &a.message_id, "rewritten-a@mx.example");
    // A copy that differs in one recipient is not evidence for it.
    let b =
        r.steward.prepare_mail(&MailDraft { cc: vec![], ..draft("Board minutes") }, NOW).unwrap();
    let op_b = r.steward.send_mail(&b, "b", None, None, &smtp, NOW).unwrap();
    let (path, text) = r.sent_copy(&b.message_id);
    std::fs::write(
        &path,
        text.replace(&b.message_id, "rewritten-b@mx.example").replace("bob@", "bobby@"),
    )
    .unwrap();
    // Two identical mails whose copies both lost their ids: each sees two candidates.
    let c1 = r.steward.prepare_mail(&draft("Same words"), NOW).unwrap();
    let c2 = r.steward.prepare_mail(&draft("Same words"), NOW).unwrap();
    let op_c1 = r.steward.send_mail(&c1, "c1", None, None, &smtp, NOW).unwrap();
    let op_c2 = r.steward.send_mail(&c2, "c2", None, None, &smtp, NOW).unwrap();
    rewrite_message_id(&r, &c1.message_id, "rewritten-c1@mx.example");
    rewrite_message_id(&r, &c2.message_id, "rewritten-c2@mx.example");
    r.sync();

    let pass = r.steward.confirm_pass(NOW + 10).unwrap();
    assert_eq!(
        (pass.checked, pass.confirmed, pass.ambiguous, pass.pending),
        (4, 1, 2, 1),
        "{pass:?}"
    );
    let a_op = r.steward.read_write_operation(op_a.id).unwrap();
    assert_eq!(a_op.state, OpState::Confirmed);
    assert_eq!(a_op.evidence.unwrap()["matches"][0]["matched_on"], "fields");
    // Checked until the limit, then a person reviews, with what was found stored.
    for k in 1..steward_core::journal::CONFIRMATION_LIMIT {
        r.steward.confirm_pass(NOW + 10 + k * 60).unwrap();
    }
    for id in [op_b.id, op_c1.id, op_c2.id] {
        let op = r.steward.read_write_operation(id).unwrap();
        assert_eq!(op.state, OpState::NeedsReview, "{op:?}");
        assert_eq!(op.confirmation_attempts, steward_core::journal::CONFIRMATION_LIMIT);
    }
    let c1 = r.steward.read_write_operation(op_c1.id).unwrap();
    assert_eq!(c1.evidence.unwrap()["matches"].as_array().unwrap().len(), 2);
    assert_eq!(r.steward.confirm_pass(NOW + 10_000).unwrap().checked, 0);
    assert_eq!(sink.deliveries().len(), 4, "nothing was re-sent");
}

#[test]
fn scheduled_sends_go_out_once_when_due() {
    let r = rig();
    let sink = r.sink(SinkOptions::default());
    let smtp = smtp(sink.port);
    let mail = r.steward.prepare_mail(&draft("Later"), NOW).unwrap();
    let op = r.steward.send_mail(&mail, "later", None, Some(NOW + 3_600), &smtp, NOW).unwrap();
    assert_eq!((op.state, op.kind.as_str()), (OpState::Scheduled, "mail.send_later"));
    assert_eq!(r.steward.send_due(&smtp, NOW + 60).unwrap().claimed, 0);
    assert!(sink.deliveries().is_empty());
    let report = r.steward.send_due(&smtp, NOW + 3_600).unwrap();
    assert_eq!((report.claimed, report.backend_returned), (1, 1));
    assert_eq!(r.steward.send_due(&smtp, NOW + 7_200).unwrap().claimed, 0);
    assert_eq!(sink.deliveries().len(), 1);
    let op = r.steward.read_write_operation(op.id).unwrap();
    assert_eq!((op.state, op.attempts), (OpState::BackendReturned, 1));
}

#[test]
fn an_approved_request_sends_exactly_what_was_approved_once() {
    use serde_json::json;
    use steward_core::{
        approval::{NewApproval, Resolution},
        policy::Level,
    };
    let r = rig();
    let sink = r.sink(SinkOptions::default());
    let smtp = smtp(sink.port);
    let approvals = r.steward.approvals().unwrap();
    let input = json!({"to": ["bob@example.org"], "subject": "Draft", "body": "v1"});
    let request = |input: serde_json::Value| NewApproval {
        chat: Some("c".into()),
        requested_by: "agent:helper".into(),
        tool: "mail.send".into(),
        input,
        summary: "send".into(),
        level: Level::Confirm,
        timeout_secs: None,
        taint: None,
    };
    let now = steward_core::time::now_secs();
    let a = approvals.request(&request(input.clone()), None, now).unwrap();
    // Not approved yet: refused, nothing journaled.
    let err = r.steward.send_approved_mail(a.id, &sender(), &smtp, now).unwrap_err();
    assert_eq!(err.code(), "APPROVAL_NOT_APPROVED", "{err}");
    assert!(r.steward.list_write_operations(None, 0, 10).unwrap().is_empty());
    // The person edits the body and approves.
    let me = r.steward.human("Ada").unwrap();
    let edited = json!({"to": ["bob@example.org"], "subject": "Draft", "body": "v2, edited"});
    approvals.resolve(a.id, &Resolution::Edit(edited), None, &me, None, None, now).unwrap();
    let op = r.steward.send_approved_mail(a.id, &sender(), &smtp, now).unwrap();
    assert_eq!((op.state, op.approval_id), (OpState::BackendReturned, Some(a.id)));
    assert_eq!(op.input["body"], "v2, edited");
    assert_eq!(op.input["from"], "ada@example.org");
    // Executing the same approval again is the same operation, not a second mail.
    let again = r.steward.send_approved_mail(a.id, &sender(), &smtp, now + 1).unwrap();
    assert_eq!(again.id, op.id);
    assert_eq!(sink.deliveries().len(), 1);
    // A denied request never runs.
    let d = approvals.request(&request(input), None, now).unwrap();
    approvals.resolve(d.id, &Resolution::Deny, None, &me, None, None, now).unwrap();
    assert!(r.steward.send_approved_mail(d.id, &sender(), &smtp, now).is_err());
    assert_eq!(sink.deliveries().len(), 1);
}

#[test]
fn configuration_comes_from_the_file_and_the_environment_and_unsafe_settings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let none = |_: &str| None::<String>;
    // Nothing configured: a typed error naming what to set.
    let err = SmtpConfig::load_with(home, &none).unwrap_err();
    assert_eq!(err.code(), "MAIL_CONFIG");
    assert!(err.to_string().contains("STEWARD_SMTP_HOST"), "{err}");
    let write = |text: &str| std::fs::write(home.join("config.toml"), text).unwrap();
    write(
        "[mail]\naccount = \"me\"\nfrom = \"ada@example.org\"\nsmtp_host = \"smtp.example.org\"\nsmtp_security = \"starttls\"\n",
    );
    let cfg = SmtpConfig::load_with(home, &none).unwrap();
    assert_eq!(
        (cfg.host.as_str(), cfg.port, cfg.security),
        ("smtp.example.org", 587, Security::StartTls)
    );
    // The environment wins.
    let env = |k: &str| match k {
        "STEWARD_SMTP_HOST" => Some("127.0.0.1".to_owned()),
        "STEWARD_SMTP_SECURITY" => Some("plain".to_owned()),
        "STEWARD_SMTP_PORT" => Some("2525".to_owned()),
        _ => None,
    };
    let cfg = SmtpConfig::load_with(home, &env).unwrap();
    assert_eq!((cfg.host.as_str(), cfg.port, cfg.security), ("127.0.0.1", 2525, Security::Plain));
    // Plain text to another machine, an unknown key, a password file others can read.
    write(
        "[mail]\naccount = \"me\"\nfrom = \"ada@example.org\"\nsmtp_host = \"smtp.example.org\"\nsmtp_security = \"plain\"\n",
    );
    assert!(SmtpConfig::load_with(home, &none).unwrap_err().to_string().contains("loopback"));
    write("[mail]\nsmtp_hostname = \"x\"\n");
    assert_eq!(SmtpConfig::load_with(home, &none).unwrap_err().code(), "MAIL_CONFIG");
    let secret = home.join("smtp-password");
    std::fs::write(&secret, "s3cret\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    write(&format!(
        "[mail]\naccount = \"me\"\nfrom = \"ada@example.org\"\nsmtp_host = \"smtp.example.org\"\nsmtp_username = \"ada\"\nsmtp_password_file = \"{}\"\n",
        secret.display()
    ));
    assert!(SmtpConfig::load_with(home, &none).unwrap_err().to_string().contains("chmod 600"));
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let cfg = SmtpConfig::load_with(home, &none).unwrap();
    assert!(format!("{cfg:?}").contains("<set>") && !format!("{cfg:?}").contains("s3cret"));
    // A keyring entry that does not exist is a typed error, not an empty password.
    write(
        "[mail]\naccount = \"me\"\nfrom = \"ada@example.org\"\nsmtp_host = \"smtp.example.org\"\nsmtp_username = \"nobody-here\"\nsmtp_password_keyring = \"steward-test-missing\"\n",
    );
    let err = SmtpConfig::load_with(home, &none).unwrap_err();
    assert!(err.to_string().contains("keyring entry"), "{err}");
}

/// A CA and a `localhost` server certificate signed by it, written as PEM files:
/// (ca.pem, server.pem, server.key).
fn test_pki(dir: &std::path::Path) -> (PathBuf, PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf =
        CertificateParams::new(vec!["localhost".to_owned()]).unwrap().signed_by(&key, &ca).unwrap();
    let paths = (dir.join("ca.pem"), dir.join("server.pem"), dir.join("server.key"));
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, leaf.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

#[test]
fn implicit_tls_and_starttls_send_when_the_certificate_verifies_and_refuse_when_not() {
    let r = rig();
    let (ca, cert, key) = test_pki(&r.root);
    for (mode, security) in [("implicit", Security::Tls), ("starttls", Security::StartTls)] {
        let sink = r.sink(SinkOptions {
            tls: Some((mode, cert.clone(), key.clone())),
            ..SinkOptions::default()
        });
        // Trusting the server's CA: sent, over TLS.
        let mut cfg = SmtpConfig::new("localhost", sink.port, security, sender());
        cfg.ca_file = Some(ca.clone());
        let op = send_through(&r, &SmtpSender::new(cfg).unwrap(), &format!("{mode}-trusted"));
        assert_eq!(op.state, OpState::BackendReturned, "{mode}: {:?}", op.error);
        assert_eq!(sink.deliveries().len(), 1);
        // Public roots only: the certificate does not verify, nothing is sent.
        let cfg = SmtpConfig::new("localhost", sink.port, security, sender());
        let op = send_through(&r, &SmtpSender::new(cfg).unwrap(), &format!("{mode}-untrusted"));
        assert_eq!(
            (op.state, class(&op).as_str()),
            (OpState::Failed, "tls"),
            "{mode}: {:?}",
            op.error
        );
        // The right CA but the wrong name: refused as well.
        let mut cfg = SmtpConfig::new("127.0.0.1", sink.port, security, sender());
        cfg.ca_file = Some(ca.clone());
        let op = send_through(&r, &SmtpSender::new(cfg).unwrap(), &format!("{mode}-wrong-name"));
        assert_eq!(
            (op.state, class(&op).as_str()),
            (OpState::Failed, "tls"),
            "{mode}: {:?}",
            op.error
        );
        assert_eq!(sink.deliveries().len(), 1);
    }
    // A server that requires STARTTLS refuses a plain-text client before any mail is accepted.
    let sink = r.sink(SinkOptions { tls: Some(("starttls", cert, key)), ..SinkOptions::default() });
    let mut cfg = SmtpConfig::new("127.0.0.1", sink.port, Security::Plain, sender());
    cfg.ca_file = Some(ca);
    let op = send_through(&r, &SmtpSender::new(cfg).unwrap(), "plain-to-starttls");
    assert_eq!(op.state, OpState::Failed, "{:?}", op.error);
    assert!(sink.deliveries().is_empty());
}

#[test]
fn a_mirrored_attachment_is_forwarded_from_its_blob() {
    let r = rig();
    let sink = r.sink(SinkOptions::default());
    // A received message with a PDF attachment, mirrored.
    let raw = "From: Carol <carol@example.org>\r\nTo: ada@example.org\r\nSubject: Invoice\r\n\
Message-ID: <inv-1@example.org>\r\nDate: Tue, 01 Dec 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nAttached.\r\n\
--b\r\nContent-Type: application/pdf; name=\"invoice.pdf\"\r\nContent-Disposition: attachment; filename=\"invoice.pdf\"\r\n\
Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQKJcfs\r\n--b--\r\n";
    std::fs::write(r.maildir.join("cur/inv:2,S"), raw).unwrap();
    r.sync();
    let id: i64 = rusqlite::Connection::open(r.root.join("home/mirror.db"))
        .unwrap()
        .query_row("SELECT id FROM messages WHERE identity = 'inv-1@example.org'", [], |x| x.get(0))
        .unwrap();
    let mut d = draft("Fwd: Invoice");
    d.attachments = vec![format!("attachment:{id}:0")];
    let mail = r.steward.prepare_mail(&d, NOW).unwrap();
    assert_eq!(mail.attachments[0].name, "invoice.pdf");
    assert_eq!(mail.attachments[0].mime_type, "application/pdf");
    let op = r.steward.send_mail(&mail, "fwd", None, None, &smtp(sink.port), NOW).unwrap();
    assert_eq!(op.state, OpState::BackendReturned, "{:?}", op.error);
    let (_, text) = r.sent_copy(&mail.message_id);
    assert!(text.contains("invoice.pdf") && text.contains("JVBERi0xLjQKJcfs"), "{text}");
    // An attachment that is not in the mirror is a typed error.
    d.attachments = vec![format!("attachment:{id}:7")];
    assert_eq!(r.steward.prepare_mail(&d, NOW).unwrap_err().code(), "MAIL_ATTACHMENT_NOT_FOUND");
}

#[test]
fn an_approved_reply_answers_the_mirrored_message_in_its_thread() {
    use serde_json::json;
    use steward_core::{
        approval::{NewApproval, Resolution},
        policy::Level,
    };
    let r = rig();
    let sink = r.sink(SinkOptions::default());
    let raw = "From: Carol <carol@example.org>\r\nTo: ada@example.org, dan@example.org\r\n\
Cc: Eve <eve@example.org>\r\nSubject: Dinner?\r\nMessage-ID: <dinner-2@example.org>\r\n\
In-Reply-To: <dinner-1@example.org>\r\nReferences: <dinner-0@example.org> <dinner-1@example.org>\r\n\
Date: Tue, 01 Dec 2026 18:00:00 +0000\r\n\r\nFriday at eight?\r\n";
    std::fs::write(r.maildir.join("cur/dinner:2,S"), raw).unwrap();
    r.sync();
    let id: i64 = rusqlite::Connection::open(r.root.join("home/mirror.db"))
        .unwrap()
        .query_row("SELECT id FROM messages WHERE identity = 'dinner-2@example.org'", [], |x| {
            x.get(0)
        })
        .unwrap();
    let approvals = r.steward.approvals().unwrap();
    let now = steward_core::time::now_secs();
    let a = approvals
        .request(
            &NewApproval {
                chat: None,
                requested_by: "agent:helper".into(),
                tool: "mail.reply".into(),
                input: json!({"message_id": id, "body": "Friday works.", "reply_all": true}),
                summary: "reply".into(),
                level: Level::Confirm,
                timeout_secs: None,
                taint: None,
            },
            None,
            now,
        )
        .unwrap();
    let me = r.steward.human("Ada").unwrap();
    approvals.resolve(a.id, &Resolution::Approve, None, &me, None, None, now).unwrap();
    let op = r.steward.send_approved_mail(a.id, &sender(), &smtp(sink.port), now).unwrap();
    assert_eq!(
        (op.state, op.kind.as_str()),
        (OpState::BackendReturned, "mail.reply"),
        "{:?}",
        op.error
    );
    // To the sender and, reply-all, the other recipients; never to ourselves.
    assert_eq!(op.input["to"], json!(["carol@example.org", "dan@example.org"]));
    assert_eq!(op.input["cc"], json!(["eve@example.org"]));
    assert_eq!(op.input["subject"], "Re: Dinner?");
    assert_eq!(op.input["in_reply_to"], "dinner-2@example.org");
    assert_eq!(
        op.input["references"],
        json!(["dinner-0@example.org", "dinner-1@example.org", "dinner-2@example.org"])
    );
    let (_, text) = r.sent_copy(op.input["message_id"].as_str().unwrap());
    assert!(text.contains("In-Reply-To: <dinner-2@example.org>"), "{text}");
    r.sync();
    assert_eq!(r.steward.confirm_pass(now + 5).unwrap().confirmed, 1);
    // The reply lands in the thread of the message it answers.
    let thread = |identity: &str| -> i64 {
        rusqlite::Connection::open(r.root.join("home/mirror.db"))
            .unwrap()
            .query_row("SELECT thread_id FROM messages WHERE identity = ?1", [identity], |x| {
                x.get(0)
            })
            .unwrap()
    };
    assert_eq!(thread(op.input["message_id"].as_str().unwrap()), thread("dinner-2@example.org"));
}
