//! Mirror a Maildir, then search it: free text, a substring constraint, a browse, and the
//! compact page a model would see.
//!
//! ```sh
//! cargo run --example search -- ~/Maildir "invoice"    # your own mail and a query
//! cargo run --example search                           # a generated demo mailbox
//! ```

use std::path::PathBuf;

use steward_connectors::mail::{
    MaildirSource,
    demo::{DemoOptions, generate_maildir},
};
use steward_core::{
    Steward, StewardError,
    mirror::SyncOptions,
    search::{SearchRequest, Sort},
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scratch = std::env::temp_dir().join(format!("steward-search-{}", std::process::id()));
    let mut args = std::env::args_os().skip(1);
    let maildir = match args.next() {
        Some(p) => PathBuf::from(p),
        None => {
            let dir = scratch.join("Maildir");
            generate_maildir(&dir, &DemoOptions::new(1_000))?;
            dir
        }
    };
    let text =
        args.next().map_or_else(|| "certificazione".to_owned(), |t| t.to_string_lossy().into());
    let steward = Steward::builder().home(scratch.join("home")).open()?;
    // `sync_mail` mirrors and updates the text index in the same call.
    steward.sync_mail(
        &MaildirSource::new(&maildir),
        &SyncOptions { account: None, cancel: None },
        &mut |_| {},
    )?;

    // Free text: BM25 (plus vectors when an embedder is configured), one result per thread.
    let page = steward.search(&SearchRequest::text(&text))?;
    println!("{text:?}: semantic {:?}, {} candidates", page.semantic, page.page.candidates);
    for m in &page.messages {
        println!("  #{} {} | lexical rank {:?}", m.id, m.subject, m.provenance.lexical);
    }

    // A substring constraint and a browse by size: no ranking, only filters and order.
    let largest = SearchRequest {
        has_attachments: Some(true),
        sort: Sort::SizeDesc,
        limit: 3,
        ..SearchRequest::default()
    };
    for m in steward.search(&largest)?.messages {
        println!("  large: #{} {}", m.id, m.subject);
    }

    // What a model sees: one line per hit and the ids, at most 12 per page.
    let compact = steward.search_for_model(&SearchRequest::text(&text))?.compact();
    println!("{}", compact.lines.join("\n"));
    println!("ids: {:?}", compact.ids);

    // Bad input is a typed error with a stable code.
    let bad = SearchRequest { from: Some("ab".into()), ..SearchRequest::default() };
    if let Err(e) = steward.search(&bad) {
        println!("refused [{}]: {e}", e.code());
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}
