//! The mail tools: reads over the mirror (bounded, with cursors, sources marked untrusted) and
//! writes through approvals and the write journal.

use std::sync::Arc;

use serde_json::json;

use super::{ExecError, SourceRef, ToolExecutor, ToolOutput, ToolRun, Typed, cursor, fitting};
use crate::{
    mirror::{
        Address, BodyWindow,
        read::{READ_WINDOW_MAX_CHARS, THREAD_PAGE},
    },
    outbox::{MailTransport, Sender},
    policy::catalog::{
        MailAttachmentTextInput, MailReadInput, MailReplyInput, MailSearchInput, MailSendInput,
        MailSendLaterInput, MailThreadInput,
    },
    search::SearchRequest,
};

/// Results `mail.search` returns when the input does not say.
/// Default of `mail.search`'s `limit`.
pub const SEARCH_DEFAULT_LIMIT: u32 = 10;
/// Largest attachment whose text `mail.attachment_text` reads, in bytes.
/// Fixed (not a setting).
pub const MAX_ATTACHMENT_TEXT_BYTES: u64 = 4 * 1024 * 1024;

/// The mail tools that write (they need a sender).
pub(super) const WRITERS: [&str; 3] = ["mail.send", "mail.reply", "mail.send_later"];

pub(super) fn readers() -> Vec<(&'static str, Arc<dyn ToolExecutor>)> {
    vec![
        (
            "mail.search",
            Arc::new(Typed::new(
                |i: &MailSearchInput| format!("Search mail for {:?}", i.query),
                search,
            )),
        ),
        (
            "mail.read",
            Arc::new(Typed::new(
                |i: &MailReadInput| format!("Read message #{}", i.message_id),
                read,
            )),
        ),
        (
            "mail.thread",
            Arc::new(Typed::new(
                |i: &MailThreadInput| format!("Read thread #{}", i.thread_id),
                thread,
            )),
        ),
        (
            "mail.attachment_text",
            Arc::new(Typed::new(
                |i: &MailAttachmentTextInput| {
                    format!("Read attachment {} of message #{}", i.position, i.message_id)
                },
                attachment_text,
            )),
        ),
    ]
}

fn addresses(list: &[String]) -> String {
    if list.is_empty() { "(nobody)".to_owned() } else { list.join(", ") }
}

pub(super) fn writers(
    transport: Arc<dyn MailTransport>,
    sender: Sender,
) -> Vec<(&'static str, Arc<dyn ToolExecutor>)> {
    let send = Arc::new(Mailer { transport, sender });
    let (a, b, c) = (Arc::clone(&send), Arc::clone(&send), send);
    vec![
        (
            "mail.send",
            Arc::new(Typed::new(
                |i: &MailSendInput| {
                    let mut s = format!("Send \"{}\" to {}", i.subject, addresses(&i.to));
                    if !i.cc.is_empty() {
                        s.push_str(&format!(", cc {}", i.cc.join(", ")));
                    }
                    if !i.bcc.is_empty() {
                        s.push_str(&format!(", bcc {}", i.bcc.join(", ")));
                    }
                    if let Some(at) = &i.send_at {
                        s.push_str(&format!(" at {at}"));
                    }
                    s
                },
                move |run, i: MailSendInput| a.send(run, "mail.send", &i),
            )),
        ),
        (
            "mail.reply",
            Arc::new(Typed::new(
                |i: &MailReplyInput| {
                    let all = if i.reply_all { " (to everyone)" } else { "" };
                    format!("Reply to message #{}{all}", i.message_id)
                },
                move |run, i: MailReplyInput| b.send(run, "mail.reply", &i),
            )),
        ),
        (
            "mail.send_later",
            Arc::new(
                Typed::new(
                    |i: &MailSendLaterInput| {
                        format!("Send \"{}\" to {} at {}", i.subject, addresses(&i.to), i.send_at)
                    },
                    move |run, i: MailSendLaterInput| c.send(run, "mail.send_later", &i),
                )
                .check(|_, i: MailSendLaterInput| {
                    crate::time::parse_date(&i.send_at)
                        .map_err(|e| format!("send_at {:?}: {e}", i.send_at))?;
                    Ok(i)
                }),
            ),
        ),
    ]
}

