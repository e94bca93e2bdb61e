//! The text index of the mail mirror: BM25 over subject (boosted), body, people (sender and
//! recipient names and addresses) and attachment names, and trigram fields for substring
//! constraints over sender, recipients (to, cc), subject and body (see [`super::fold`]).
//! BM25 One analyzer for documents and queries: split on non-alphanumerics,
//! lowercase, fold diacritics to ASCII (già = gia, perché = perche), no stemming (English and
//! Italian coexist). Query text is never parsed as a query language: it is analyzed into terms
//! and each term becomes a boosted `Should` clause, so quotes, operators, `*`, `:` and
//! parentheses are just characters.

use std::path::{Path, PathBuf};

use std::ops::Bound;

use tantivy::{
    DocAddress, Index, IndexReader, IndexWriter, Order, ReloadPolicy, Searcher, TantivyDocument,
    Term,
    collector::TopDocs,
    indexer::NoMergePolicy,
    query::{BooleanQuery, BoostQuery, Occur, Query, RangeQuery, TermQuery, TermSetQuery},
    schema::{FAST, Field, INDEXED, IndexRecordOption, Schema, TextFieldIndexing, TextOptions},
    tokenizer::{AsciiFoldingFilter, LowerCaser, RemoveLongFilter, SimpleTokenizer, TextAnalyzer},
};

use super::{
    IndexError,
    fold::{TrigramTokenizer, trigrams},
};
use crate::mirror::{IndexFeedError, IndexableMessage, Mirror};

fn feed_error(e: IndexFeedError) -> IndexError {
    match e {
        IndexFeedError::Store(s) => IndexError::Store(s),
        IndexFeedError::Sink(s) => IndexError::Tantivy(s),
    }
}

/// Memory budget of the index writer, in bytes.
/// Fixed (not a setting).
pub const LEXICAL_WRITER_BYTES: usize = 64 * 1024 * 1024;
/// Most distinct query terms used from one query text.
/// Fixed (not a setting).
pub const MAX_QUERY_TERMS: usize = 32;
/// Most hits one lexical query returns.
/// Fixed (not a setting).
pub const MAX_LEXICAL_HITS: usize = 500;
/// Longest token indexed (longer ones are base64 noise or URLs).
/// Fixed (not a setting).
const MAX_TOKEN_CHARS: usize = 40;
const ANALYZER: &str = "steward";
const TRIGRAMS: &str = "steward_trigram";
/// Segments tolerated after a commit before they are merged into one.
/// Fixed (not a setting).
pub(crate) const MAX_SEGMENTS: usize = 4;
/// Most candidates one substring lookup returns.
/// Fixed (not a setting).
pub const MAX_SUBSTRING_CANDIDATES: usize = 500;
/// Fixed (not a setting).
const SUBJECT_BOOST: f32 = 2.0;
/// Fixed (not a setting).
const PEOPLE_BOOST: f32 = 1.5;

/// Clauses of a boolean query.
type Clauses = Vec<(Occur, Box<dyn Query>)>;

/// The order of substring candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CandidateOrder {
    /// Newest first.
    DateDesc,
    /// Oldest first.
    DateAsc,
    /// Largest first.
    SizeDesc,
}

/// A field a substring constraint applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubstringField {
    /// The sender's name and address.
    From,
    /// The `To` names and addresses.
    To,
    /// The `Cc` names and addresses.
    Cc,
    /// The subject.
    Subject,
    /// The body text.
    Body,
}

#[derive(Debug, Clone, Copy)]
struct Fields {
    id: Field,
    date: Field,
    size: Field,
    subject: Field,
    body: Field,
    people: Field,
    attachments: Field,
    sub_from: Field,
    sub_to: Field,
    sub_cc: Field,
    sub_subject: Field,
    sub_body: Field,
}

