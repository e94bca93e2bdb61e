//! The [`MailTransport`] contract.

use std::path::Path;

use sha2::{Digest as _, Sha256};

use super::no_panic;
use crate::{
    journal::OpState,
    mirror::hex,
    outbox::{MailTransport, OutgoingAttachment, OutgoingMail, SubmitClass},
};

/// A fixture server and two mails, for [`mail_transport_contract`].
#[derive(Clone, Copy)]
pub struct TransportExpectations<'a> {
    /// A mail the server accepts (no attachments needed).
    pub accepted: &'a OutgoingMail,
    /// A mail with a recipient the server refuses (before DATA).
    pub refused: &'a OutgoingMail,
    /// The Message-IDs (without angle brackets) the server has accepted so far, in order: the
    /// server's own record, not the transport's.
    pub delivered: &'a dyn Fn() -> Vec<String>,
    /// A directory the suite may write attachment files into (created).
    pub scratch: &'a Path,
}

impl std::fmt::Debug for TransportExpectations<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransportExpectations")
            .field("accepted", &self.accepted.message_id)
            .field("refused", &self.refused.message_id)
            .field("scratch", &self.scratch)
            .finish_non_exhaustive()
    }
}

fn with_id(mail: &OutgoingMail, prefix: &str) -> OutgoingMail {
    OutgoingMail { message_id: format!("{prefix}.{}", mail.message_id), ..mail.clone() }
}

/// Checks `transport` against the [`MailTransport`] contract:
///
/// - an accepted mail returns a receipt with the server's reply, and the server holds exactly
///   one more delivery, of that Message-ID (one submit is one attempt);
/// - a refused recipient is `SubmitClass::RecipientRefused`, whose outcome is `failed`, with a
///   message, and nothing is delivered (nor retried);
/// - an attachment that vanished, or whose bytes changed since the mail was prepared, is
///   `SubmitClass::Build` (`failed`) and nothing is delivered;
/// - a second accepted mail is a second single delivery: the transport keeps no state between
///   submissions (the journal does).
///
/// # Panics
/// Naming the clause the transport breaks.
pub fn mail_transport_contract(transport: &dyn MailTransport, expect: &TransportExpectations<'_>) {
    let delivered = expect.delivered;
    assert_ne!(
        expect.accepted.message_id, expect.refused.message_id,
        "give the two mails different Message-IDs"
    );
    std::fs::create_dir_all(expect.scratch)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", expect.scratch.display()));

    let accepted_once = |mail: &OutgoingMail, what: &str| {
        let before = delivered();
        let receipt = no_panic("submit", || transport.submit(mail))
            .unwrap_or_else(|e| panic!("{what}: the server accepts it, the transport said {e}"));
        assert!(!receipt.response.trim().is_empty(), "{what}: a receipt without the reply");
        let mut want = before;
        want.push(mail.message_id.clone());
        assert_eq!(delivered(), want, "{what}: one submit must be exactly one delivery");
    };
    let failed_with = |mail: &OutgoingMail, class: SubmitClass, what: &str| {
        let before = delivered();
        match no_panic("submit", || transport.submit(mail)) {
            Ok(r) => {
                panic!("{what}: must fail as {}, was accepted ({})", class.as_str(), r.response)
            }
            Err(e) => {
                assert_eq!(e.class, class, "{what}: the failure's class ({e})");
                assert_eq!(
                    e.class.outcome(),
                    OpState::Failed,
                    "{what}: nothing can have been accepted"
                );
                assert!(!e.message.trim().is_empty(), "{what}: a failure without a message");
            }
        }
        assert_eq!(delivered(), before, "{what}: nothing may be delivered");
    };

    accepted_once(expect.accepted, "an accepted mail");
    failed_with(expect.refused, SubmitClass::RecipientRefused, "a refused recipient");

    let vanished_path = expect.scratch.join("vanished-attachment.txt");
    let _ = std::fs::remove_file(&vanished_path);
    let mut vanished = with_id(expect.accepted, "vanished");
    vanished.attachments = vec![OutgoingAttachment {
        path: vanished_path,
        name: "notes.txt".to_owned(),
        mime_type: "text/plain".to_owned(),
        size: 5,
        sha256: hex(&Sha256::digest(b"notes")),
    }];
    failed_with(&vanished, SubmitClass::Build, "an attachment that vanished");

    let changed_path = expect.scratch.join("changed-attachment.txt");
    std::fs::write(&changed_path, b"version 2, swapped")
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", changed_path.display()));
    let mut changed = with_id(expect.accepted, "changed");
    changed.attachments = vec![OutgoingAttachment {
        path: changed_path,
        name: "contract.txt".to_owned(),
        mime_type: "text/plain".to_owned(),
        size: 9,
        sha256: hex(&Sha256::digest(b"version 1")),
    }];
    failed_with(&changed, SubmitClass::Build, "an attachment whose bytes changed");

    accepted_once(&with_id(expect.accepted, "again"), "a second accepted mail");
}
