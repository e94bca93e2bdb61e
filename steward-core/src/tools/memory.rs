//! The memory tools. `memory.search` and `memory.read` recall the notes the person accepted
//! (never the inbox), each with its provenance, as data. `memory.propose` can only put a fact
//! in the person's review inbox; `memory.write` writes an accepted note and is gated (the
//! person approves it first). A mail the model cites as a source must hold the words it
//! quotes.

use std::sync::Arc;

use serde_json::json;

use super::{ExecError, SourceRef, ToolExecutor, ToolOutput, ToolRun, Typed, fitting};
use crate::{
    Steward,
    memory::{MemoryHit, MemoryQuery, MemorySource, NewMemory, ProposeOutcome},
    mirror::BodyWindow,
    policy::catalog::{MemoryFactInput, MemoryReadInput, MemorySearchInput},
};

/// Notes `memory.search` returns when the input does not say.
/// Fixed (not a setting).
pub const MEMORY_DEFAULT_LIMIT: u32 = 10;
/// Most characters of a mail read to find a quote in it.
/// Fixed (not a setting).
pub const MAX_QUOTE_SEARCH_CHARS: usize = 256 * 1024;

pub(super) fn tools() -> Vec<(&'static str, Arc<dyn ToolExecutor>)> {
    vec![
        (
            "memory.search",
            Arc::new(Typed::new(
                |i: &MemorySearchInput| format!("Search memory for {:?}", i.query),
                search,
            )),
        ),
        (
            "memory.read",
            Arc::new(Typed::new(|i: &MemoryReadInput| format!("Read memory note {}", i.id), read)),
        ),
        (
            "memory.propose",
            Arc::new(
                Typed::new(
                    |i: &MemoryFactInput| {
                        format!("Propose for memory ({}): {}", i.kind.as_str(), i.text)
                    },
                    propose,
                )
                .check(check_fact),
            ),
        ),
        (
            "memory.write",
            Arc::new(
                Typed::new(
                    |i: &MemoryFactInput| format!("Remember ({}): {}", i.kind.as_str(), i.text),
                    write,
                )
                .check(check_write),
            ),
        ),
    ]
}

fn line(h: &MemoryHit) -> String {
    let m = &h.note.meta;
    let subject = m.subject.as_deref().map(|s| format!(" [{s}]")).unwrap_or_default();
    let when = match (m.valid_from, m.valid_to) {
        (None, None) => String::new(),
        (f, t) => format!(
            " (valid {} to {})",
            f.map_or_else(|| "…".to_owned(), |d| d.date_naive().to_string()),
            t.map_or_else(|| "…".to_owned(), |d| d.date_naive().to_string())
        ),
    };
    let superseded =
        m.superseded_by.as_deref().map(|s| format!(" (superseded by {s})")).unwrap_or_default();
    let sources: Vec<String> = m
        .sources
        .iter()
        .take(3)
        .map(|s| match s {
            MemorySource::Mail { message_id, .. } => format!("mail <{message_id}>"),
            MemorySource::Chat { chat } => format!("chat {chat}"),
            MemorySource::Document { fingerprint, page } => {
                format!(
                    "document {fingerprint}{}",
                    page.map(|p| format!(" p.{p}")).unwrap_or_default()
                )
            }
            MemorySource::Person => "the person".to_owned(),
            MemorySource::Import { path } => format!("import {path}"),
        })
        .collect();
    let reviewed = m
        .review
        .as_ref()
        .map(|r| format!("; accepted by {} on {}", r.by, r.at.date_naive()))
        .unwrap_or_default();
    // The proposer's confidence is shown, so the model can weigh a doubtful note.
    let confidence = m.confidence.map(|c| format!("; confidence {c:.2}")).unwrap_or_default();
    let body: String = h.note.body.split_whitespace().collect::<Vec<_>>().join(" ");
    format!(
        "- {} ({}){subject}{when}{superseded}: {body} [from {}{reviewed}{confidence}]",
        m.id,
        m.kind.as_str(),
        if sources.is_empty() { "unknown".to_owned() } else { sources.join(", ") }
    )
}

fn search(run: &ToolRun<'_>, i: MemorySearchInput) -> Result<ToolOutput, ExecError> {
    let limit = i.limit.unwrap_or(MEMORY_DEFAULT_LIMIT);
    if !(1..=20).contains(&limit) {
        return Err(ExecError::invalid(format!("limit {limit}: 1 to 20 notes")));
    }
    let hits = run.steward.memory_search(&MemoryQuery {
        text: i.query.clone(),
        kinds: i.kinds,
        subject: i.subject,
        as_of: i.as_of,
        limit: limit as usize,
    })?;
    if hits.is_empty() {
        return Ok(ToolOutput {
            text: "Nothing in the person's memory fits.".to_owned(),
            data: json!({ "ids": [] }),
            ..ToolOutput::default()
        });
    }
    let header = format!("Memory notes ({}):", hits.len());
    let lines: Vec<String> = hits.iter().map(line).collect();
    let keep = fitting(&lines, header.chars().count(), run.budget_chars);
    Ok(ToolOutput {
        text: format!("{header}\n{}", lines[..keep].join("\n")),
        data: json!({ "ids": hits[..keep].iter().map(|h| &h.note.meta.id).collect::<Vec<_>>() }),
        sources: hits[..keep]
            .iter()
            .map(|h| SourceRef::Memory { id: h.note.meta.id.clone() })
            .collect(),
        ..ToolOutput::default()
    })
}