struct Mailer {
    transport: Arc<dyn MailTransport>,
    sender: Sender,
}

impl Mailer {
    fn send(
        &self,
        run: &ToolRun<'_>,
        tool: &str,
        input: &impl serde::Serialize,
    ) -> Result<ToolOutput, ExecError> {
        let value = serde_json::to_value(input).map_err(|e| ExecError::invalid(e.to_string()))?;
        let (key, approval_id) = super::write_key(run, &value);
        let op = run.steward.send_mail_tool(
            tool,
            value,
            &self.sender,
            &key,
            approval_id,
            self.transport.as_ref(),
            run.now,
        )?;
        let when = match op.scheduled_for {
            Some(t) => {
                format!(", scheduled for {}", crate::time::CivilTime::from_unix(t).rfc3339())
            }
            None => String::new(),
        };
        Ok(super::journaled_output(
            &op,
            &when,
            "from the Sent mailbox",
            json!({ "scheduled_for": op.scheduled_for }),
        ))
    }
}

fn person(a: &Address) -> String {
    match &a.name {
        Some(n) if !n.is_empty() => format!("{n} <{}>", a.addr),
        _ => a.addr.clone(),
    }
}

fn people(list: &[Address]) -> String {
    list.iter().map(person).collect::<Vec<_>>().join(", ")
}

fn more(next: Option<usize>) -> String {
    next.map_or_else(String::new, |n| format!("\n(more: cursor \"{n}\")"))
}

/// Room kept for the continuation line.
/// Fixed (not a setting).
const MORE_CHARS: usize = 40;

fn search(run: &ToolRun<'_>, i: MailSearchInput) -> Result<ToolOutput, ExecError> {
    let offset = cursor(i.cursor.as_deref())?;
    let date = |what: &str, d: &Option<String>| {
        d.as_deref()
            .map(|t| {
                crate::time::parse_date(t)
                    .map_err(|e| ExecError::invalid(format!("{what} {t:?}: {e}")))
            })
            .transpose()
    };
    let query = i.query.trim();
    let request = SearchRequest {
        text: (!query.is_empty()).then(|| query.to_owned()),
        from: i.from.clone(),
        after: date("after", &i.after)?,
        before: date("before", &i.before)?,
        has_attachments: i.has_attachments,
        limit: i.limit.unwrap_or(SEARCH_DEFAULT_LIMIT) as usize,
        offset,
        ..SearchRequest::default()
    };
    let page = run.steward.search_for_model(&request)?;
    let compact = page.compact();
    if compact.lines.is_empty() {
        return Ok(ToolOutput {
            text: if offset == 0 {
                "No mail matches.".to_owned()
            } else {
                "No more results.".to_owned()
            },
            data: json!({ "ids": [], "semantic": page.semantic }),
            ..ToolOutput::default()
        });
    }
    let header = format!("Mail results {}-{}:", offset + 1, offset + compact.lines.len());
    let keep = fitting(&compact.lines, header.chars().count() + MORE_CHARS, run.budget_chars);
    let next = if keep < compact.lines.len() { Some(offset + keep) } else { compact.next_offset };
    let text = format!("{header}\n{}{}", compact.lines[..keep].join("\n"), more(next));
    let sources = page.messages[..keep]
        .iter()
        .map(|m| SourceRef::Message { id: m.id, message_id: m.message_id.clone() })
        .collect();
    Ok(ToolOutput {
        text,
        data: json!({
            "ids": &compact.ids[..keep],
            "semantic": page.semantic,
            "candidates": page.page.candidates,
        }),
        sources,
        cursor: next.map(|n| n.to_string()),
        approval: None,
    })
}

