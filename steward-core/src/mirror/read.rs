//! Bounded reads of one message and of one thread. A read never returns more body text than
//! the window allows (default 6,000 characters, at most 12,000); the caller continues from
//! `next_offset`. Soft-deleted messages are not found.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::{Address, BodyState, Flags, Mirror, model::MailboxRole};
use crate::{
    error::{ErrorKind, StewardError},
    store::StoreError,
};

/// Body characters returned by default.
/// Default of a read's `max_chars`.
pub const READ_WINDOW_CHARS: usize = 6_000;
/// Most body characters one read may return.
/// Fixed (not a setting).
pub const READ_WINDOW_MAX_CHARS: usize = 12_000;
/// Messages per thread page by default.
/// Default of a thread read's `limit`.
pub const THREAD_PAGE: usize = 20;
/// Most messages per thread page.
/// Fixed (not a setting).
pub const THREAD_PAGE_MAX: usize = 100;
/// Characters of each snippet in a thread page.
/// Fixed (not a setting).
pub const THREAD_SNIPPET_CHARS: usize = 120;

/// Errors of reads.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// No live message has this id.
    #[error("message {id} not found")]
    MessageNotFound {
        /// The id asked for.
        id: i64,
    },
    /// No thread with live messages has this id.
    #[error("thread {id} not found")]
    ThreadNotFound {
        /// The id asked for.
        id: i64,
    },
    /// A window or page size outside its bounds.
    #[error("{what} {value} is out of range (1..={max})")]
    OutOfRange {
        /// What was out of range.
        what: &'static str,
        /// The value given.
        value: usize,
        /// The bound.
        max: usize,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl StewardError for ReadError {
    fn code(&self) -> &'static str {
        match self {
            Self::MessageNotFound { .. } => "MESSAGE_NOT_FOUND",
            Self::ThreadNotFound { .. } => "THREAD_NOT_FOUND",
            Self::OutOfRange { .. } => "LIMIT_OUT_OF_RANGE",
            Self::Store(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::MessageNotFound { .. } | Self::ThreadNotFound { .. } => ErrorKind::NotFound,
            Self::OutOfRange { .. } => ErrorKind::InvalidInput,
            Self::Store(e) => e.kind(),
        }
    }
}

/// Which part of a body to return. No `Default`: callers state the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyWindow {
    /// First character (not byte) to return.
    pub offset: usize,
    /// Most characters to return (1..=READ_WINDOW_MAX_CHARS).
    pub max_chars: usize,
}

impl BodyWindow {
    /// The first window of the default size.
    pub fn first() -> Self {
        Self { offset: 0, max_chars: READ_WINDOW_CHARS }
    }
}

/// An attachment's metadata; the bytes stay in the blob store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct AttachmentInfo {
    /// Position in the message.
    pub position: i64,
    /// File name, if any.
    pub name: Option<String>,
    /// `type/subtype`.
    pub mime_type: String,
    /// Size in bytes.
    pub size: i64,
    /// SHA-256 of the bytes; `None` when the source did not hold them (a partial download).
    pub sha256: Option<String>,
}

/// One window of a body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct BodyText {
    /// The text of this window.
    pub text: String,
    /// The window's first character.
    pub offset: usize,
    /// Where the next window starts; `None` at the end.
    pub next_offset: Option<usize>,
    /// The body's length in characters.
    pub total_chars: usize,
    /// How complete the stored body is.
    pub state: BodyState,
}

/// A message as read by a person or a model.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct MessageRead {
    /// The mirror's id.
    pub id: i64,
    /// The RFC Message-ID, without angle brackets.
    pub message_id: Option<String>,
    /// The thread.
    pub thread_id: i64,
    /// The account.
    pub account: String,
    /// The attributed mailbox.
    pub mailbox: String,
    /// Its role.
    pub mailbox_role: MailboxRole,
    /// The subject.
    pub subject: String,
    /// Senders, then recipients.
    pub from: Vec<Address>,
    /// To.
    pub to: Vec<Address>,
    /// Cc.
    pub cc: Vec<Address>,
    /// Bcc (only where the source recorded it: drafts and sent mail).
    pub bcc: Vec<Address>,
    /// The Date header, RFC 3339 in UTC.
    pub date: Option<String>,
    /// Flags.
    pub flags: Flags,
    /// Attachment metadata.
    pub attachments: Vec<AttachmentInfo>,
    /// The requested window of the body.
    pub body: BodyText,
}

