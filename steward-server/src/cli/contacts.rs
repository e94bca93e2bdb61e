//! `steward index contacts`, `steward contacts search` and `steward contacts resolve`: address
//! books (a vdir, a `.vcf` file or a CardDAV account) indexed into `contacts.db`, then asked.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use steward_connectors::{
    contacts::phone,
    pim::{PimFrom, index_books},
};
use steward_core::contacts::{MAX_CANDIDATES, Status};

use super::{Failure, json_line, open, usage};

/// Where the cards come from.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("book").required(true).multiple(false)))]
pub(super) struct ContactsArgs {
    /// A vdir root (a folder of address books, each a folder of `.vcf` items).
    #[arg(long, value_name = "PATH", group = "book")]
    vdir: Option<PathBuf>,
    /// One `.vcf` file of any number of cards.
    #[arg(long, value_name = "FILE", group = "book")]
    vcf: Option<PathBuf>,
    /// A CardDAV server, principal or address book home (every book found there).
    #[arg(long, value_name = "URL", group = "book")]
    carddav: Option<String>,
    #[command(flatten)]
    login: super::dav::DavLogin,
    /// The account these books belong to: indexing it again replaces its cards.
    #[arg(long, default_value = "local")]
    account: String,
    /// The region (ISO 3166 code: IT, US…) for phones written without a country code.
    #[arg(long)]
    region: Option<String>,
    /// Print one JSON object, then the read errors.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub(super) enum ContactsCmd {
    /// The people that fit a text (names, nicknames, organization, addresses, phone digits).
    Search {
        /// What to look for.
        text: String,
        /// The most people shown.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=50))]
        limit: u16,
        /// Print JSON lines, one per person.
        #[arg(long)]
        json: bool,
    },
    /// Who a text means ("Anna from Polimi"): one address, or the candidates to choose from.
    Resolve {
        /// The description.
        text: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn index_contacts(home: Option<PathBuf>, a: ContactsArgs) -> Result<(), Failure> {
    let region = phone::parse_region(a.region.as_deref()).map_err(Failure::from)?;
    let steward = open(home)?;
    let client = a.carddav.as_deref().map(|url| a.login.client(url)).transpose()?;
    let from = match (&a.vdir, &a.vcf, &client) {
        (Some(root), None, None) => PimFrom::Vdir(root),
        (None, Some(file), None) => PimFrom::File(file),
        (None, None, Some(client)) => PimFrom::Dav(client),
        _ => return Err(usage("one of --vdir, --vcf or --carddav is required".to_owned())),
    };
    // A source none of which could be read changes nothing and says why.
    let done = index_books(&steward, &a.account, from, region).map_err(Failure::from)?;
    let report = &done.report;
    if a.json {
        json_line(report);
        for e in &done.errors {
            json_line(&serde_json::json!({ "error": e }));
        }
    } else {
        out!(
            "{}: {} cards ({} new, {} changed, {} gone), {} people in all",
            report.account,
            report.cards,
            report.added,
            report.changed,
            report.removed,
            report.contacts
        );
        for e in &done.errors {
            eprintln!("{}: {} {}", e.path.display(), e.code, e.message);
        }
    }
    Ok(())
}

pub(super) fn contacts(home: Option<PathBuf>, cmd: ContactsCmd) -> Result<(), Failure> {
    let steward = open(home)?;
    match cmd {
        ContactsCmd::Search { text, limit, json } => {
            let found =
                steward.search_contacts(&text, usize::from(limit)).map_err(Failure::from)?;
            for c in &found {
                if json {
                    json_line(c);
                } else {
                    let org = c.org.as_deref().map_or_else(String::new, |o| format!(" ({o})"));
                    out!("{}{org}  {}  {}", c.name, c.emails.join(", "), c.phones.join(", "));
                }
            }
            if !json && found.is_empty() {
                out!("nobody fits {text:?}");
            }
        }
        ContactsCmd::Resolve { text, json } => {
            let r = steward.resolve_recipient(&text).map_err(Failure::from)?;
            if json {
                json_line(&r);
                return Ok(());
            }
            match r.status {
                Status::Resolved => {
                    out!("resolved: {} <{}>", r.candidates[0].name, r.candidates[0].email)
                }
                Status::Ambiguous => {
                    out!("ambiguous: choose one of these (at most {MAX_CANDIDATES})")
                }
                Status::NotFound => out!("not found: nobody fits {text:?}"),
            }
            if r.status != Status::Resolved {
                for c in &r.candidates {
                    out!("  {} <{}>  fits {} of {} words", c.name, c.email, c.covers, c.of);
                }
            }
        }
    }
    Ok(())
}