impl Fields {
    fn substring(&self, f: SubstringField) -> Field {
        match f {
            SubstringField::From => self.sub_from,
            SubstringField::To => self.sub_to,
            SubstringField::Cc => self.sub_cc,
            SubstringField::Subject => self.sub_subject,
            SubstringField::Body => self.sub_body,
        }
    }
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    // Doc sets only: no frequencies, positions or norms (candidates are confirmed on the text).
    let grams = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(TRIGRAMS)
            .set_index_option(IndexRecordOption::Basic)
            .set_fieldnorms(false),
    );
    let fields = Fields {
        id: b.add_u64_field("id", INDEXED | FAST),
        date: b.add_i64_field("date", FAST),
        size: b.add_i64_field("size", FAST),
        subject: b.add_text_field("subject", text.clone()),
        body: b.add_text_field("body", text.clone()),
        people: b.add_text_field("people", text.clone()),
        attachments: b.add_text_field("attachments", text),
        sub_from: b.add_text_field("sub_from", grams.clone()),
        sub_to: b.add_text_field("sub_to", grams.clone()),
        sub_cc: b.add_text_field("sub_cc", grams.clone()),
        sub_subject: b.add_text_field("sub_subject", grams.clone()),
        sub_body: b.add_text_field("sub_body", grams),
    };
    (b.build(), fields)
}

/// Message ids of the documents at `addrs`, in the same order (fast-field reads, no doc store).
fn ids_of(searcher: &Searcher, addrs: &[DocAddress]) -> Result<Vec<i64>, IndexError> {
    let mut columns: Vec<Option<tantivy::columnar::Column<u64>>> =
        vec![None; searcher.segment_readers().len()];
    let mut out = Vec::with_capacity(addrs.len());
    for a in addrs {
        let slot = usize::try_from(a.segment_ord).unwrap_or(usize::MAX);
        let Some(col) = columns.get_mut(slot) else { continue };
        if col.is_none() {
            *col = Some(searcher.segment_reader(a.segment_ord).fast_fields().u64("id")?);
        }
        if let Some(id) = col.as_ref().and_then(|c| c.first(a.doc_id)) {
            out.push(i64::try_from(id).unwrap_or(i64::MAX));
        }
    }
    Ok(out)
}

/// The BM25 analyzer (documents and queries alike).
pub(crate) fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(MAX_TOKEN_CHARS))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .build()
}

/// The analyzed, de-duplicated terms of a text (at most `MAX_QUERY_TERMS`).
pub(crate) fn query_terms(text: &str) -> Vec<String> {
    let mut a = analyzer();
    let mut stream = a.token_stream(text);
    let mut out: Vec<String> = Vec::new();
    while stream.advance() {
        let t = stream.token().text.clone();
        if !out.contains(&t) {
            out.push(t);
        }
        if out.len() >= MAX_QUERY_TERMS {
            break;
        }
    }
    out
}

/// A lexical hit: the mirror's message id and its BM25 score (comparable only within one query).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LexicalHit {
    /// The message id.
    pub id: i64,
    /// The BM25 score.
    pub score: f32,
}

/// The tantivy index of one Steward home.
pub struct LexicalIndex {
    dir: PathBuf,
    index: Index,
    reader: IndexReader,
    fields: Fields,
    /// The watermark the reader's searcher reflects (a reload happens only when it moved).
    loaded: std::sync::Mutex<Option<i64>>,
}

impl std::fmt::Debug for LexicalIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LexicalIndex").field("dir", &self.dir).finish_non_exhaustive()
    }
}