/// One message in a thread page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ThreadEntry {
    /// The mirror's id (read it with `read_message`).
    pub id: i64,
    /// The subject.
    pub subject: String,
    /// The first sender.
    pub from: Option<Address>,
    /// RFC 3339 in UTC.
    pub date: Option<String>,
    /// Not yet seen.
    pub unread: bool,
    /// Has attachments.
    pub has_attachments: bool,
    /// The start of the body, at most THREAD_SNIPPET_CHARS characters.
    pub snippet: String,
}

/// A page of a thread, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ThreadPage {
    /// The thread.
    pub thread_id: i64,
    /// Its normalized subject.
    pub subject: String,
    /// Live messages in the thread.
    pub message_count: i64,
    /// This page.
    pub messages: Vec<ThreadEntry>,
    /// Where the next page starts; `None` at the end.
    pub next_offset: Option<usize>,
}

/// Formats Unix seconds as RFC 3339 in UTC.
pub(crate) fn rfc3339(ts: i64) -> String {
    crate::time::CivilTime::from_unix(ts).rfc3339()
}

fn window(text: &str, w: BodyWindow, state: BodyState) -> BodyText {
    let total_chars = text.chars().count();
    let body: String = text.chars().skip(w.offset).take(w.max_chars).collect();
    let end = w.offset.saturating_add(w.max_chars);
    BodyText {
        text: body,
        offset: w.offset,
        next_offset: (end < total_chars).then_some(end),
        total_chars,
        state,
    }
}

fn check(what: &'static str, value: usize, max: usize) -> Result<(), ReadError> {
    if value == 0 || value > max {
        return Err(ReadError::OutOfRange { what, value, max });
    }
    Ok(())
}

