//! Memory for the launcher: the review inbox and a person's decisions on it, search over the
//! accepted notes, and forget with its receipt. Times are Unix seconds.

use steward_core::memory::{
    ForgetReceipt, ForgetSelector, MemoryEdit, MemoryHit, MemoryKind, MemoryQuery, MemorySource,
    Note, Proposal, RejectReason, ReviewDecision, Sensitivity,
};

use crate::{authority::Human, error::FfiError, steward::Steward};

fn ffi(e: &(impl steward_core::StewardError + ?Sized)) -> FfiError {
    FfiError::from_core(e)
}

fn bad(code: &str, message: String) -> FfiError {
    FfiError::Steward { kind: "invalid_input".to_owned(), code: code.to_owned(), message }
}

fn secs(t: chrono::DateTime<chrono::Utc>) -> i64 {
    t.timestamp()
}

/// Where a note's fact came from.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MemorySourceRef {
    /// `mail`, `chat`, `document`, `person` or `import`.
    pub kind: String,
    /// The Message-ID, the chat, the document's fingerprint or the imported file (absent for
    /// the person).
    pub reference: Option<String>,
    /// The words of the mail that say it.
    pub quote: Option<String>,
    /// The document's page.
    pub page: Option<u32>,
}

impl From<&MemorySource> for MemorySourceRef {
    fn from(s: &MemorySource) -> Self {
        let (kind, reference, quote, page) = match s {
            MemorySource::Mail { message_id, quote } => {
                ("mail", Some(message_id.clone()), quote.clone(), None)
            }
            MemorySource::Chat { chat } => ("chat", Some(chat.clone()), None, None),
            MemorySource::Document { fingerprint, page } => {
                ("document", Some(fingerprint.clone()), None, *page)
            }
            MemorySource::Person => ("person", None, None, None),
            MemorySource::Import { path } => ("import", Some(path.clone()), None, None),
        };
        Self { kind: kind.to_owned(), reference, quote, page }
    }
}

/// A note of memory, accepted or proposed, with its provenance.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MemoryNote {
    /// Its id.
    pub id: String,
    /// `fact`, `preference`, `person`, `commitment`, `project` or `place`.
    pub kind: String,
    /// Whom or what it is about (`person:anna@example.org`).
    pub subject: Option<String>,
    /// The fact.
    pub text: String,
    /// Since when it is true in the world.
    pub valid_from: Option<i64>,
    /// Until when it is true in the world.
    pub valid_to: Option<i64>,
    /// When Steward learned it.
    pub created: i64,
    /// When a newer note replaced it.
    pub superseded_at: Option<i64>,
    /// The note that replaced it.
    pub superseded_by: Option<String>,
    /// From when the note that replaced it holds (until then this one still answers).
    pub replaced_from: Option<i64>,
    /// How sure the proposer was, 0 to 1.
    pub confidence: Option<f32>,
    /// Where it came from.
    pub sources: Vec<MemorySourceRef>,
    /// Who proposed it.
    pub proposed_by: String,
    /// Who admitted it (absent on a proposal).
    pub reviewed_by: Option<String>,
    /// When.
    pub reviewed_at: Option<i64>,
    /// `accepted`, `edited`, `approved` or `written`.
    pub review_decision: Option<String>,
    /// The notes it replaces.
    pub supersedes: Vec<String>,
    /// `low`, `normal`, `high` or `critical`.
    pub sensitivity: String,
}

fn decision(d: ReviewDecision) -> String {
    match d {
        ReviewDecision::Accepted => "accepted",
        ReviewDecision::Edited => "edited",
        ReviewDecision::Approved => "approved",
        ReviewDecision::Written => "written",
    }
    .to_owned()
}

fn sensitivity(s: Sensitivity) -> String {
    match s {
        Sensitivity::Low => "low",
        Sensitivity::Normal => "normal",
        Sensitivity::High => "high",
        Sensitivity::Critical => "critical",
    }
    .to_owned()
}