fn read(run: &ToolRun<'_>, i: MailReadInput) -> Result<ToolOutput, ExecError> {
    let offset = cursor(i.cursor.as_deref())?;
    let window =
        BodyWindow { offset, max_chars: READ_WINDOW_MAX_CHARS.min(run.budget_chars).max(1) };
    let m = run.steward.mirror().read_message(i.message_id, window)?;
    let mut head = format!(
        "Message #{} (thread #{}) in {}/{}\nFrom: {}\nTo: {}\n",
        m.id,
        m.thread_id,
        m.account,
        m.mailbox,
        people(&m.from),
        people(&m.to)
    );
    if !m.cc.is_empty() {
        head.push_str(&format!("Cc: {}\n", people(&m.cc)));
    }
    head.push_str(&format!(
        "Date: {}\nSubject: {}\n",
        m.date.as_deref().unwrap_or("(none)"),
        m.subject
    ));
    if let Some(id) = &m.message_id {
        head.push_str(&format!("Message-ID: <{id}>\n"));
    }
    for a in &m.attachments {
        head.push_str(&format!(
            "Attachment {}: {} ({}, {} bytes)\n",
            a.position,
            a.name.as_deref().unwrap_or("(unnamed)"),
            a.mime_type,
            a.size
        ));
    }
    if offset > 0 {
        head.push_str(&format!("(body from character {offset})\n"));
    }
    head.push('\n');
    // The body gets what the header leaves of the budget; the rest is a cursor away.
    let room = run.budget_chars.saturating_sub(head.chars().count() + MORE_CHARS).max(1);
    let mut body = m.body.text.clone();
    let mut next = m.body.next_offset;
    if let Some((cut, _)) = body.char_indices().nth(room) {
        body.truncate(cut);
        next = Some(offset + room);
    }
    let mut sources = vec![SourceRef::Message { id: m.id, message_id: m.message_id.clone() }];
    sources.extend(m.attachments.iter().map(|a| SourceRef::Attachment {
        message_id: m.id,
        position: a.position,
        name: a.name.clone(),
    }));
    Ok(ToolOutput {
        text: format!("{head}{body}{}", more(next)),
        data: json!({
            "id": m.id,
            "thread_id": m.thread_id,
            "message_id": m.message_id,
            "subject": m.subject,
            "body_state": m.body.state,
            "total_chars": m.body.total_chars,
        }),
        sources,
        cursor: next.map(|n| n.to_string()),
        approval: None,
    })
}

fn thread(run: &ToolRun<'_>, i: MailThreadInput) -> Result<ToolOutput, ExecError> {
    let offset = cursor(i.cursor.as_deref())?;
    let page = run.steward.mirror().read_thread(i.thread_id, offset, THREAD_PAGE)?;
    let lines: Vec<String> = page
        .messages
        .iter()
        .map(|m| {
            let day = m.date.as_deref().and_then(|d| d.get(..10)).unwrap_or("----------");
            let from = m.from.as_ref().map_or_else(|| "(no sender)".to_owned(), person);
            let mut flags = String::new();
            if m.unread {
                flags.push_str(" [unread]");
            }
            if m.has_attachments {
                flags.push_str(" [attachment]");
            }
            format!("#{} {day} {from} | {}{flags}", m.id, m.snippet)
        })
        .collect();
    let header = format!(
        "Thread #{} \"{}\": {} message(s), newest first",
        page.thread_id, page.subject, page.message_count
    );
    let keep = fitting(&lines, header.chars().count() + MORE_CHARS, run.budget_chars);
    let next = if keep < lines.len() { Some(offset + keep) } else { page.next_offset };
    let ids: Vec<i64> = page.messages[..keep].iter().map(|m| m.id).collect();
    // A thread page names its messages by mirror id; their Message-IDs are a read away.
    let sources = ids.iter().map(|&id| SourceRef::Message { id, message_id: None }).collect();
    Ok(ToolOutput {
        text: format!("{header}\n{}{}", lines[..keep].join("\n"), more(next)),
        data: json!({ "thread_id": page.thread_id, "ids": ids, "message_count": page.message_count }),
        sources,
        cursor: next.map(|n| n.to_string()),
        approval: None,
    })
}

/// Whether the mirror can give the text of a `mime` attachment (documents come with their own
/// extractor later).
fn textual(mime: &str) -> bool {
    let m = mime.to_ascii_lowercase();
    m.starts_with("text/")
        || matches!(
            m.as_str(),
            "application/json" | "application/xml" | "application/csv" | "application/x-yaml"
        )
}

