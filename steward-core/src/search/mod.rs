//! Mail search: structured filters, BM25, trigram substrings and vector KNN, fused by
//! Reciprocal Rank Fusion, collapsed by thread, returned as pages that explain themselves.
//!
//! Owns: the typed [`SearchRequest`], its validation, the retrieval algorithm and the
//! [`SearchPage`] with per-result provenance and its compact rendering for models. Never does:
//! return whole bodies (reads do, in bounded windows), compare BM25 scores with vector
//! distances (RRF fuses ranks), mix vectors of different models or dimensions, or pass query
//! text to a query language (it is analyzed into terms).
//!
//! The algorithm, with text:
//! 1. resolve the scope (account, mailbox by name or role) and build the SQL filters;
//! 2. ≤ [`LEXICAL_CANDIDATES`] BM25 candidates (over-fetching up to [`FILTERED_CANDIDATES`]
//!    when filters apply, which are then applied in rank order);
//! 3. if an embedder is configured: embed the query, check its dimension, ≤
//!    [`VECTOR_CANDIDATES`] KNN candidates within the embedder's `max_distance`, filtered the
//!    same way, KNN order kept — and of those only the ones that stand out from the space's
//!    probe queries ([`crate::index::calibration`]): a neighbour is a match when the query is
//!    much nearer to it than queries about something else are, so an absent topic or a
//!    nonsense word has no semantic candidates and a rare word's lexical hits are not diluted
//!    by the least unrelated messages;
//! 4. RRF with `k` = [`RRF_K`];
//! 5. keep the fused results that satisfy every substring constraint (trigram index, then the
//!    text itself);
//! 6. unless `per_message`, keep the best message of each thread;
//! 7. offset and limit, then materialize summaries with snippets.
//!
//! Without text it browses: a pool of ≤ [`BROWSE_WINDOW`] messages ordered by the sort key —
//! from SQL, or from the most selective substring constraint's candidates when there are
//! substring constraints — then filters, the other substring constraints, thread collapse,
//! offset and limit. Substring matches are confirmed on the text lazily, only as far as the
//! page needs.

pub(crate) mod engine;
mod params;
mod request;
mod snippet;

pub use engine::{
    BROWSE_WINDOW, FILTERED_CANDIDATES, LEXICAL_CANDIDATES, RRF_K, VECTOR_CANDIDATES,
};
pub use params::SearchParams;
pub use request::{
    DEFAULT_LIMIT, MAX_API_LIMIT, MAX_MODEL_LIMIT, MAX_QUERY_CHARS, MailboxScope, SearchRequest,
    Sort,
};

use serde::Serialize;

use crate::{
    error::{ErrorKind, StewardError},
    index::IndexError,
    store::StoreError,
};

/// Characters of the snippet of each of the first three results.
/// Fixed (not a setting).
pub const SNIPPET_TOP_CHARS: usize = 200;
/// Characters of the snippet of later results.
/// Fixed (not a setting).
pub const SNIPPET_CHARS: usize = 120;
/// Results that get the longer snippet.
/// Fixed (not a setting).
pub const SNIPPET_TOP_RESULTS: usize = 3;

/// Errors of search.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// `limit` outside 1..=max, or offset + limit beyond the ranked window.
    #[error("{what} {value} is out of range ({min}..={max})")]
    OutOfRange {
        /// What was out of range.
        what: &'static str,
        /// The value given.
        value: usize,
        /// The smallest accepted.
        min: usize,
        /// The largest accepted.
        max: usize,
    },
    /// A substring constraint shorter than three characters after folding.
    #[error("{field} substring {value:?} is too short: at least 3 characters")]
    SubstringTooShort {
        /// The constraint.
        field: &'static str,
        /// The value given.
        value: String,
    },
    /// `after` is not before `before`, or `min_size` above `max_size`.
    #[error("empty range: {0}")]
    EmptyRange(&'static str),
    /// A text input longer than the bound.
    #[error("{what} is {len} characters; at most {max}")]
    TooLong {
        /// What.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// A browse order other than `date`, `date-asc` or `size`.
    #[error("unknown sort {0:?}: expected date, date-asc or size")]
    InvalidSort(String),
    /// Search parameters that are not an object of known names and types.
    #[error("invalid search parameters: {0}")]
    InvalidParams(String),
    /// A mailbox role other than the known ones.
    #[error(
        "unknown mailbox role {0:?}: expected inbox, sent, drafts, trash, junk, archive, all_mail or other"
    )]
    InvalidRole(String),
    /// No account has this name.
    #[error("no account named {0:?}")]
    AccountNotFound(String),
    /// No mailbox has this name (in the account, when one is given).
    #[error("no mailbox named {0:?}")]
    MailboxNotFound(String),
    /// An index could not be read.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// A date that is neither `YYYY-MM-DD` nor RFC 3339.
    #[error(transparent)]
    InvalidDate(#[from] crate::time::InvalidDate),
    /// The mirror could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl StewardError for SearchError {
    fn code(&self) -> &'static str {
        match self {
            Self::OutOfRange { .. } => "LIMIT_OUT_OF_RANGE",
            Self::SubstringTooShort { .. } => "SUBSTRING_TOO_SHORT",
            Self::EmptyRange(_) => "EMPTY_RANGE",
            Self::TooLong { .. } => "QUERY_TOO_LONG",
            Self::InvalidSort(_) => "INVALID_SORT",
            Self::InvalidRole(_) => "INVALID_ROLE",
            Self::InvalidParams(_) => "INVALID_SEARCH_PARAMS",
            Self::AccountNotFound(_) => "ACCOUNT_NOT_FOUND",
            Self::MailboxNotFound(_) => "MAILBOX_NOT_FOUND",
            Self::Index(e) => e.code(),
            Self::InvalidDate(e) => e.code(),
            Self::Store(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::OutOfRange { .. }
            | Self::SubstringTooShort { .. }
            | Self::EmptyRange(_)
            | Self::TooLong { .. }
            | Self::InvalidSort(_)
            | Self::InvalidRole(_)
            | Self::InvalidParams(_)
            | Self::InvalidDate(_) => ErrorKind::InvalidInput,
            Self::AccountNotFound(_) | Self::MailboxNotFound(_) => ErrorKind::NotFound,
            Self::Index(e) => e.kind(),
            Self::Store(e) => e.kind(),
        }
    }
}