impl From<Note> for MemoryNote {
    fn from(n: Note) -> Self {
        let m = n.meta;
        Self {
            id: m.id,
            kind: m.kind.as_str().to_owned(),
            subject: m.subject,
            text: n.body,
            valid_from: m.valid_from.map(secs),
            valid_to: m.valid_to.map(secs),
            created: secs(m.created),
            superseded_at: m.superseded_at.map(secs),
            superseded_by: m.superseded_by,
            replaced_from: m.replaced_from.map(secs),
            confidence: m.confidence,
            sources: m.sources.iter().map(Into::into).collect(),
            proposed_by: m.proposed_by,
            reviewed_by: m.review.as_ref().map(|r| r.by.clone()),
            reviewed_at: m.review.as_ref().map(|r| secs(r.at)),
            review_decision: m.review.as_ref().map(|r| decision(r.decision)),
            supersedes: m.supersedes,
            sensitivity: sensitivity(m.sensitivity),
        }
    }
}

/// A proposal waiting for review, with the accepted notes it may replace.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MemoryProposal {
    /// The proposed note.
    pub note: MemoryNote,
    /// Current notes of its subject and those it names as superseded.
    pub related: Vec<MemoryNote>,
    /// When it expires unreviewed.
    pub expires: i64,
}

impl From<Proposal> for MemoryProposal {
    fn from(p: Proposal) -> Self {
        Self {
            note: p.note.into(),
            related: p.related.into_iter().map(Into::into).collect(),
            expires: secs(p.expires),
        }
    }
}

/// A note found.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct MemoryFound {
    /// The note.
    pub note: MemoryNote,
    /// Its file under `memory/notes/`.
    pub file: String,
    /// Its rank among the word matches (1 is best).
    pub lexical_rank: Option<u32>,
    /// Its rank among the nearest notes by meaning.
    pub vector_rank: Option<u32>,
}

fn rank(r: Option<usize>) -> Option<u32> {
    r.map(|r| u32::try_from(r).unwrap_or(u32::MAX))
}

impl From<MemoryHit> for MemoryFound {
    fn from(h: MemoryHit) -> Self {
        Self {
            note: h.note.into(),
            file: h.file,
            lexical_rank: rank(h.lexical_rank),
            vector_rank: rank(h.vector_rank),
        }
    }
}

/// One note or proposal a forget removed.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct MemoryForgotten {
    /// Its id.
    pub id: String,
    /// The file removed.
    pub path: String,
    /// The hash its tombstone keeps.
    pub content_hash: String,
}

/// Something a forget left, and why.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct MemoryKept {
    /// What.
    pub what: String,
    /// Why.
    pub why: String,
}

/// What a forget removed and kept.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct MemoryForgetReceipt {
    /// Nothing was removed: what a forget would do.
    pub dry_run: bool,
    /// Who asked.
    pub by: String,
    /// When.
    pub at: i64,
    /// The notes removed.
    pub notes: Vec<MemoryForgotten>,
    /// The proposals removed.
    pub proposals: Vec<MemoryForgotten>,
    /// Index rows removed.
    pub index_entries: u64,
    /// Vectors removed.
    pub vectors: u64,
    /// Tombstones written.
    pub tombstones: u64,
    /// What stays, and why.
    pub kept: Vec<MemoryKept>,
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

impl From<ForgetReceipt> for MemoryForgetReceipt {
    fn from(r: ForgetReceipt) -> Self {
        let item = |i: steward_core::memory::ForgottenItem| MemoryForgotten {
            id: i.id,
            path: i.path.display().to_string(),
            content_hash: i.content_hash,
        };
        Self {
            dry_run: r.dry_run,
            by: r.by,
            at: secs(r.at),
            notes: r.notes.into_iter().map(item).collect(),
            proposals: r.proposals.into_iter().map(item).collect(),
            index_entries: count(r.index_entries),
            vectors: count(r.vectors),
            tombstones: count(r.tombstones),
            kept: r.kept.into_iter().map(|k| MemoryKept { what: k.what, why: k.why }).collect(),
        }
    }
}