fn read(run: &ToolRun<'_>, i: MemoryReadInput) -> Result<ToolOutput, ExecError> {
    let hit = run.steward.memory_note(&i.id)?;
    let mut text = line(&hit);
    if let Some(q) = hit.note.meta.sources.iter().find_map(|s| match s {
        MemorySource::Mail { quote: Some(q), .. } => Some(q),
        _ => None,
    }) {
        text.push_str(&format!("\nQuoted from the mail: \"{q}\""));
    }
    if !hit.note.meta.supersedes.is_empty() {
        text.push_str(&format!("\nIt replaced: {}", hit.note.meta.supersedes.join(", ")));
    }
    let text: String = text.chars().take(run.budget_chars).collect();
    Ok(ToolOutput {
        text,
        data: serde_json::to_value(&hit.note).unwrap_or_default(),
        sources: vec![SourceRef::Memory { id: hit.note.meta.id }],
        ..ToolOutput::default()
    })
}

/// Whether `quote` is in message `id` (its words, whatever the spacing and case).
fn quoted(steward: &Steward, id: i64, quote: &str) -> Result<Option<String>, String> {
    let want = crate::memory::note::normalized(quote);
    if want.is_empty() {
        return Err("a quote needs words".to_owned());
    }
    let mut offset = 0;
    let mut text = String::new();
    let mut rfc_id = None;
    loop {
        let read = steward
            .read_message(
                id,
                BodyWindow { offset, max_chars: crate::mirror::read::READ_WINDOW_MAX_CHARS },
            )
            .map_err(|e| format!("message {id}: {e}"))?;
        rfc_id.clone_from(&read.message_id);
        text.push_str(&read.body.text);
        match read.body.next_offset {
            Some(n) if n < MAX_QUOTE_SEARCH_CHARS && n > offset => offset = n,
            _ => break,
        }
    }
    let have = crate::memory::note::normalized(&text);
    if !format!(" {have} ").contains(&format!(" {want} ")) {
        return Err(format!("message {id} does not say {quote:?}: quote its words exactly"));
    }
    Ok(Some(rfc_id.unwrap_or_else(|| format!("mirror:{id}"))))
}

fn new_memory(
    steward: &Steward,
    i: &MemoryFactInput,
    chat: Option<&str>,
) -> Result<NewMemory, String> {
    let mut sources = Vec::new();
    for e in &i.mail {
        if e.quote.chars().count() > crate::memory::note::MAX_QUOTE_CHARS {
            return Err(format!(
                "a quote has at most {} characters",
                crate::memory::note::MAX_QUOTE_CHARS
            ));
        }
        let message_id = quoted(steward, e.message_id, &e.quote)?.unwrap_or_default();
        sources.push(MemorySource::Mail { message_id, quote: Some(e.quote.clone()) });
    }
    if let Some(c) = chat {
        sources.push(MemorySource::Chat { chat: c.to_owned() });
    }
    let m = NewMemory {
        text: i.text.clone(),
        kind: i.kind,
        subject: i.subject.clone(),
        valid_from: i.valid_from,
        valid_to: i.valid_to,
        confidence: i.confidence,
        sources,
        supersedes: i.supersedes.clone(),
        sensitivity: i.sensitivity.unwrap_or_default(),
    };
    crate::memory::check_new(&m).map_err(|e| e.to_string())?;
    Ok(m)
}

fn check_fact(steward: &Steward, i: MemoryFactInput) -> Result<MemoryFactInput, String> {
    new_memory(steward, &i, None)?;
    Ok(i)
}

fn check_write(steward: &Steward, i: MemoryFactInput) -> Result<MemoryFactInput, String> {
    let i = check_fact(steward, i)?;
    if steward.memory_tombstoned(i.subject.as_deref(), &i.text).map_err(|e| e.to_string())? {
        return Err("the person rejected or forgot this fact before; only they can write it \
                    back (steward memory)"
            .to_owned());
    }
    Ok(i)
}

fn propose(run: &ToolRun<'_>, i: MemoryFactInput) -> Result<ToolOutput, ExecError> {
    let m = new_memory(run.steward, &i, run.chat).map_err(ExecError::invalid)?;
    let outcome = run.steward.memory_propose(run.actor, &m)?;
    let text = match &outcome {
        ProposeOutcome::Proposed { id } => format!(
            "Proposed as {id}: it waits in the person's memory inbox. Nothing is remembered \
             until they accept it."
        ),
        ProposeOutcome::AlreadyProposed { id } => {
            format!("The same fact already waits in the person's memory inbox as {id}.")
        }
        ProposeOutcome::AlreadyKnown { id } => format!("Already in memory as {id}."),
        ProposeOutcome::Suppressed => "Not proposed: the person rejected or forgot this fact \
                                       before. Do not propose it again."
            .to_owned(),
    };
    Ok(ToolOutput {
        text,
        data: serde_json::to_value(&outcome).unwrap_or_default(),
        ..ToolOutput::default()
    })
}

fn write(run: &ToolRun<'_>, i: MemoryFactInput) -> Result<ToolOutput, ExecError> {
    let m = new_memory(run.steward, &i, run.chat).map_err(ExecError::invalid)?;
    // Under an approval the person who decided; a level a person set to run without one is
    // the policy's.
    let by = run.approved.map_or("policy", |a| a.decided_by());
    let note = run.steward.memory_write(run.actor, by, &m)?;
    Ok(ToolOutput {
        text: format!("Remembered as {}.", note.meta.id),
        data: json!({ "id": note.meta.id }),
        sources: vec![SourceRef::Memory { id: note.meta.id }],
        ..ToolOutput::default()
    })
}
