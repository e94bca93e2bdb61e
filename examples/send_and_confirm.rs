//! One mail through the write journal: prepare (our Message-ID, attachments fixed by hash),
//! journal, submit once over SMTP, then confirm from the Sent copy in a mirrored Maildir.
//!
//! ```sh
//! # any SMTP server; for a local one:  python -m aiosmtpd -n -l 127.0.0.1:1025
//! STEWARD_SMTP_HOST=127.0.0.1 STEWARD_SMTP_PORT=1025 STEWARD_SMTP_SECURITY=plain \
//! STEWARD_MAIL_FROM=me@example.org STEWARD_MAIL_ACCOUNT=me \
//!     cargo run --example send_and_confirm -- you@example.org [MAILDIR]
//! ```
//!
//! With a MAILDIR (the one your sync tool fills, Sent folder included) the example mirrors it
//! and runs a confirmation pass; run it again later to see the operation confirmed.

use steward_connectors::mail::{
    MaildirSource,
    smtp::{SmtpConfig, SmtpSender},
};
use steward_core::{Steward, mirror::SyncOptions, outbox::MailDraft, time::now_secs};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let to = args.next().ok_or("usage: send_and_confirm RECIPIENT [MAILDIR]")?;
    let maildir = args.next();
    let home = std::env::temp_dir().join("steward-send-example");
    let steward = Steward::builder().home(&home).open()?;
    let smtp = SmtpSender::new(SmtpConfig::load(&home)?)?;
    let me = smtp.sender().clone();

    let draft = MailDraft {
        account: me.account.clone(),
        from: me.from.clone(),
        from_name: me.from_name.clone(),
        to: vec![to],
        subject: "Hello from Steward".into(),
        body: "This mail was journaled before it was sent.\n".into(),
        ..MailDraft::default()
    };
    let now = now_secs();
    let mail = steward.prepare_mail(&draft, now)?;
    // The idempotency key: running this line twice journals and sends once.
    let op = steward.send_mail(
        &mail,
        &format!("example:{}", mail.message_id),
        None,
        None,
        &smtp,
        now,
    )?;
    println!("operation #{}: {} ({:?})", op.id, op.state.as_str(), op.backend_result);

    if let Some(md) = maildir {
        let opts = SyncOptions { account: Some(me.account), cancel: None };
        steward.sync_mail(&MaildirSource::new(&md), &opts, &mut |_| {})?;
        let pass = steward.confirm_pass(now_secs())?;
        println!("confirmation pass: {pass:?}");
    }
    for op in steward.list_write_operations(None, 0, 10)? {
        println!(
            "#{} {} {} checks {}",
            op.id,
            op.state.as_str(),
            op.kind,
            op.confirmation_attempts
        );
    }
    Ok(())
}
