//! `steward memory …`: the person's review of the memory inbox (accept, edit, reject), recall,
//! forget with its receipt, reconcile after editing the note files, and import of existing
//! markdown. The command is a human frontend: it acts as `--as` (default `$USER`).

use std::path::PathBuf;

use clap::Subcommand;
use steward_core::StewardError as _;
use steward_core::memory::{
    ForgetSelector, MemoryEdit, MemoryHit, MemoryKind, MemoryQuery, MemorySource, Note, Proposal,
    RejectReason, Sensitivity,
};

use super::{Failure, authority::Person, json_line, open, usage};

#[derive(Debug, Subcommand)]
pub(super) enum MemoryCmd {
    /// The proposals waiting for review, oldest first, each with the notes it may replace.
    Inbox {
        /// Print one JSON line per proposal.
        #[arg(long)]
        json: bool,
    },
    /// One proposal or note, with its provenance.
    Show {
        /// The id.
        id: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Accept a proposal as it is: it becomes a note recall reads.
    Accept {
        /// The proposal's id.
        id: String,
        #[command(flatten)]
        person: Person,
        /// Print the note as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Change a proposal, then accept it.
    Edit {
        /// The proposal's id.
        id: String,
        /// The fact, in your words.
        #[arg(long)]
        text: Option<String>,
        /// fact, preference, person, commitment, project or place.
        #[arg(long, value_parser = parse_kind)]
        kind: Option<MemoryKind>,
        /// Whom or what it is about (`person:anna@example.org`).
        #[arg(long)]
        subject: Option<String>,
        /// Since when it is true (a date or RFC 3339 time).
        #[arg(long, value_parser = parse_time)]
        valid_from: Option<chrono::DateTime<chrono::Utc>>,
        /// Until when it is true.
        #[arg(long, value_parser = parse_time)]
        valid_to: Option<chrono::DateTime<chrono::Utc>>,
        /// The notes it replaces (instead of the proposed ones; repeat).
        #[arg(long = "supersedes", value_name = "ID")]
        supersedes: Vec<String>,
        /// Replace nothing (drop the proposed supersessions).
        #[arg(long, conflicts_with = "supersedes")]
        no_supersede: bool,
        /// low, normal, high or critical.
        #[arg(long, value_parser = parse_sensitivity)]
        sensitivity: Option<Sensitivity>,
        #[command(flatten)]
        person: Person,
        /// Print the note as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Reject a proposal: the same fact is never proposed to you again.
    Reject {
        /// The proposal's id.
        id: String,
        /// Why: wrong, outdated, private or trivial (kept with the tombstone; your own words
        /// would repeat the fact it must not keep).
        #[arg(long, value_parser = parse_reason)]
        reason: Option<RejectReason>,
        #[command(flatten)]
        person: Person,
    },
    /// Search the accepted notes.
    Search {
        /// Words to look for.
        text: String,
        /// Only these kinds (repeat).
        #[arg(long = "kind", value_parser = parse_kind)]
        kinds: Vec<MemoryKind>,
        /// Only notes about this subject.
        #[arg(long)]
        subject: Option<String>,
        /// Answer from what was true and known then (a date or RFC 3339 time).
        #[arg(long, value_parser = parse_time)]
        as_of: Option<chrono::DateTime<chrono::Utc>>,
        /// The most notes shown.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=20))]
        limit: u16,
        /// Print one JSON line per note.
        #[arg(long)]
        json: bool,
    },
    /// Forget notes and the proposals from the same sources; prints the receipt.
    #[command(group(clap::ArgGroup::new("what").required(true).multiple(false)))]
    Forget {
        /// One note (and the notes it replaced or that replaced it).
        #[arg(long, group = "what")]
        id: Option<String>,
        /// Every note and proposal about a subject.
        #[arg(long, group = "what")]
        subject: Option<String>,
        /// Every note and proposal holding all these words.
        #[arg(long, group = "what")]
        query: Option<String>,
        /// Show what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        person: Person,
        /// Print the receipt as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Read the note files again after editing them (your changes are audited as yours).
    Reconcile {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// One mail-to-memory pass now: recently active threads, prefiltered, one model call per
    /// thread; its facts become proposals (needs a chat model).
    Promote {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Import existing markdown (Obsidian, basic-memory, a MEMORY.md) as proposals.
    Import {
        /// The folder.
        dir: PathBuf,
        /// Accept every fact as yours instead of proposing it.
        #[arg(long)]
        accept: bool,
        #[command(flatten)]
        person: Person,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

fn parse_kind(s: &str) -> Result<MemoryKind, String> {
    MemoryKind::parse(s).ok_or_else(|| {
        let all: Vec<&str> = MemoryKind::ALL.iter().map(|k| k.as_str()).collect();
        format!("{s:?}: one of {}", all.join(", "))
    })
}

fn parse_reason(s: &str) -> Result<RejectReason, String> {
    RejectReason::parse(s).ok_or_else(|| format!("{s:?}: wrong, outdated, private or trivial"))
}

fn parse_sensitivity(s: &str) -> Result<Sensitivity, String> {
    serde_json::from_value(serde_json::Value::String(s.to_owned()))
        .map_err(|_| format!("{s:?}: low, normal, high or critical"))
}

fn parse_time(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&chrono::Utc));
    }
    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
        .ok_or_else(|| format!("{s:?}: a date (2026-03-01) or an RFC 3339 time"))
}

fn source(s: &MemorySource) -> String {
    match s {
        MemorySource::Mail { message_id, quote } => match quote {
            Some(q) => format!("mail <{message_id}>: \"{q}\""),
            None => format!("mail <{message_id}>"),
        },
        MemorySource::Chat { chat } => format!("chat {chat}"),
        MemorySource::Document { fingerprint, page } => {
            format!(
                "document {fingerprint}{}",
                page.map(|p| format!(" page {p}")).unwrap_or_default()
            )
        }
        MemorySource::Person => "you".to_owned(),
        MemorySource::Import { path } => format!("import {path}"),
    }
}

fn print_note(n: &Note, indent: &str) {
    let m = &n.meta;
    let subject = m.subject.as_deref().map(|s| format!(" [{s}]")).unwrap_or_default();
    out!("{indent}{} ({}){subject}: {}", m.id, m.kind.as_str(), n.body.replace('\n', " "));
    if m.valid_from.is_some() || m.valid_to.is_some() {
        let d = |t: Option<chrono::DateTime<chrono::Utc>>| {
            t.map_or_else(|| "…".to_owned(), |t| t.date_naive().to_string())
        };
        out!("{indent}  valid {} to {}", d(m.valid_from), d(m.valid_to));
    }
    for s in &m.sources {
        out!("{indent}  from {}", source(s));
    }
    let confidence = m.confidence.map(|c| format!(", confidence {c:.2}")).unwrap_or_default();
    out!("{indent}  proposed by {} on {}{confidence}", m.proposed_by, m.created.date_naive());
    if let Some(r) = &m.review {
        out!("{indent}  {:?} by {} on {}", r.decision, r.by, r.at.date_naive());
    }
    if let Some(by) = &m.superseded_by {
        out!("{indent}  superseded by {by}");
    }
}

fn print_proposal(p: &Proposal) {
    print_note(&p.note, "");
    out!("  expires {}", p.expires.date_naive());
    for r in &p.related {
        out!("  may replace:");
        print_note(r, "    ");
    }
}

fn print_hit(h: &MemoryHit) {
    print_note(&h.note, "");
}

pub(super) fn memory(home: Option<PathBuf>, cmd: MemoryCmd) -> Result<(), Failure> {
    let steward = open(home)?;
    match cmd {
        MemoryCmd::Inbox { json } => {
            let inbox = steward.memory_inbox()?;
            for p in &inbox {
                if json {
                    json_line(p);
                } else {
                    print_proposal(p);
                }
            }
            if !json && inbox.is_empty() {
                out!("the memory inbox is empty");
            }
        }
        MemoryCmd::Show { id, json } => match steward.memory_note(&id) {
            Ok(hit) if json => json_line(&hit),
            Ok(hit) => print_hit(&hit),
            Err(e) if e.code() == "MEMORY_NOT_FOUND" => {
                let p = steward.memory_proposal(&id)?;
                if json {
                    json_line(&p);
                } else {
                    print_proposal(&p);
                }
            }
            Err(e) => return Err(e.into()),
        },
        MemoryCmd::Accept { id, person, json } => {
            let who = steward.human(&person.name())?;
            let n = steward.memory_accept(&who, &id, None)?;
            if json {
                json_line(&n);
            } else {
                out!("remembered:");
                print_note(&n, "  ");
            }
        }
        MemoryCmd::Edit {
            id,
            text,
            kind,
            subject,
            valid_from,
            valid_to,
            supersedes,
            no_supersede,
            sensitivity,
            person,
            json,
        } => {
            let who = steward.human(&person.name())?;
            let edit = MemoryEdit {
                text,
                kind,
                subject,
                valid_from,
                valid_to,
                supersedes: if no_supersede {
                    Some(Vec::new())
                } else {
                    Some(supersedes).filter(|s| !s.is_empty())
                },
                sensitivity,
            };
            if edit == MemoryEdit::default() {
                return Err(usage(
                    "nothing to change: give --text, --kind, --subject …, or use accept".to_owned(),
                ));
            }
            let n = steward.memory_accept(&who, &id, Some(&edit))?;
            if json {
                json_line(&n);
            } else {
                out!("remembered, as you edited it:");
                print_note(&n, "  ");
            }
        }
        MemoryCmd::Reject { id, reason, person } => {
            let who = steward.human(&person.name())?;
            let t = steward.memory_reject(&who, &id, reason)?;
            out!("rejected {id}; it will not be proposed again (tombstone {})", &t.hash[..16]);
        }
        MemoryCmd::Search { text, kinds, subject, as_of, limit, json } => {
            let q = MemoryQuery { text, kinds, subject, as_of, limit: usize::from(limit) };
            let hits = steward.memory_search(&q)?;
            for h in &hits {
                if json {
                    json_line(h);
                } else {
                    print_hit(h);
                }
            }
            if !json && hits.is_empty() {
                out!("nothing in memory fits {:?}", q.text);
            }
        }
        MemoryCmd::Forget { id, subject, query, dry_run, person, json } => {
            let who = steward.human(&person.name())?;
            let selector = match (id, subject, query) {
                (Some(id), None, None) => ForgetSelector::Id(id),
                (None, Some(s), None) => ForgetSelector::Subject(s),
                (None, None, Some(q)) => ForgetSelector::Query(q),
                _ => return Err(usage("one of --id, --subject or --query".to_owned())),
            };
            let r = steward.memory_forget(&who, &selector, dry_run)?;
            if json {
                json_line(&r);
            } else {
                let verb = if r.dry_run { "would remove" } else { "removed" };
                out!(
                    "{verb}: {} notes, {} proposals, {} index entries, {} vectors; {} tombstones",
                    r.notes.len(),
                    r.proposals.len(),
                    r.index_entries,
                    r.vectors,
                    r.tombstones
                );
                for i in r.notes.iter().chain(&r.proposals) {
                    out!("  {} {} (sha256 {})", i.id, i.path.display(), &i.content_hash[..16]);
                }
                for k in &r.kept {
                    out!("kept {}: {}", k.what, k.why);
                }
            }
        }
        MemoryCmd::Reconcile { json } => {
            let r = steward.memory_reconcile()?;
            if json {
                json_line(&r);
            } else {
                out!(
                    "{} notes; {} files read, {} changed outside Steward, {} dropped, {} proposals expired",
                    r.notes,
                    r.read,
                    r.outside_changes,
                    r.removed,
                    r.expired
                );
                for p in &r.problems {
                    out!("  {}: {} {}", p.file, p.code, p.message);
                }
                if let Some(e) = &r.embed_error {
                    out!("  not embedded: {e}");
                }
            }
        }
        MemoryCmd::Promote { json } => {
            let r = steward.promote_mail(None)?;
            if json {
                json_line(&r);
            } else {
                out!(
                    "{} threads: {} unchanged, {} filtered, {} asked ({} with nothing durable, {} \
                     proposed, {} deferred, {} failed), {} left for the next pass",
                    r.threads,
                    r.unchanged,
                    r.filtered,
                    r.calls,
                    r.skipped,
                    r.proposed,
                    r.deferred,
                    r.failed,
                    r.remaining
                );
                out!(
                    "{} proposals in the inbox; {} already known, {} rejected before, {} dropped \
                     (quote not in the mail)",
                    r.proposals,
                    r.known,
                    r.suppressed,
                    r.dropped
                );
                if let Some(why) = &r.unavailable {
                    out!("no model asked: {why}");
                }
            }
        }
        MemoryCmd::Import { dir, accept, person, json } => {
            let who = if accept { Some(steward.human(&person.name())?) } else { None };
            let r = steward.memory_import(&dir, who.as_ref())?;
            if json {
                json_line(&r);
            } else {
                out!(
                    "{} files ({} unchanged): {} facts {}, {} already known, {} rejected before, {} waiting proposals replaced",
                    r.files,
                    r.unchanged,
                    r.added,
                    if accept { "remembered" } else { "proposed" },
                    r.known,
                    r.suppressed,
                    r.replaced
                );
                for (f, why) in &r.skipped {
                    out!("  skipped {f}: {why}");
                }
                if let Some(s) = &r.stopped {
                    out!("  stopped: {s}");
                }
            }
        }
    }
    Ok(())
}
