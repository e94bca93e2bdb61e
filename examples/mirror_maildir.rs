//! Mirror a Maildir into a Steward home and print what the mirror holds.
//!
//! ```sh
//! cargo run --example mirror_maildir -- ~/Maildir          # your own mail
//! cargo run --example mirror_maildir                       # a generated demo mailbox
//! ```

use std::path::PathBuf;

use steward_connectors::mail::{
    MaildirSource,
    demo::{DemoOptions, generate_maildir},
};
use steward_core::{Steward, StewardError, mirror::SyncOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scratch = std::env::temp_dir().join(format!("steward-example-{}", std::process::id()));
    let maildir = match std::env::args_os().nth(1) {
        Some(p) => PathBuf::from(p),
        None => {
            let dir = scratch.join("Maildir");
            generate_maildir(&dir, &DemoOptions::new(500))?;
            dir
        }
    };
    let steward = Steward::builder().home(scratch.join("home")).open()?;
    let source = MaildirSource::new(&maildir);
    let options = SyncOptions { account: None, cancel: None };
    let summary = match steward.sync_mail(&source, &options, &mut |p| {
        eprint!("\r{:?}: {}/{} files", p.phase, p.files_done, p.files_total);
    }) {
        Ok(s) => s,
        Err(e) => {
            // Every error has a stable code and a kind a program can act on.
            eprintln!("\nfailed [{} / {}]: {e}", e.code(), e.kind());
            std::process::exit(1);
        }
    };
    eprintln!();
    println!(
        "{}: {} added, {} copies, {} threads, {} files with errors, {:.0} messages/s",
        summary.account,
        summary.added,
        summary.copies,
        summary.threads,
        summary.error_count,
        summary.messages_per_second
    );
    let stats = steward.mail_stats()?;
    println!("by mailbox role: {:?}", stats.messages_by_role);
    println!("by body state:   {:?}", stats.messages_by_body_state);
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}
