//! The typed search request and its validation.

use serde::{Deserialize, Serialize};

use super::{SearchError, engine::BROWSE_WINDOW};
use crate::{
    index::{MIN_SUBSTRING_CHARS, SubstringField, fold::fold},
    mirror::MailboxRole,
};

/// Results per page when the request does not say.
/// Default of a search's `limit`.
pub const DEFAULT_LIMIT: usize = 8;
/// Most results per page for a model (a model's context is not a database cursor).
/// Fixed (not a setting).
pub const MAX_MODEL_LIMIT: usize = 12;
/// Most results per page through the API.
/// Fixed (not a setting).
pub const MAX_API_LIMIT: usize = 100;
/// Longest free text or substring accepted, in characters.
/// Fixed (not a setting).
pub const MAX_QUERY_CHARS: usize = 1_000;

/// Which mailboxes a search covers.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MailboxScope {
    /// Every mailbox.
    #[default]
    Any,
    /// Mailboxes with this name (a message counts if any copy of it is there).
    Name(String),
    /// Mailboxes with this role.
    Role(MailboxRole),
}

impl MailboxScope {
    /// The scope of a role name (`inbox`, `sent`, `all_mail`, …).
    pub fn role(name: &str) -> Result<Self, SearchError> {
        MailboxRole::parse(&name.trim().to_lowercase().replace('-', "_"))
            .map(Self::Role)
            .ok_or_else(|| SearchError::InvalidRole(name.to_owned()))
    }
}

/// Browse order (searches with text are ranked by relevance instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sort {
    /// Newest first.
    #[default]
    DateDesc,
    /// Oldest first.
    DateAsc,
    /// Largest first.
    SizeDesc,
}

impl Sort {
    /// Parses `date`, `date-asc` or `size` (the command's spelling).
    pub fn parse(s: &str) -> Result<Self, SearchError> {
        match s {
            "date" | "date-desc" | "date_desc" => Ok(Self::DateDesc),
            "date-asc" | "date_asc" => Ok(Self::DateAsc),
            "size" | "size-desc" | "size_desc" => Ok(Self::SizeDesc),
            _ => Err(SearchError::InvalidSort(s.to_owned())),
        }
    }
}

/// A mail search. Every field is optional except paging; constraints combine with AND.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchRequest {
    /// Free text, ranked by BM25 (and semantically when an embedder is configured). Never
    /// parsed as a query language.
    pub text: Option<String>,
    /// The sender's name or address contains this.
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
    /// Only these mailboxes.
    pub mailbox: MailboxScope,
    /// Dated at or after (Unix seconds).
    pub after: Option<i64>,
    /// Dated before (Unix seconds).
    pub before: Option<i64>,
    /// `true`: only unread; `false`: only read.
    pub unread: Option<bool>,
    /// `true`: only flagged; `false`: only unflagged.
    pub flagged: Option<bool>,
    /// `true`: only answered; `false`: only unanswered.
    pub answered: Option<bool>,
    /// `true`: only with attachments; `false`: only without.
    pub has_attachments: Option<bool>,
    /// An attachment's file name contains this (case-insensitive).
    pub attachment_name: Option<String>,
    /// An attachment's MIME type contains this (`pdf`, `image/`).
    pub attachment_type: Option<String>,
    /// At least this many bytes.
    pub min_size: Option<u64>,
    /// At most this many bytes.
    pub max_size: Option<u64>,
    /// Every matching message instead of the best one per thread.
    pub per_message: bool,
    /// Browse order when there is no text.
    pub sort: Sort,
    /// Results per page (1..=[`MAX_API_LIMIT`]).
    pub limit: usize,
    /// Results to skip.
    pub offset: usize,
}

impl Default for SearchRequest {
    fn default() -> Self {
        Self {
            text: None,
            from: None,
            to: None,
            cc: None,
            subject_contains: None,
            body_contains: None,
            account: None,
            mailbox: MailboxScope::Any,
            after: None,
            before: None,
            unread: None,
            flagged: None,
            answered: None,
            has_attachments: None,
            attachment_name: None,
            attachment_type: None,
            min_size: None,
            max_size: None,
            per_message: false,
            sort: Sort::DateDesc,
            limit: DEFAULT_LIMIT,
            offset: 0,
        }
    }
}

/// A validated substring constraint.
#[derive(Debug, Clone)]
pub(crate) struct Substring {
    pub(crate) field: SubstringField,
    pub(crate) folded: String,
}

impl SearchRequest {
    /// A request for `text` with the defaults.
    pub fn text(text: impl Into<String>) -> Self {
        Self { text: Some(text.into()), ..Self::default() }
    }

    /// The free text, if it has any non-space character.
    pub(crate) fn query_text(&self) -> Option<&str> {
        self.text.as_deref().map(str::trim).filter(|t| !t.is_empty())
    }

    /// Checks bounds and ranges; returns the folded substring constraints.
    pub(crate) fn validate(&self, max_limit: usize) -> Result<Vec<Substring>, SearchError> {
        if self.limit == 0 || self.limit > max_limit {
            return Err(SearchError::OutOfRange {
                what: "limit",
                value: self.limit,
                min: 1,
                max: max_limit,
            });
        }
        if self.offset.saturating_add(self.limit) > BROWSE_WINDOW {
            return Err(SearchError::OutOfRange {
                what: "offset",
                value: self.offset,
                min: 0,
                max: BROWSE_WINDOW - self.limit,
            });
        }
        if let (Some(a), Some(b)) = (self.after, self.before)
            && a >= b
        {
            return Err(SearchError::EmptyRange("after must be before before"));
        }
        if let (Some(a), Some(b)) = (self.min_size, self.max_size)
            && a > b
        {
            return Err(SearchError::EmptyRange("min_size is above max_size"));
        }
        let long = |what: &'static str, v: &Option<String>| match v {
            Some(s) if s.chars().count() > MAX_QUERY_CHARS => {
                Err(SearchError::TooLong { what, len: s.chars().count(), max: MAX_QUERY_CHARS })
            }
            _ => Ok(()),
        };
        long("text", &self.text)?;
        long("attachment_name", &self.attachment_name)?;
        long("attachment_type", &self.attachment_type)?;
        let mut out = Vec::new();
        for (name, field, value) in [
            ("from", SubstringField::From, &self.from),
            ("to", SubstringField::To, &self.to),
            ("cc", SubstringField::Cc, &self.cc),
            ("subject_contains", SubstringField::Subject, &self.subject_contains),
            ("body_contains", SubstringField::Body, &self.body_contains),
        ] {
            let Some(v) = value else { continue };
            long(name, value)?;
            let folded = fold(v.trim());
            if folded.chars().count() < MIN_SUBSTRING_CHARS {
                return Err(SearchError::SubstringTooShort { field: name, value: v.clone() });
            }
            out.push(Substring { field, folded });
        }
        Ok(out)
    }
}
