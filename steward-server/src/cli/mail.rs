//! `steward mail …`: send through the policy, the approval flow and the write journal.

use std::path::PathBuf;

use clap::{Args as ClapArgs, Subcommand};
use steward_connectors::mail::smtp::{SmtpConfig, SmtpSender};
use steward_core::{
    ErrorKind, Steward,
    journal::OpState,
    outbox::{InlineApproval, SendRequestOutcome},
    policy::catalog::MailSendInput,
    time::now_secs,
};

use super::{
    Failure,
    authority::{Person, read_secret},
    json_line, open, usage,
};

/// Who a request made at the command line comes from, in the approval record.
const REQUESTER: &str = "agent:command-line";

#[derive(Debug, Subcommand)]
pub(super) enum MailCmd {
    /// Send a mail: the policy decides, a person approves (here with --yes, or later with
    /// `steward approvals approve`), the journal records it before it is submitted.
    Send(Box<SendArgs>),
    /// Send what approval ID allows (after `steward approvals approve ID`); running it again
    /// returns the same operation and sends nothing.
    SendApproved {
        /// The approval id.
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, ClapArgs)]
pub(super) struct SendArgs {
    /// A recipient (repeat for more).
    #[arg(long, required = true, value_name = "ADDR")]
    to: Vec<String>,
    /// A Cc recipient (repeat for more).
    #[arg(long, value_name = "ADDR")]
    cc: Vec<String>,
    /// A Bcc recipient (repeat for more).
    #[arg(long, value_name = "ADDR")]
    bcc: Vec<String>,
    /// The subject.
    #[arg(long)]
    subject: String,
    /// The plain-text body: a file, or - for standard input.
    #[arg(long, value_name = "FILE")]
    body_file: PathBuf,
    /// A file to attach, or `attachment:<message id>:<position>` from the mirror (repeat).
    #[arg(long, value_name = "PATH")]
    attach: Vec<String>,
    /// The Message-ID this answers.
    #[arg(long, value_name = "MESSAGE-ID")]
    in_reply_to: Option<String>,
    /// Send later, at this time (RFC 3339); `steward ops send-due` sends it when due.
    #[arg(long, value_name = "RFC3339")]
    at: Option<String>,
    /// Approve the request here, as the person (only where the policy gates it; at the secure
    /// level the PIN is asked for).
    #[arg(long)]
    yes: bool,
    /// With --yes: read the PIN (prompted, or one line of standard input) for a request the
    /// policy puts at the secure level.
    #[arg(long, requires = "yes")]
    pin: bool,
    #[command(flatten)]
    person: Person,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn sender_for(steward: &Steward) -> Result<SmtpSender, Failure> {
    Ok(SmtpSender::new(SmtpConfig::load(steward.home())?)?)
}

fn print_outcome(outcome: &SendRequestOutcome, json: bool) {
    if json {
        json_line(outcome);
        return;
    }
    match outcome {
        SendRequestOutcome::Journaled { operation: op } => {
            out!(
                "operation #{} {} ({}){}",
                op.id,
                op.state.as_str(),
                op.kind,
                op.error.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
            );
        }
        SendRequestOutcome::Pending { approval: a } => {
            out!(
                "approval #{} pending ({}): approve with `steward approvals approve {}`, then run `steward mail send-approved {}`",
                a.id,
                a.level.as_str(),
                a.id,
                a.id
            );
        }
    }
}

/// A send whose operation ended `failed` (refused before anything could have been delivered)
/// fails the command too, after the operation was printed: exit status 1, `MAIL_SEND_FAILED`.
fn failed_send(outcome: &SendRequestOutcome) -> Result<(), Failure> {
    match outcome {
        SendRequestOutcome::Journaled { operation: op } if op.state == OpState::Failed => {
            Err(Failure {
                code: "MAIL_SEND_FAILED".to_owned(),
                kind: ErrorKind::Unavailable,
                message: format!(
                    "operation #{} failed{}",
                    op.id,
                    op.error.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
                ),
            })
        }
        _ => Ok(()),
    }
}

pub(super) fn mail(home: Option<PathBuf>, cmd: MailCmd) -> Result<(), Failure> {
    let steward = open(home)?;
    match cmd {
        MailCmd::Send(a) => {
            let body = if a.body_file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())
                    .map_err(|e| usage(format!("cannot read the body: {e}")))?
            } else {
                std::fs::read_to_string(&a.body_file)
                    .map_err(|e| usage(format!("{}: {e}", a.body_file.display())))?
            };
            let input = MailSendInput {
                to: a.to,
                cc: a.cc,
                bcc: a.bcc,
                subject: a.subject,
                body,
                attachments: a.attach,
                in_reply_to: a.in_reply_to,
                send_at: a.at,
            };
            let smtp = sender_for(&steward)?;
            let who = steward.human(&a.person.name())?;
            let pin = if a.pin { Some(read_secret("PIN: ")?) } else { None };
            let inline = a.yes.then_some(InlineApproval { who: &who, pin: pin.as_deref() });
            let outcome = steward.request_mail_send(
                &input,
                REQUESTER,
                smtp.sender(),
                inline,
                &smtp,
                now_secs(),
            )?;
            print_outcome(&outcome, a.json);
            failed_send(&outcome)
        }
        MailCmd::SendApproved { id, json } => {
            let smtp = sender_for(&steward)?;
            let op = steward.send_approved_mail(id, smtp.sender(), &smtp, now_secs())?;
            let outcome = SendRequestOutcome::Journaled { operation: Box::new(op) };
            print_outcome(&outcome, json);
            failed_send(&outcome)
        }
    }
}
