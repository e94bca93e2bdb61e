//! The contacts tools: `contacts.search` and `contacts.resolve_recipient` over the indexed
//! address books and the mail mirror's correspondents. A resolution that is not `resolved`
//! says so in words the model cannot miss: the person chooses.

use std::sync::Arc;

use serde_json::json;

use super::{ExecError, SourceRef, ToolExecutor, ToolOutput, ToolRun, Typed, fitting};
use crate::{
    contacts::{Contact, Status},
    policy::catalog::{ContactsResolveInput, ContactsSearchInput},
};

/// People `contacts.search` returns when the input does not say.
/// Fixed (not a setting).
pub const CONTACTS_DEFAULT_LIMIT: u32 = 10;

pub(super) fn tools() -> Vec<(&'static str, Arc<dyn ToolExecutor>)> {
    vec![
        (
            "contacts.search",
            Arc::new(Typed::new(
                |i: &ContactsSearchInput| format!("Search contacts for {:?}", i.query),
                search,
            )),
        ),
        (
            "contacts.resolve_recipient",
            Arc::new(Typed::new(
                |i: &ContactsResolveInput| format!("Find who {:?} is", i.text),
                resolve,
            )),
        ),
    ]
}

fn line(c: &Contact) -> String {
    let org = c.org.as_deref().map_or_else(String::new, |o| format!(" ({o})"));
    let phones =
        if c.phones.is_empty() { String::new() } else { format!(" tel {}", c.phones.join(", ")) };
    format!("- {}{org}: {}{phones}", c.name, c.emails.join(", "))
}

fn search(run: &ToolRun<'_>, i: ContactsSearchInput) -> Result<ToolOutput, ExecError> {
    let limit = i.limit.unwrap_or(CONTACTS_DEFAULT_LIMIT);
    if !(1..=20).contains(&limit) {
        return Err(ExecError::invalid(format!("limit {limit}: 1 to 20 people")));
    }
    let limit = limit as usize;
    let found = run.steward.search_contacts(&i.query, limit)?;
    if found.is_empty() {
        return Ok(ToolOutput {
            text: "Nobody in the address books fits.".to_owned(),
            data: json!({ "ids": [] }),
            ..ToolOutput::default()
        });
    }
    let header = format!("Contacts ({}):", found.len());
    let lines: Vec<String> = found.iter().map(line).collect();
    let keep = fitting(&lines, header.chars().count(), run.budget_chars);
    Ok(ToolOutput {
        text: format!("{header}\n{}", lines[..keep].join("\n")),
        data: json!({ "ids": found[..keep].iter().map(|c| &c.id).collect::<Vec<_>>() }),
        sources: found[..keep].iter().map(|c| SourceRef::Contact { id: c.id.clone() }).collect(),
        ..ToolOutput::default()
    })
}

fn resolve(run: &ToolRun<'_>, i: ContactsResolveInput) -> Result<ToolOutput, ExecError> {
    let r = run.steward.resolve_recipient(&i.text)?;
    let head = match r.status {
        Status::Resolved => {
            let c = &r.candidates[0];
            format!("Resolved: {} <{}>.", c.name, c.email)
        }
        Status::Ambiguous => "Ambiguous: more than one address fits. Ask the person which one \
                              they mean; do not choose yourself."
            .to_owned(),
        Status::NotFound => "Not found: nobody in the address books or the mail fits. Ask the \
                             person for the address."
            .to_owned(),
    };
    let lines: Vec<String> = if r.status == Status::Resolved {
        Vec::new()
    } else {
        r.candidates
            .iter()
            .map(|c| format!("- {} <{}> (fits {} of {} words)", c.name, c.email, c.covers, c.of))
            .collect()
    };
    let keep = fitting(&lines, head.chars().count(), run.budget_chars);
    let text =
        if lines.is_empty() { head } else { format!("{head}\n{}", lines[..keep].join("\n")) };
    let sources = r
        .candidates
        .iter()
        .map(|c| SourceRef::Contact { id: c.contact_id.clone().unwrap_or_else(|| c.email.clone()) })
        .collect();
    Ok(ToolOutput {
        text,
        data: serde_json::to_value(&r).unwrap_or_default(),
        sources,
        ..ToolOutput::default()
    })
}