/// Text of an HTML attachment without its markup (script and style content dropped).
fn without_markup(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    let lower = html.to_ascii_lowercase();
    let mut i = 0;
    while i < html.len() {
        if html[i..].starts_with('<') {
            let skip_to = ["script", "style"].iter().find_map(|t| {
                lower[i + 1..]
                    .starts_with(t)
                    .then(|| lower[i..].find(&format!("</{t}")).map_or(html.len(), |e| i + e))
            });
            let from = skip_to.unwrap_or(i);
            i = html[from..].find('>').map_or(html.len(), |e| from + e + 1);
            out.push(' ');
        } else {
            let end = html[i..].find('<').map_or(html.len(), |e| i + e);
            out.push_str(&html[i..end]);
            i = end;
        }
    }
    let mut text = String::with_capacity(out.len());
    for w in out.split_whitespace() {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(w);
    }
    text.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&nbsp;", " ")
}

fn attachment_text(run: &ToolRun<'_>, i: MailAttachmentTextInput) -> Result<ToolOutput, ExecError> {
    let offset = cursor(i.cursor.as_deref())?;
    let mirror = run.steward.mirror();
    let (name, mime, size, sha) =
        mirror.attachment_blob(i.message_id, i.position)?.ok_or_else(|| ExecError {
            code: "ATTACHMENT_NOT_FOUND",
            kind: crate::error::ErrorKind::NotFound,
            message: format!("message {} has no attachment {}", i.message_id, i.position),
        })?;
    if !textual(&mime) {
        return Err(ExecError::unavailable(
            "ATTACHMENT_TEXT_UNSUPPORTED",
            format!("no text extraction for {mime} attachments yet"),
        ));
    }
    if size > MAX_ATTACHMENT_TEXT_BYTES {
        return Err(ExecError::unavailable(
            "ATTACHMENT_TOO_LARGE",
            format!("{size} bytes is above the {MAX_ATTACHMENT_TEXT_BYTES}-byte limit for reading"),
        ));
    }
    let path = mirror.blob_path(&sha).ok_or_else(|| {
        ExecError::unavailable("ATTACHMENT_NOT_DOWNLOADED", "the source did not hold its bytes")
    })?;
    let bytes = std::fs::read(&path).map_err(|e| ExecError {
        code: "ATTACHMENT_UNREADABLE",
        kind: crate::error::ErrorKind::Unavailable,
        message: e.to_string(),
    })?;
    let raw = String::from_utf8_lossy(&bytes);
    let text = if mime.to_ascii_lowercase().starts_with("text/html") {
        without_markup(&raw)
    } else {
        raw.into_owned()
    };
    let head = format!(
        "Attachment {} of message #{}: {} ({mime}){}\n\n",
        i.position,
        i.message_id,
        name.as_deref().unwrap_or("(unnamed)"),
        if offset > 0 { format!(", from character {offset}") } else { String::new() }
    );
    let room = run.budget_chars.saturating_sub(head.chars().count() + MORE_CHARS).max(1);
    let total = text.chars().count();
    let window: String = text.chars().skip(offset).take(room).collect();
    let next = (offset + room < total).then_some(offset + room);
    Ok(ToolOutput {
        text: format!("{head}{window}{}", more(next)),
        data: json!({ "message_id": i.message_id, "position": i.position, "mime_type": mime, "total_chars": total }),
        sources: vec![SourceRef::Attachment {
            message_id: i.message_id,
            position: i.position,
            name,
        }],
        cursor: next.map(|n| n.to_string()),
        approval: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_dropped_with_scripts_and_styles() {
        let t = without_markup(
            "<html><style>p{color:red}</style><p>Pay &amp; go</p><script>alert(1)</script>now</html>",
        );
        assert_eq!(t, "Pay & go now");
        assert!(!t.contains("alert"));
    }

    #[test]
    fn only_text_types_are_read() {
        assert!(textual("text/plain; charset=utf-8"));
        assert!(textual("application/json"));
        assert!(!textual("application/pdf"));
        assert!(!textual("image/png"));
    }
}
