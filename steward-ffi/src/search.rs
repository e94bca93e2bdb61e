//! Search: the flat parameters in, a page of summaries out (see `steward_core::search`).

use steward_core::search::{MessageSummary, SearchPage, SearchParams};

use crate::{FfiError, Steward};

/// A search, as `GET /search` takes it; every field is optional (absent: no constraint).
#[derive(Debug, Clone, Default, PartialEq, uniffi::Record)]
pub struct SearchQuery {
    /// Free text (ranked lexically, and semantically when an embedder is configured).
    #[uniffi(default = None)]
    pub text: Option<String>,
    /// A sender name or address.
    #[uniffi(default = None)]
    pub from: Option<String>,
    /// A `To` name or address.
    #[uniffi(default = None)]
    pub to: Option<String>,
    /// A substring of the subject (at least 3 characters).
    #[uniffi(default = None)]
    pub subject_contains: Option<String>,
    /// A substring of the body (at least 3 characters).
    #[uniffi(default = None)]
    pub body_contains: Option<String>,
    /// Only this account.
    #[uniffi(default = None)]
    pub account: Option<String>,
    /// Only this mailbox, by name.
    #[uniffi(default = None)]
    pub mailbox: Option<String>,
    /// Only mailboxes of this role (`inbox`, `sent`, …).
    #[uniffi(default = None)]
    pub role: Option<String>,
    /// On or after (`YYYY-MM-DD` or RFC 3339).
    #[uniffi(default = None)]
    pub after: Option<String>,
    /// Before (`YYYY-MM-DD` or RFC 3339).
    #[uniffi(default = None)]
    pub before: Option<String>,
    /// Only unread (true) or read (false) mail.
    #[uniffi(default = None)]
    pub unread: Option<bool>,
    /// Only mail with (true) or without (false) attachments.
    #[uniffi(default = None)]
    pub has_attachments: Option<bool>,
    /// `date`, `date-asc` or `size` when there is no text.
    #[uniffi(default = None)]
    pub sort: Option<String>,
    /// Results per page (1..=100; absent: 8).
    #[uniffi(default = None)]
    pub limit: Option<u32>,
    /// Results to skip.
    #[uniffi(default = None)]
    pub offset: Option<u32>,
}

impl From<SearchQuery> for SearchParams {
    fn from(q: SearchQuery) -> Self {
        Self {
            text: q.text,
            from: q.from,
            to: q.to,
            subject_contains: q.subject_contains,
            body_contains: q.body_contains,
            account: q.account,
            mailbox: q.mailbox,
            role: q.role,
            after: q.after,
            before: q.before,
            unread: q.unread,
            has_attachments: q.has_attachments,
            sort: q.sort,
            limit: q.limit.map(|n| n as usize),
            offset: q.offset.map(|n| n as usize),
            ..Self::default()
        }
    }
}

/// One result: enough to choose what to read.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct SearchHit {
    /// The message.
    pub id: i64,
    /// Its thread.
    pub thread_id: i64,
    /// The subject.
    pub subject: String,
    /// The sender's name, if any.
    pub from_name: Option<String>,
    /// The sender's address.
    pub from_address: Option<String>,
    /// The date (RFC 3339).
    pub date: Option<String>,
    /// The account.
    pub account: String,
    /// The mailbox.
    pub mailbox: String,
    /// A short excerpt.
    pub snippet: String,
    /// Whether it has attachments.
    pub has_attachments: bool,
    /// Whether it is unread.
    pub unread: bool,
}

impl From<MessageSummary> for SearchHit {
    fn from(m: MessageSummary) -> Self {
        Self {
            id: m.id,
            thread_id: m.thread_id,
            subject: m.subject,
            from_name: m.from.as_ref().and_then(|f| f.name.clone()),
            from_address: m.from.map(|f| f.address),
            date: m.date,
            account: m.account,
            mailbox: m.mailbox,
            snippet: m.snippet,
            has_attachments: m.has_attachments,
            unread: m.unread,
        }
    }
}

/// A page of results.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct SearchResults {
    /// Best first.
    pub hits: Vec<SearchHit>,
    /// The offset of the next page; absent at the end.
    pub next_offset: Option<u64>,
}

impl From<SearchPage> for SearchResults {
    fn from(p: SearchPage) -> Self {
        Self {
            hits: p.messages.into_iter().map(Into::into).collect(),
            next_offset: p.page.next_offset.map(|n| n as u64),
        }
    }
}

#[uniffi::export]
impl Steward {
    /// Searches the mirror.
    pub fn search(&self, query: SearchQuery) -> Result<SearchResults, FfiError> {
        let request =
            SearchParams::from(query).into_request().map_err(|e| FfiError::from_core(&e))?;
        self.inner().search(&request).map(Into::into).map_err(|e| FfiError::from_core(&e))
    }

    /// [`Steward::search`] as an async call: the search runs on the library's runtime.
    pub async fn search_async(&self, query: SearchQuery) -> Result<SearchResults, FfiError> {
        let steward = self.handle();
        crate::runtime::blocking(move || {
            let request =
                SearchParams::from(query).into_request().map_err(|e| FfiError::from_core(&e))?;
            steward.search(&request).map(Into::into).map_err(|e| FfiError::from_core(&e))
        })
        .await
    }
}
