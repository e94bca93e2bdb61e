//! The flat, string-typed form of a [`SearchRequest`]: what a query string or a command line
//! carries. Lowering it is the core's job so that every frontend reads the same spelling.

use serde::Deserialize;

use super::{MailboxScope, SearchError, SearchRequest, Sort, request::DEFAULT_LIMIT};
use crate::time::parse_date;

/// A search as flat parameters (`GET /search?text=invoice&role=inbox&after=2026-01-01`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SearchParams {
    /// Free text, ranked by relevance; never parsed as a query language.
    pub text: Option<String>,
    /// The sender's name or address contains this (at least 3 characters).
    pub from: Option<String>,
    /// A `To` name or address contains this.
    pub to: Option<String>,
    /// A `Cc` name or address contains this.
    pub cc: Option<String>,
    /// The subject contains this.
    pub subject_contains: Option<String>,
    /// The body contains this.
    pub body_contains: Option<String>,
    /// Only this account.
    pub account: Option<String>,
    /// Only mailboxes with this name (wins over `role`).
    pub mailbox: Option<String>,
    /// Only mailboxes with this role: inbox, sent, drafts, trash, junk, archive, all_mail, other.
    pub role: Option<String>,
    /// Dated at or after: YYYY-MM-DD or RFC 3339.
    pub after: Option<String>,
    /// Dated before: YYYY-MM-DD or RFC 3339.
    pub before: Option<String>,
    /// `true`: only unread; `false`: only read.
    pub unread: Option<bool>,
    /// `true`: only flagged; `false`: only unflagged.
    pub flagged: Option<bool>,
    /// `true`: only answered; `false`: only unanswered.
    pub answered: Option<bool>,
    /// `true`: only with attachments; `false`: only without.
    pub has_attachments: Option<bool>,
    /// An attachment's file name contains this.
    pub attachment_name: Option<String>,
    /// An attachment's MIME type contains this (`pdf`, `image/`).
    pub attachment_type: Option<String>,
    /// At least this many bytes.
    pub min_size: Option<u64>,
    /// At most this many bytes.
    pub max_size: Option<u64>,
    /// Every matching message instead of the best one per thread.
    pub per_message: Option<bool>,
    /// Browse order without text: date (newest first), date-asc or size.
    pub sort: Option<String>,
    /// Results per page (1..=100, default 8).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<usize>,
    /// Results to skip.
    pub offset: Option<usize>,
}

impl SearchParams {
    /// Reads the parameters from a JSON object (what a binding passes along from keyword
    /// arguments or a record); an unknown name or a wrong type is a typed error.
    pub fn from_json(json: &str) -> Result<Self, SearchError> {
        serde_json::from_str(json).map_err(|e| SearchError::InvalidParams(e.to_string()))
    }

    /// The typed request. Dates, roles and sort names are checked here; bounds are checked by
    /// the search itself.
    pub fn into_request(self) -> Result<SearchRequest, SearchError> {
        let date = |d: Option<String>| d.as_deref().map(parse_date).transpose();
        Ok(SearchRequest {
            mailbox: match (self.mailbox, self.role) {
                (Some(name), _) => MailboxScope::Name(name),
                (None, Some(role)) => MailboxScope::role(&role)?,
                (None, None) => MailboxScope::Any,
            },
            after: date(self.after)?,
            before: date(self.before)?,
            sort: self.sort.as_deref().map(Sort::parse).transpose()?.unwrap_or_default(),
            text: self.text,
            from: self.from,
            to: self.to,
            cc: self.cc,
            subject_contains: self.subject_contains,
            body_contains: self.body_contains,
            account: self.account,
            unread: self.unread,
            flagged: self.flagged,
            answered: self.answered,
            has_attachments: self.has_attachments,
            attachment_name: self.attachment_name,
            attachment_type: self.attachment_type,
            min_size: self.min_size,
            max_size: self.max_size,
            per_message: self.per_message.unwrap_or(false),
            limit: self.limit.unwrap_or(DEFAULT_LIMIT),
            offset: self.offset.unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StewardError as _;

    #[test]
    fn lowers_and_refuses_bad_spellings() {
        let r = SearchParams {
            text: Some("invoice".to_owned()),
            role: Some("Inbox".to_owned()),
            after: Some("2026-01-01".to_owned()),
            sort: Some("date-asc".to_owned()),
            ..SearchParams::default()
        }
        .into_request()
        .unwrap();
        assert_eq!(r.mailbox, MailboxScope::Role(crate::mirror::MailboxRole::Inbox));
        assert_eq!(r.after, Some(1_767_225_600));
        assert_eq!(r.sort, Sort::DateAsc);
        assert_eq!(r.limit, DEFAULT_LIMIT);
        let code = |p: SearchParams| p.into_request().unwrap_err().code();
        assert_eq!(
            code(SearchParams { role: Some("spam!".into()), ..Default::default() }),
            "INVALID_ROLE"
        );
        assert_eq!(
            code(SearchParams { after: Some("yesterday".into()), ..Default::default() }),
            "INVALID_DATE"
        );
        assert_eq!(
            code(SearchParams { sort: Some("random".into()), ..Default::default() }),
            "INVALID_SORT"
        );
    }
}