impl LexicalIndex {
    /// Opens the index in `dir`, creating an empty one if there is none (or if the one there
    /// has another schema: the index is derived, so it is replaced, never "repaired").
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn open(dir: &Path) -> Result<Self, IndexError> {
        let (schema, fields) = schema();
        std::fs::create_dir_all(dir)
            .map_err(|e| IndexError::Tantivy(format!("{}: {e}", dir.display())))?;
        let index = match Index::open_in_dir(dir) {
            Ok(i) if i.schema() == schema => i,
            _ => {
                std::fs::remove_dir_all(dir).map_err(|e| IndexError::Tantivy(e.to_string()))?;
                std::fs::create_dir_all(dir).map_err(|e| IndexError::Tantivy(e.to_string()))?;
                Index::create_in_dir(dir, schema)?
            }
        };
        index.tokenizers().register(ANALYZER, analyzer());
        index.tokenizers().register(TRIGRAMS, TrigramTokenizer::default());
        let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
        let loaded = index.load_metas()?.payload.and_then(|p| p.parse().ok());
        Ok(Self {
            dir: dir.to_path_buf(),
            index,
            reader,
            fields,
            loaded: std::sync::Mutex::new(loaded),
        })
    }

    /// The watermark of the index in `dir` read from its metadata file, without opening (or
    /// creating, or rebuilding) it: `None` when there is no index, `Some(None)` when it records
    /// no watermark. For status screens.
    pub fn stored_watermark(dir: &Path) -> Option<Option<i64>> {
        let meta = std::fs::read_to_string(dir.join("meta.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&meta).ok()?;
        Some(v["payload"].as_str().and_then(|p| p.parse().ok()))
    }

    /// The last mirror sync run this index reflects (its watermark), if it records one.
    pub fn watermark(&self) -> Result<Option<i64>, IndexError> {
        Ok(self.index.load_metas()?.payload.and_then(|p| p.parse().ok()))
    }

    fn document(&self, doc: &IndexableMessage<'_>) -> TantivyDocument {
        let f = self.fields;
        let mut d = TantivyDocument::default();
        d.add_u64(f.id, u64::try_from(doc.id).unwrap_or(0));
        d.add_i64(f.date, doc.date);
        d.add_i64(f.size, doc.size);
        d.add_text(f.subject, doc.subject);
        d.add_text(f.body, doc.body);
        d.add_text(f.people, doc.people);
        d.add_text(f.attachments, doc.attachments);
        d.add_text(f.sub_from, doc.from);
        d.add_text(f.sub_to, doc.to);
        d.add_text(f.sub_cc, doc.cc);
        d.add_text(f.sub_subject, doc.subject);
        d.add_text(f.sub_body, doc.body);
        d
    }

    fn commit(&self, mut writer: IndexWriter, watermark: i64) -> Result<(), IndexError> {
        let mut prepared = writer.prepare_commit()?;
        prepared.set_payload(&watermark.to_string());
        prepared.commit()?;
        // Few segments: every search opens and maps each segment's files, and a short-lived
        // `steward search` process pays for that first. After tantivy's own merges settle,
        // more than MAX_SEGMENTS are merged into one (a bulk build leaves several).
        writer.wait_merging_threads()?;
        let segments = self.index.searchable_segment_ids()?;
        if segments.len() > MAX_SEGMENTS {
            let mut merger: IndexWriter = self.index.writer(LEXICAL_WRITER_BYTES)?;
            merger.set_merge_policy(Box::new(NoMergePolicy));
            merger.merge(&segments).wait()?;
            merger.wait_merging_threads()?;
        }
        self.reader.reload()?;
        *self.loaded.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(watermark);
        Ok(())
    }

    /// Replaces or drops every message the mirror wrote since `since` (Unix seconds) and records
    /// `run_id` as the watermark. Returns how many messages were touched.
    pub fn apply_since(&self, mirror: &Mirror, since: i64, run_id: i64) -> Result<u64, IndexError> {
        let writer: IndexWriter = self.index.writer(LEXICAL_WRITER_BYTES)?;
        let id_field = self.fields.id;
        let n = mirror
            .for_each_changed_since(since, &mut |id, doc| {
                writer.delete_term(Term::from_field_u64(id_field, u64::try_from(id).unwrap_or(0)));
                if let Some(doc) = doc {
                    writer
                        .add_document(self.document(&doc))
                        .map(|_| ())
                        .map_err(|e| e.to_string())?;
                }
                Ok(())
            })
            .map_err(feed_error)?;
        self.commit(writer, run_id)?;
        Ok(n)
    }

    /// Makes commits by other handles or processes visible to searches.
    /// `watermark` is what the index on disk records now; nothing is reloaded when the reader
    /// already reflects it (the common case: a search pays no reload).
    pub fn refresh(&self, watermark: Option<i64>) -> Result<(), IndexError> {
        let mut loaded = self.loaded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if *loaded != watermark {
            self.reader.reload()?;
            *loaded = watermark;
        }
        Ok(())
    }

    /// Records `run_id` as the watermark without other changes (a run that changed nothing).
    pub fn set_watermark(&self, run_id: i64) -> Result<(), IndexError> {
        let writer: IndexWriter = self.index.writer(LEXICAL_WRITER_BYTES)?;
        self.commit(writer, run_id)
    }

    /// Drops every document and indexes every live message of `mirror`; the watermark becomes
    /// the mirror's last finished run. Returns how many messages were indexed.
    pub fn rebuild(&self, mirror: &Mirror) -> Result<u64, IndexError> {
        // Read before the snapshot: a run finishing meanwhile makes the watermark older than
        // the content, which only causes one more rebuild, never a stale index.
        let watermark = mirror.last_finished_run()?;
        let writer: IndexWriter = self.index.writer(LEXICAL_WRITER_BYTES)?;
        writer.delete_all_documents()?;
        let mut count = 0u64;
        mirror
            .for_each_indexable(&mut |doc| {
                writer.add_document(self.document(&doc)).map(|_| ()).map_err(|e| e.to_string())?;
                count += 1;
                Ok(())
            })
            .map_err(feed_error)?;
        self.commit(writer, watermark)?;
        Ok(count)
    }

    /// BM25 search: the text is analyzed into terms (never parsed as query syntax); each term
    /// may match subject (boosted), people (boosted), body or attachment names.
    pub fn search(&self, text: &str, limit: usize) -> Result<Vec<LexicalHit>, IndexError> {
        if limit == 0 || limit > MAX_LEXICAL_HITS {
            return Err(IndexError::OutOfRange {
                what: "lexical limit",
                value: limit,
                max: MAX_LEXICAL_HITS,
            });
        }
        let terms = query_terms(text);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let f = self.fields;
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for t in &terms {
            for (field, boost) in [
                (f.subject, SUBJECT_BOOST),
                (f.people, PEOPLE_BOOST),
                (f.body, 1.0),
                (f.attachments, 1.0),
            ] {
                let q =
                    TermQuery::new(Term::from_field_text(field, t), IndexRecordOption::WithFreqs);
                clauses.push((Occur::Should, Box::new(BoostQuery::new(Box::new(q), boost))));
            }
        }
        let query = BooleanQuery::new(clauses);
        let searcher = self.reader.searcher();
        let top = searcher.search(&query, &TopDocs::with_limit(limit).order_by_score())?;
        let addrs: Vec<DocAddress> = top.iter().map(|(_, a)| *a).collect();
        let ids = ids_of(&searcher, &addrs)?;
        Ok(ids.into_iter().zip(top).map(|(id, (score, _))| LexicalHit { id, score }).collect())
    }

    /// The query "every trigram of `folded` occurs in `field`", or `None` when some trigram
    /// occurs nowhere (nothing can match) or the needle is too short to have trigrams.
    fn trigram_query(
        &self,
        searcher: &Searcher,
        field: SubstringField,
        folded: &str,
    ) -> Result<Option<Clauses>, IndexError> {
        let field = self.fields.substring(field);
        let grams = trigrams(folded);
        if grams.is_empty() {
            return Ok(None);
        }
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::with_capacity(grams.len());
        for g in &grams {
            let term = Term::from_field_text(field, g);
            if searcher.doc_freq(&term)? == 0 {
                return Ok(None);
            }
            clauses.push((Occur::Must, Box::new(TermQuery::new(term, IndexRecordOption::Basic))));
        }
        Ok(Some(clauses))
    }

    /// Candidates for "`field` contains `folded`" (a folded needle, see [`super::fold`]),
    /// dated within `[after, before)` when given, in `order`, at most `limit`. Candidates hold
    /// every trigram of the needle; the caller confirms them on the text.
    pub fn substring_candidates(
        &self,
        field: SubstringField,
        folded: &str,
        (after, before): (Option<i64>, Option<i64>),
        order: CandidateOrder,
        limit: usize,
    ) -> Result<Vec<i64>, IndexError> {
        if limit == 0 || limit > MAX_SUBSTRING_CANDIDATES {
            return Err(IndexError::OutOfRange {
                what: "substring candidates",
                value: limit,
                max: MAX_SUBSTRING_CANDIDATES,
            });
        }
        let searcher = self.reader.searcher();
        let Some(mut clauses) = self.trigram_query(&searcher, field, folded)? else {
            return Ok(Vec::new());
        };
        if after.is_some() || before.is_some() {
            let bound = |b: Option<i64>, f: fn(Term) -> Bound<Term>| match b {
                Some(v) => f(Term::from_field_i64(self.fields.date, v)),
                None => Bound::Unbounded,
            };
            let range =
                RangeQuery::new(bound(after, Bound::Included), bound(before, Bound::Excluded));
            clauses.push((Occur::Must, Box::new(range)));
        }
        let query = BooleanQuery::new(clauses);
        let (key, direction) = match order {
            CandidateOrder::DateDesc => ("date", Order::Desc),
            CandidateOrder::DateAsc => ("date", Order::Asc),
            CandidateOrder::SizeDesc => ("size", Order::Desc),
        };
        let top = searcher.search(
            &query,
            &TopDocs::with_limit(limit).order_by_fast_field::<i64>(key, direction),
        )?;
        let addrs: Vec<DocAddress> = top.iter().map(|(_, a)| *a).collect();
        ids_of(&searcher, &addrs)
    }

    /// Which of `ids` are candidates for "`field` contains `folded`" (every trigram present).
    pub fn substring_among(
        &self,
        field: SubstringField,
        folded: &str,
        ids: &[i64],
    ) -> Result<Vec<i64>, IndexError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        if ids.len() > MAX_SUBSTRING_CANDIDATES {
            return Err(IndexError::OutOfRange {
                what: "substring candidates",
                value: ids.len(),
                max: MAX_SUBSTRING_CANDIDATES,
            });
        }
        let searcher = self.reader.searcher();
        let Some(mut clauses) = self.trigram_query(&searcher, field, folded)? else {
            return Ok(Vec::new());
        };
        let terms = ids
            .iter()
            .map(|id| Term::from_field_u64(self.fields.id, u64::try_from(*id).unwrap_or(0)));
        clauses.push((Occur::Must, Box::new(TermSetQuery::new(terms))));
        let query = BooleanQuery::new(clauses);
        let top = searcher.search(&query, &TopDocs::with_limit(ids.len()).order_by_score())?;
        let addrs: Vec<DocAddress> = top.iter().map(|(_, a)| *a).collect();
        ids_of(&searcher, &addrs)
    }

    /// Documents in the index.
    pub fn len(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// True when the index holds no document.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::query_terms;

    #[test]
    fn terms_fold_case_and_diacritics_and_ignore_syntax() {
        assert_eq!(query_terms("Già PERCHÉ"), vec!["gia", "perche"]);
        assert_eq!(
            query_terms("\"from:marco\" AND (invoice*) -x"),
            vec!["from", "marco", "and", "invoice", "x"]
        );
        assert!(query_terms("  ***  ").is_empty());
        assert_eq!(query_terms(&"a ".repeat(100)), vec!["a"]);
        let many: String = (0..100).map(|i| format!("w{i} ")).collect();
        assert_eq!(query_terms(&many).len(), super::MAX_QUERY_TERMS);
    }
}