/// Whether semantic retrieval took part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Semantic {
    /// Query embedded and KNN candidates fused.
    Used,
    /// No embedder is configured.
    Disabled,
    /// An embedder is configured but failed, returned the wrong dimension, or has no vectors
    /// yet; results are lexical and substring only.
    Unavailable,
    /// No free text: a browse, where semantic ranking has no meaning.
    NotApplicable,
}

/// Where a result came from: its 1-based rank in each signal that found it and, for text
/// searches, the fused RRF score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default, schemars::JsonSchema)]
pub struct Provenance {
    /// Rank among BM25 candidates.
    pub lexical: Option<u32>,
    /// Rank among KNN candidates.
    pub vector: Option<u32>,
    /// Rank among the candidates that satisfied every substring constraint (in the order the
    /// search ranked them).
    pub substring: Option<u32>,
    /// The RRF score (text searches only).
    pub fused: Option<f64>,
}

/// A sender as a result shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Sender {
    /// The display name, if any.
    pub name: Option<String>,
    /// The address.
    pub address: String,
}

/// One result: enough to choose what to read, never the whole body.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct MessageSummary {
    /// The mirror's id (read it with `read_message`).
    pub id: i64,
    /// The RFC Message-ID, without angle brackets.
    pub message_id: Option<String>,
    /// The thread (page it with `read_thread`).
    pub thread_id: i64,
    /// The subject.
    pub subject: String,
    /// The sender.
    pub from: Option<Sender>,
    /// The Date header, RFC 3339 in UTC.
    pub date: Option<String>,
    /// The account.
    pub account: String,
    /// The attributed mailbox.
    pub mailbox: String,
    /// A window of the body around the first match (or its start).
    pub snippet: String,
    /// Has attachments.
    pub has_attachments: bool,
    /// Not yet seen.
    pub unread: bool,
    /// Why it is here.
    pub provenance: Provenance,
}

/// Paging information of a [`SearchPage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PageInfo {
    /// The offset asked for.
    pub offset: usize,
    /// The limit asked for.
    pub limit: usize,
    /// The offset of the next page; `None` at the end.
    pub next_offset: Option<usize>,
    /// Ranked candidates that passed the filters and the index checks, before paging (those
    /// beyond this page are not yet confirmed against substring text).
    pub candidates: usize,
}

/// One page of results.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SearchPage {
    /// The results, best first.
    pub messages: Vec<MessageSummary>,
    /// Paging.
    pub page: PageInfo,
    /// Whether semantic retrieval took part.
    pub semantic: Semantic,
}

/// A page rendered for a model: one line per hit and the ids in the same order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CompactPage {
    /// One line per hit, numbered from the page's offset + 1.
    pub lines: Vec<String>,
    /// The ids, in the same order.
    pub ids: Vec<i64>,
    /// The offset of the next page; `None` at the end.
    pub next_offset: Option<usize>,
}

impl SearchPage {
    /// The compact rendering: `N. #id YYYY-MM-DD Sender <addr> | Subject | snippet [flags]`.
    pub fn compact(&self) -> CompactPage {
        let lines = self
            .messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let day = m.date.as_deref().and_then(|d| d.get(..10)).unwrap_or("----------");
                let from = match &m.from {
                    Some(Sender { name: Some(n), address }) if !n.is_empty() => {
                        format!("{n} <{address}>")
                    }
                    Some(a) => a.address.clone(),
                    None => "(no sender)".to_owned(),
                };
                let mut flags = String::new();
                if m.unread {
                    flags.push_str(" [unread]");
                }
                if m.has_attachments {
                    flags.push_str(" [attachment]");
                }
                let subject = if m.subject.is_empty() { "(no subject)" } else { &m.subject };
                format!(
                    "{}. #{} {day} {from} | {subject} | {}{flags}",
                    self.page.offset + i + 1,
                    m.id,
                    m.snippet
                )
            })
            .collect();
        CompactPage {
            lines,
            ids: self.messages.iter().map(|m| m.id).collect(),
            next_offset: self.page.next_offset,
        }
    }
}
