//! Evidence that a mail left: its copy in the mirror's Sent-role mailbox.

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    EVIDENCE_WINDOW_AFTER_SECS, EVIDENCE_WINDOW_BEFORE_SECS, address_set, body_digest,
    normalize_address,
};
use crate::{mirror::Mirror, store::StoreError};

/// Candidates the field match examines at most (same sender, subject and window).
/// Fixed (not a setting).
const MAX_CANDIDATES: usize = 20;

/// The name of a Sent-role mailbox holding an active copy of message `m`, or NULL.
const SENT_MAILBOX: &str =
    "(SELECT b.name FROM message_paths p JOIN mailboxes b ON b.id = p.mailbox_id
      WHERE p.message_id = m.id AND b.role = 'sent' LIMIT 1)";

/// One message in a Sent mailbox that matches an operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceMatch {
    /// The mirror's message id.
    pub message: i64,
    /// The mailbox it is in.
    pub mailbox: String,
    /// Its Message-ID.
    pub rfc_message_id: Option<String>,
    /// Its Date header (Unix seconds).
    pub date: Option<i64>,
    /// `message_id` (our Message-ID found) or `fields` (sender, subject, recipients, body and
    /// reply linkage all equal, inside the window).
    pub matched_on: String,
}

/// What one confirmation check found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// The matches (one confirms; several are ambiguous).
    pub matches: Vec<EvidenceMatch>,
    /// The window searched by the field match (Unix seconds, inclusive).
    pub window: (i64, i64),
}