#[uniffi::export]
impl Steward {
    /// The proposals waiting for review, oldest first.
    pub fn memory_inbox(&self) -> Result<Vec<MemoryProposal>, FfiError> {
        Ok(self.inner().memory_inbox().map_err(|e| ffi(&e))?.into_iter().map(Into::into).collect())
    }

    /// One accepted note (`MEMORY_NOT_FOUND` for a proposal or nothing).
    pub fn memory_note(&self, id: String) -> Result<MemoryFound, FfiError> {
        Ok(self.inner().memory_note(&id).map_err(|e| ffi(&e))?.into())
    }

    /// Accepted notes matching `text`, filtered by `kinds` (empty: all), `subject` and `as_of`
    /// (Unix seconds: what was true and known then); at most `limit` (1 to 20).
    pub fn memory_search(
        &self,
        text: String,
        kinds: Vec<String>,
        subject: Option<String>,
        as_of: Option<i64>,
        limit: u32,
    ) -> Result<Vec<MemoryFound>, FfiError> {
        let kinds = kinds
            .iter()
            .map(|k| {
                MemoryKind::parse(k)
                    .ok_or_else(|| bad("MEMORY_BAD_QUERY", format!("unknown kind {k:?}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let as_of = match as_of {
            Some(t) => Some(
                chrono::DateTime::from_timestamp(t, 0)
                    .ok_or_else(|| bad("MEMORY_BAD_QUERY", format!("as_of {t} is out of range")))?,
            ),
            None => None,
        };
        let q = MemoryQuery {
            text,
            kinds,
            subject,
            as_of,
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
        };
        Ok(self
            .inner()
            .memory_search(&q)
            .map_err(|e| ffi(&e))?
            .into_iter()
            .map(Into::into)
            .collect())
    }
}

#[uniffi::export]
impl Human {
    /// Accepts proposal `id`; with `text`, as the person rewrote it. Returns the note.
    pub fn accept_memory(&self, id: String, text: Option<String>) -> Result<MemoryNote, FfiError> {
        let edit = text.map(|t| MemoryEdit { text: Some(t), ..MemoryEdit::default() });
        let (steward, who) = self.parts();
        Ok(steward.memory_accept(who, &id, edit.as_ref()).map_err(|e| ffi(&e))?.into())
    }

    /// Rejects proposal `id` (`reason`: `wrong`, `outdated`, `private` or `trivial`): the same
    /// fact is never proposed again.
    pub fn reject_memory(&self, id: String, reason: Option<String>) -> Result<(), FfiError> {
        let reason = match reason {
            Some(r) => Some(RejectReason::parse(&r).ok_or_else(|| {
                bad("MEMORY_BAD_NOTE", format!("reason {r:?}: wrong, outdated, private or trivial"))
            })?),
            None => None,
        };
        let (steward, who) = self.parts();
        steward.memory_reject(who, &id, reason).map_err(|e| ffi(&e))?;
        Ok(())
    }

    /// Forgets by `by` (`id`, `subject` or `query`) `value`; with `dry_run`, removes nothing.
    /// Returns the receipt.
    pub fn forget_memory(
        &self,
        by: String,
        value: String,
        dry_run: bool,
    ) -> Result<MemoryForgetReceipt, FfiError> {
        let selector = match by.as_str() {
            "id" => ForgetSelector::Id(value),
            "subject" => ForgetSelector::Subject(value),
            "query" => ForgetSelector::Query(value),
            other => {
                return Err(bad(
                    "MEMORY_BAD_QUERY",
                    format!("forget by {other:?}: id, subject or query"),
                ));
            }
        };
        let (steward, who) = self.parts();
        Ok(steward.memory_forget(who, &selector, dry_run).map_err(|e| ffi(&e))?.into())
    }
}