impl Mirror {
    /// Reads one live message with a bounded window of its body.
    pub fn read_message(&self, id: i64, body: BodyWindow) -> Result<MessageRead, ReadError> {
        check("body window", body.max_chars, READ_WINDOW_MAX_CHARS)?;
        self.db.read(|c| {
            let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
            type Row = (Option<String>, i64, String, String, String, String, Option<i64>, i64, String, String);
            let row: Option<Row> = c
                .query_row(
                    "SELECT m.rfc_message_id, m.thread_id, a.name, b.name, b.role, m.subject, m.date, m.flags,
                            m.body_state, coalesce(t.body_text, '')
                     FROM messages m JOIN accounts a ON a.id = m.account_id JOIN mailboxes b ON b.id = m.mailbox_id
                     LEFT JOIN message_bodies t ON t.message_id = m.id
                     WHERE m.id = ?1 AND m.deleted_at IS NULL",
                    [id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?, r.get(9)?)),
                )
                .optional()
                .map_err(q("read message"))?;
            let Some((message_id, thread_id, account, mailbox, role, subject, date, flags, state, text)) = row else {
                return Err(ReadError::MessageNotFound { id });
            };
            let mut lists: [Vec<Address>; 4] = Default::default();
            let mut stmt = c
                .prepare_cached(
                    "SELECT field, name, address FROM message_addresses WHERE message_id = ?1 ORDER BY field, position",
                )
                .map_err(q("prepare addresses"))?;
            let rows = stmt
                .query_map([id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?, r.get::<_, String>(2)?)))
                .map_err(q("addresses"))?;
            for r in rows {
                let (field, name, addr) = r.map_err(q("address"))?;
                let slot = match field.as_str() {
                    "from" => 0,
                    "to" => 1,
                    "cc" => 2,
                    _ => 3,
                };
                lists[slot].push(Address { name, addr });
            }
            let mut stmt = c
                .prepare_cached(
                    "SELECT position, name, mime_type, size, sha256 FROM attachments WHERE message_id = ?1 ORDER BY position",
                )
                .map_err(q("prepare attachments"))?;
            let attachments = stmt
                .query_map([id], |r| {
                    Ok(AttachmentInfo { position: r.get(0)?, name: r.get(1)?, mime_type: r.get(2)?, size: r.get(3)?, sha256: r.get(4)? })
                })
                .map_err(q("attachments"))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(q("attachment"))?;
            let state = match state.as_str() {
                "full" => BodyState::Full,
                "partial" => BodyState::Partial,
                _ => BodyState::None,
            };
            let [from, to, cc, bcc] = lists;
            Ok(MessageRead {
                id,
                message_id,
                thread_id,
                account,
                mailbox,
                mailbox_role: MailboxRole::parse(&role).unwrap_or(MailboxRole::Other),
                subject,
                from,
                to,
                cc,
                bcc,
                date: date.map(rfc3339),
                flags: Flags::from_bits(flags),
                attachments,
                body: window(&text, body, state),
            })
        })
    }

    /// Reads a page of a thread's live messages, newest first.
    pub fn read_thread(
        &self,
        thread_id: i64,
        offset: usize,
        limit: usize,
    ) -> Result<ThreadPage, ReadError> {
        check("thread page", limit, THREAD_PAGE_MAX)?;
        self.db.read(|c| {
            let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
            let head: Option<(String, i64)> = c
                .query_row("SELECT norm_subject, message_count FROM threads WHERE id = ?1", [thread_id], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()
                .map_err(q("read thread"))?;
            let Some((subject, message_count)) = head.filter(|h| h.1 > 0) else {
                return Err(ReadError::ThreadNotFound { id: thread_id });
            };
            let mut stmt = c
                .prepare_cached(
                    "SELECT m.id, m.subject, m.from_name, m.from_addr, m.date, m.flags, m.attachment_count,
                            substr(coalesce(t.body_text, ''), 1, ?4)
                     FROM messages m LEFT JOIN message_bodies t ON t.message_id = m.id
                     WHERE m.thread_id = ?1 AND m.deleted_at IS NULL
                     ORDER BY coalesce(m.date, m.received_at) DESC, m.id DESC LIMIT ?2 OFFSET ?3",
                )
                .map_err(q("prepare thread page"))?;
            let fetch = i64::try_from(limit + 1).unwrap_or(i64::MAX);
            let mut messages = stmt
                .query_map(
                    params![thread_id, fetch, i64::try_from(offset).unwrap_or(i64::MAX), i64::try_from(THREAD_SNIPPET_CHARS * 4).unwrap_or(480)],
                    |r| {
                        let addr: Option<String> = r.get(3)?;
                        let text: String = r.get(7)?;
                        Ok(ThreadEntry {
                            id: r.get(0)?,
                            subject: r.get(1)?,
                            from: addr.map(|addr| Address { name: r.get(2).ok().flatten(), addr }),
                            date: r.get::<_, Option<i64>>(4)?.map(rfc3339),
                            unread: r.get::<_, i64>(5)? & 1 == 0,
                            has_attachments: r.get::<_, i64>(6)? > 0,
                            snippet: text.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(THREAD_SNIPPET_CHARS).collect(),
                        })
                    },
                )
                .map_err(q("thread page"))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(q("thread entry"))?;
            let next_offset = (messages.len() > limit).then(|| offset + limit);
            messages.truncate(limit);
            Ok(ThreadPage { thread_id, subject, message_count, messages, next_offset })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_continue_by_characters() {
        let text = "già fatto, perché no? ".repeat(10);
        let total = text.chars().count();
        let mut offset = 0;
        let mut rebuilt = String::new();
        loop {
            let w = window(&text, BodyWindow { offset, max_chars: 7 }, BodyState::Full);
            assert!(w.text.chars().count() <= 7);
            rebuilt.push_str(&w.text);
            match w.next_offset {
                Some(n) => offset = n,
                None => break,
            }
        }
        assert_eq!(rebuilt, text);
        assert_eq!(
            window(&text, BodyWindow { offset: total + 5, max_chars: 7 }, BodyState::Full).text,
            ""
        );
    }
}