impl Evidence {
    /// The single match that confirms the operation.
    pub fn matched(&self) -> Option<&EvidenceMatch> {
        match self.matches.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Several messages matched: not a confirmation.
    pub fn is_ambiguous(&self) -> bool {
        self.matches.len() > 1
    }
}

fn q(ctx: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::query(ctx, e)
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

fn text<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

impl Mirror {
    /// The References of the message `parent` (a Message-ID) in `account`, oldest first
    /// (empty when it is not mirrored).
    pub(crate) fn references_of(
        &self,
        account: &str,
        parent: &str,
    ) -> Result<Vec<String>, StoreError> {
        self.db().read(|c| {
            let id: Option<i64> = c
                .prepare_cached(
                    "SELECT m.id FROM messages m JOIN accounts a ON a.id = m.account_id
                     WHERE a.name = ?1 AND m.identity = ?2",
                )
                .and_then(|mut s| s.query_row(params![account, parent], |r| r.get(0)).optional())
                .map_err(q("reply parent"))?;
            let Some(id) = id else { return Ok(Vec::new()) };
            let refs: Vec<(i64, String)> = c
                .prepare_cached(
                    "SELECT position, ref FROM message_refs WHERE message_id = ?1 ORDER BY position",
                )
                .and_then(|mut s| {
                    s.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
                        .collect::<Result<Vec<_>, _>>()
                })
                .map_err(q("reply parent refs"))?;
            // The mirror keeps the parent's In-Reply-To (position 0 when it had one) and its
            // nearest References in header order. The In-Reply-To is the nearest ancestor, so
            // it goes last; the result approximates the parent's References when the mirror
            // kept fewer than the header had.
            let mut out: Vec<String> = Vec::with_capacity(refs.len());
            let mut rest = refs.into_iter().map(|(_, r)| r);
            let first = rest.next();
            for r in rest.chain(first) {
                out.retain(|x| *x != r);
                out.push(r);
            }
            Ok(out)
        })
    }

    /// A mirrored attachment whose bytes are stored: name, MIME type, size, SHA-256.
    #[allow(clippy::type_complexity)]
    pub(crate) fn attachment_blob(
        &self,
        message: i64,
        position: i64,
    ) -> Result<Option<(Option<String>, String, u64, String)>, StoreError> {
        self.db().read(|c| {
            c.prepare_cached(
                "SELECT name, mime_type, size, sha256 FROM attachments
                 WHERE message_id = ?1 AND position = ?2 AND sha256 IS NOT NULL",
            )
            .and_then(|mut s| {
                s.query_row(params![message, position], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)?.max(0).unsigned_abs(), r.get(3)?))
                })
                .optional()
            })
            .map_err(q("attachment blob"))
        })
    }

    /// Looks for the sent copy of an operation whose `expected` outcome is given (see
    /// [`super::OutgoingMail::expected`]), attempted at `attempted_at`.
    pub(crate) fn sent_evidence(
        &self,
        expected: &Value,
        attempted_at: i64,
    ) -> Result<Evidence, StoreError> {
        let window =
            (attempted_at - EVIDENCE_WINDOW_BEFORE_SECS, attempted_at + EVIDENCE_WINDOW_AFTER_SECS);
        let account = text(expected, "account").unwrap_or_default();
        let mut evidence = Evidence { matches: Vec::new(), window };
        self.db().read(|c| {
            // 1. Our Message-ID in an active copy in a Sent-role mailbox.
            if let Some(mid) = text(expected, "message_id") {
                let hit = c
                    .prepare_cached(&format!(
                        "SELECT m.id, {SENT_MAILBOX}, m.rfc_message_id, m.date
                         FROM messages m
                         WHERE m.account_id = (SELECT id FROM accounts WHERE name = ?1)
                           AND m.identity = ?2 AND m.deleted_at IS NULL"
                    ))
                    .and_then(|mut s| {
                        s.query_row(params![account, mid], |r| {
                            let mailbox: Option<String> = r.get(1)?;
                            let (message, rfc_message_id, date) = (r.get(0)?, r.get(2)?, r.get(3)?);
                            Ok(mailbox.map(|mailbox| EvidenceMatch {
                                message,
                                mailbox,
                                rfc_message_id,
                                date,
                                matched_on: "message_id".to_owned(),
                            }))
                        })
                        .optional()
                    })
                    .map_err(q("evidence by message id"))?
                    .flatten();
                if let Some(hit) = hit {
                    evidence.matches.push(hit);
                    return Ok(());
                }
            }
            // 2. Every field equal, inside the window.
            let from = normalize_address(text(expected, "from").unwrap_or_default());
            let subject = text(expected, "subject").unwrap_or_default();
            let candidates: Vec<(i64, String, Option<String>, Option<i64>)> = c
                // Driven by the date index (`+` keeps the planner off the account prefix of
                // the identity index, which would walk the whole account).
                .prepare_cached(&format!(
                    "SELECT m.id, {SENT_MAILBOX} AS mailbox, m.rfc_message_id, m.date
                     FROM messages m
                     WHERE m.date BETWEEN ?2 AND ?3
                       AND +m.account_id = (SELECT id FROM accounts WHERE name = ?1)
                       AND m.deleted_at IS NULL
                       AND lower(trim(m.from_addr)) = ?4 AND trim(m.subject) = ?5
                       AND mailbox IS NOT NULL
                     ORDER BY m.id LIMIT ?6"
                ))
                .and_then(|mut s| {
                    s.query_map(
                        params![account, window.0, window.1, from, subject, MAX_CANDIDATES as i64],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                    )?
                    .collect::<Result<Vec<_>, _>>()
                })
                .map_err(q("evidence candidates"))?;
            let want_to = strings(expected, "to");
            let want_cc = strings(expected, "cc");
            let want_body = text(expected, "body_sha256").unwrap_or_default();
            let want_parent = text(expected, "in_reply_to");
            for (id, mailbox, rfc, date) in candidates {
                let addrs = |field: &str| -> Result<Vec<String>, StoreError> {
                    c.prepare_cached(
                        "SELECT address FROM message_addresses WHERE message_id = ?1 AND field = ?2",
                    )
                    .and_then(|mut s| {
                        s.query_map(params![id, field], |r| r.get::<_, String>(0))?
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .map(|v| address_set(&v))
                    .map_err(q("evidence addresses"))
                };
                if addrs("to")? != want_to || addrs("cc")? != want_cc {
                    continue;
                }
                let body: Option<String> = c
                    .prepare_cached("SELECT body_text FROM message_bodies WHERE message_id = ?1")
                    .and_then(|mut s| s.query_row([id], |r| r.get(0)).optional())
                    .map_err(q("evidence body"))?;
                if body.as_deref().map(body_digest).as_deref() != Some(want_body) {
                    continue;
                }
                let parent: Option<String> = c
                    .prepare_cached(
                        "SELECT ref FROM message_refs WHERE message_id = ?1 AND position = 0",
                    )
                    .and_then(|mut s| s.query_row([id], |r| r.get(0)).optional())
                    .map_err(q("evidence linkage"))?;
                if parent.as_deref() != want_parent {
                    continue;
                }
                evidence.matches.push(EvidenceMatch {
                    message: id,
                    mailbox,
                    rfc_message_id: rfc,
                    date,
                    matched_on: "fields".to_owned(),
                });
            }
            Ok(())
        })?;
        Ok(evidence)
    }
}
