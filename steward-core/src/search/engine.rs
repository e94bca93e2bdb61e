//! The retrieval algorithm (see the module documentation of [`super`]).

use std::{
    collections::{HashMap, HashSet},
    rc::Rc,
};

use rusqlite::{Connection, OptionalExtension, types::Value};

use super::{
    MailboxScope, MessageSummary, PageInfo, Provenance, SNIPPET_CHARS, SNIPPET_TOP_CHARS,
    SNIPPET_TOP_RESULTS, SearchError, SearchPage, SearchRequest, Semantic, Sender, Sort,
    request::Substring, snippet::snippet,
};
use crate::{
    index::{
        CandidateOrder, Embedder, LexicalIndex, SubstringField, VectorStore, calibration,
        fold::fold_into, query_terms,
    },
    mirror::{Mirror, read::rfc3339},
    store::StoreError,
};

/// BM25 candidates fused when no structured filter applies.
/// Fixed (not a setting).
pub const LEXICAL_CANDIDATES: usize = 50;
/// KNN candidates fused when no structured filter applies.
/// Fixed (not a setting).
pub const VECTOR_CANDIDATES: usize = 50;
/// Candidates fetched from an index when structured filters will discard some; the first
/// [`LEXICAL_CANDIDATES`] (or [`VECTOR_CANDIDATES`]) that pass are fused.
/// Fixed (not a setting).
pub const FILTERED_CANDIDATES: usize = 500;
/// The Reciprocal Rank Fusion constant: score = Σ 1 / (k + rank).
/// Fixed (not a setting).
pub const RRF_K: f64 = 60.0;
/// Most messages a browse orders before filtering and paging (also the deepest page).
/// Fixed (not a setting).
pub const BROWSE_WINDOW: usize = 500;

/// What a search reads.
pub(crate) struct Sources<'a> {
    pub(crate) mirror: &'a Mirror,
    pub(crate) lexical: &'a LexicalIndex,
    pub(crate) vectors: Option<&'a VectorStore>,
    pub(crate) embedder: Option<&'a dyn Embedder>,
}

fn q(ctx: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::query(ctx, e)
}

/// The structured filters as SQL over `messages m`.
struct Filters {
    sql: String,
    params: Vec<Value>,
    any: bool,
}

fn like_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('%');
    for c in s.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

fn resolve_filters(c: &Connection, r: &SearchRequest) -> Result<Filters, SearchError> {
    let mut sql = String::from(" m.deleted_at IS NULL");
    let mut params: Vec<Value> = Vec::new();
    let mut any = false;
    let mut push = |clause: &str, values: Vec<Value>, params: &mut Vec<Value>| {
        sql.push_str(" AND ");
        sql.push_str(&clause.replace('?', &format!("?{}", params.len() + 1)));
        params.extend(values);
        any = true;
    };
    let account = match &r.account {
        Some(name) => Some(
            c.prepare_cached("SELECT id FROM accounts WHERE name = ?1")
                .and_then(|mut s| s.query_row([name], |row| row.get::<_, i64>(0)).optional())
                .map_err(q("resolve account"))?
                .ok_or_else(|| SearchError::AccountNotFound(name.clone()))?,
        ),
        None => None,
    };
    if let Some(a) = account {
        push("m.account_id = ?", vec![Value::Integer(a)], &mut params);
    }
    let mailboxes: Option<Vec<i64>> = match &r.mailbox {
        MailboxScope::Any => None,
        MailboxScope::Name(name) => {
            let ids = mailbox_ids(c, "name = ?1", name, account)?;
            if ids.is_empty() {
                return Err(SearchError::MailboxNotFound(name.clone()));
            }
            Some(ids)
        }
        MailboxScope::Role(role) => Some(mailbox_ids(c, "role = ?1", role.as_str(), account)?),
    };
    if let Some(ids) = mailboxes {
        let list = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        push(
            &format!(
                "(m.mailbox_id IN ({list}) OR EXISTS (SELECT 1 FROM message_paths p
                  WHERE p.message_id = m.id AND p.mailbox_id IN ({list})))"
            ),
            vec![],
            &mut params,
        );
    }
    if let Some(a) = r.after {
        push("m.date >= ?", vec![Value::Integer(a)], &mut params);
    }
    if let Some(b) = r.before {
        push("m.date < ?", vec![Value::Integer(b)], &mut params);
    }
    for (flag, bit) in [(r.unread, 1), (r.answered, 2), (r.flagged, 4)] {
        // `unread` is the absence of the seen bit.
        let set = if bit == 1 { flag.map(|u| !u) } else { flag };
        match set {
            Some(true) => push(&format!("m.flags & {bit} != 0"), vec![], &mut params),
            Some(false) => push(&format!("m.flags & {bit} = 0"), vec![], &mut params),
            None => {}
        }
    }
    match r.has_attachments {
        Some(true) => push("m.attachment_count > 0", vec![], &mut params),
        Some(false) => push("m.attachment_count = 0", vec![], &mut params),
        None => {}
    }
    for (column, value) in [("name", &r.attachment_name), ("mime_type", &r.attachment_type)] {
        if let Some(v) = value {
            push(
                &format!(
                    "EXISTS (SELECT 1 FROM attachments t WHERE t.message_id = m.id
                      AND lower(t.{column}) LIKE ? ESCAPE '\\')"
                ),
                vec![Value::Text(like_escape(v))],
                &mut params,
            );
        }
    }
    if let Some(s) = r.min_size {
        push(
            "m.size >= ?",
            vec![Value::Integer(i64::try_from(s).unwrap_or(i64::MAX))],
            &mut params,
        );
    }
    if let Some(s) = r.max_size {
        push(
            "m.size <= ?",
            vec![Value::Integer(i64::try_from(s).unwrap_or(i64::MAX))],
            &mut params,
        );
    }
    Ok(Filters { sql, params, any })
}

fn mailbox_ids(
    c: &Connection,
    clause: &str,
    value: &str,
    account: Option<i64>,
) -> Result<Vec<i64>, SearchError> {
    let sql = format!(
        "SELECT id FROM mailboxes WHERE {clause} AND (?2 IS NULL OR account_id = ?2) ORDER BY id"
    );
    c.prepare_cached(&sql)
        .and_then(|mut s| s.query_map(rusqlite::params![value, account], |r| r.get(0))?.collect())
        .map_err(|e| SearchError::Store(StoreError::query("resolve mailbox", e)))
}

/// Of `ids`, those live and passing the filters.
fn passing(c: &Connection, f: &Filters, ids: &[i64]) -> Result<HashSet<i64>, SearchError> {
    if ids.is_empty() {
        return Ok(HashSet::new());
    }
    let list: Rc<Vec<Value>> = Rc::new(ids.iter().map(|i| Value::Integer(*i)).collect());
    let n = f.params.len() + 1;
    let sql = format!("SELECT m.id FROM messages m WHERE m.id IN rarray(?{n}) AND {}", f.sql);
    let mut params: Vec<&dyn rusqlite::ToSql> =
        f.params.iter().map(|v| v as &dyn rusqlite::ToSql).collect();
    params.push(&list);
    let mut s = c.prepare_cached(&sql).map_err(q("filter candidates"))?;
    let rows = s
        .query_map(params.as_slice(), |r| r.get(0))
        .and_then(Iterator::collect::<Result<HashSet<i64>, _>>)
        .map_err(q("filter candidates"))?;
    Ok(rows)
}

/// Confirms "`field` of message `id` contains `folded`" on the stored text.
struct Confirmer {
    buf: String,
}

impl Confirmer {
    fn contains(
        &mut self,
        c: &Connection,
        id: i64,
        field: SubstringField,
        folded: &str,
    ) -> Result<bool, SearchError> {
        let sql = match field {
            SubstringField::From => {
                "SELECT coalesce(from_name, '') || ' ' || coalesce(from_addr, '')
                 FROM messages WHERE id = ?1"
            }
            SubstringField::To => {
                "SELECT group_concat(coalesce(name, '') || ' ' || address, ' ')
                 FROM message_addresses WHERE message_id = ?1 AND field = 'to'"
            }
            SubstringField::Cc => {
                "SELECT group_concat(coalesce(name, '') || ' ' || address, ' ')
                 FROM message_addresses WHERE message_id = ?1 AND field = 'cc'"
            }
            SubstringField::Subject => "SELECT subject FROM messages WHERE id = ?1",
            SubstringField::Body => "SELECT body_text FROM message_bodies WHERE message_id = ?1",
        };
        let mut s = c.prepare_cached(sql).map_err(q("substring text"))?;
        let mut rows = s.query([id]).map_err(q("substring text"))?;
        let Some(row) = rows.next().map_err(q("substring text"))? else { return Ok(false) };
        let text = match row.get_ref(0).map_err(q("substring text"))? {
            rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t),
            _ => return Ok(false),
        };
        fold_into(&text, &mut self.buf);
        Ok(self.buf.contains(folded))
    }
}

/// A ranked candidate before materialization.
#[derive(Debug, Clone, Copy)]
struct Ranked {
    id: i64,
    provenance: Provenance,
}

/// Runs `request`; `max_limit` is the caller's page cap (API or model).
pub(crate) fn search(
    src: &Sources<'_>,
    request: &SearchRequest,
    max_limit: usize,
) -> Result<SearchPage, SearchError> {
    let substrings = request.validate(max_limit)?;
    src.mirror.db().read(|c| {
        let filters = resolve_filters(c, request)?;
        let (ranked, semantic, terms) = match request.query_text() {
            Some(text) => {
                let (ranked, semantic) = ranked_by_text(src, c, &filters, text, &substrings)?;
                (ranked, semantic, query_terms(text))
            }
            None => {
                (browse(src, c, &filters, request, &substrings)?, Semantic::NotApplicable, vec![])
            }
        };
        page(c, request, ranked, &substrings, semantic, &terms)
    })
}

/// The first `want` of `ids` passing the filters, in order. Runs without filters too: soft-
/// deleted messages are out of the text index, but the vector store may lag.
fn filtered_in_order(
    c: &Connection,
    f: &Filters,
    ids: Vec<i64>,
    want: usize,
) -> Result<Vec<i64>, SearchError> {
    let ok = passing(c, f, &ids)?;
    Ok(ids.into_iter().filter(|i| ok.contains(i)).take(want).collect())
}

fn ranked_by_text(
    src: &Sources<'_>,
    c: &Connection,
    filters: &Filters,
    text: &str,
    substrings: &[Substring],
) -> Result<(Vec<Ranked>, Semantic), SearchError> {
    let fetch = |n: usize| if filters.any { FILTERED_CANDIDATES } else { n };
    let lexical: Vec<i64> =
        src.lexical.search(text, fetch(LEXICAL_CANDIDATES))?.into_iter().map(|h| h.id).collect();
    let lexical = filtered_in_order(c, filters, lexical, LEXICAL_CANDIDATES)?;
    let (vector, semantic) = match src.embedder {
        None => (Vec::new(), Semantic::Disabled),
        Some(e) => match semantic_candidates(src, c, filters, e, text, fetch(VECTOR_CANDIDATES))? {
            Some(ids) => (ids, Semantic::Used),
            None => (Vec::new(), Semantic::Unavailable),
        },
    };
    // Reciprocal Rank Fusion over ranks, never over raw scores.
    let mut fused: HashMap<i64, Provenance> = HashMap::new();
    let rank = |i: usize| u32::try_from(i + 1).unwrap_or(u32::MAX);
    for (i, id) in lexical.iter().enumerate() {
        fused.entry(*id).or_default().lexical = Some(rank(i));
    }
    for (i, id) in vector.iter().enumerate() {
        fused.entry(*id).or_default().vector = Some(rank(i));
    }
    let mut ranked: Vec<Ranked> = fused
        .into_iter()
        .map(|(id, mut p)| {
            let score = [p.lexical, p.vector]
                .into_iter()
                .flatten()
                .map(|r| 1.0 / (RRF_K + f64::from(r)))
                .sum::<f64>();
            p.fused = Some(score);
            Ranked { id, provenance: p }
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.provenance
            .fused
            .unwrap_or(0.0)
            .total_cmp(&a.provenance.fused.unwrap_or(0.0))
            .then(
                a.provenance
                    .lexical
                    .unwrap_or(u32::MAX)
                    .cmp(&b.provenance.lexical.unwrap_or(u32::MAX)),
            )
            .then(a.id.cmp(&b.id))
    });
    // Substring constraints: keep fused results holding every trigram of every needle (the
    // text is confirmed when the page is cut).
    for s in substrings {
        let ids: Vec<i64> = ranked.iter().map(|r| r.id).collect();
        let ok: HashSet<i64> =
            src.lexical.substring_among(s.field, &s.folded, &ids)?.into_iter().collect();
        ranked.retain(|r| ok.contains(&r.id));
    }
    Ok((ranked, semantic))
}

/// The KNN candidates for `text` that are matches, nearest first: at most
/// [`VECTOR_CANDIDATES`] neighbours within the embedder's `max_distance` that pass the filters,
/// of which only those that stand out from the space's probe queries are kept
/// ([`calibration`]). `None` when the embedder fails (on the query or a probe), answers with the
/// wrong dimension, or has no vectors in the store.
fn semantic_candidates(
    src: &Sources<'_>,
    c: &Connection,
    filters: &Filters,
    e: &dyn Embedder,
    text: &str,
    k: usize,
) -> Result<Option<Vec<i64>>, SearchError> {
    let Some(vectors) = src.vectors else { return Ok(None) };
    // No embedding call when this model has no vectors yet.
    let stored = match vectors.dimensions(e.model()) {
        Ok(d) if !d.is_empty() => d,
        Ok(_) => return Ok(None),
        Err(err) => {
            tracing::warn!(error = %err, "vector store unreadable; semantic search skipped");
            return Ok(None);
        }
    };
    let v = match e.embed_query(text) {
        Ok(v) => v,
        Err(err) => {
            tracing::warn!(error = %err, "embedder failed; semantic search skipped");
            return Ok(None);
        }
    };
    if !stored.contains(&v.len()) || e.dimension().is_some_and(|d| d != v.len()) {
        tracing::warn!(?stored, found = v.len(), "no vectors of the query's dimension");
        return Ok(None);
    }
    let neighbours = match vectors.knn(e.model(), &v, k) {
        Ok(n) => n,
        Err(err) => {
            tracing::warn!(error = %err, "knn failed; semantic search skipped");
            return Ok(None);
        }
    };
    // A neighbour beyond the embedder's `max_distance` is never a match (a ceiling; for models
    // whose unrelated texts sit well inside it, the calibration below is what decides).
    let cutoff = e.max_distance();
    let near: Vec<i64> =
        neighbours.into_iter().filter(|n| n.distance <= cutoff).map(|n| n.id).collect();
    let ids = filtered_in_order(c, filters, near, VECTOR_CANDIDATES)?;
    if ids.is_empty() {
        // Nothing to judge: no probe is embedded.
        return Ok(Some(ids));
    }
    let Some(probes) = calibration::probes_for(e, v.len()) else {
        tracing::warn!("probe queries could not be embedded; semantic search skipped");
        return Ok(None);
    };
    let found = match vectors.stored_vectors(e.model(), v.len(), &ids) {
        Ok(f) => f,
        Err(err) => {
            tracing::warn!(error = %err, "stored vectors unreadable; semantic search skipped");
            return Ok(None);
        }
    };
    // In KNN order (`stored_vectors` keeps the order of the ids it is given).
    let candidates: Vec<(i64, &[f32])> = found.iter().map(|(id, f)| (*id, f.as_slice())).collect();
    Ok(Some(calibration::standing_out(&v, &probes, &candidates)))
}

fn browse(
    src: &Sources<'_>,
    c: &Connection,
    filters: &Filters,
    r: &SearchRequest,
    substrings: &[Substring],
) -> Result<Vec<Ranked>, SearchError> {
    let pool: Vec<i64> = match substrings.first() {
        None => {
            let order = match r.sort {
                Sort::DateDesc => "m.date DESC, m.id DESC",
                Sort::DateAsc => "m.date ASC, m.id ASC",
                Sort::SizeDesc => "m.size DESC, m.id DESC",
            };
            let sql = format!(
                "SELECT m.id FROM messages m WHERE {} ORDER BY {order} LIMIT {BROWSE_WINDOW}",
                filters.sql
            );
            let params: Vec<&dyn rusqlite::ToSql> =
                filters.params.iter().map(|v| v as &dyn rusqlite::ToSql).collect();
            c.prepare_cached(&sql)
                .and_then(|mut s| {
                    s.query_map(params.as_slice(), |row| row.get(0))?.collect::<Result<_, _>>()
                })
                .map_err(q("browse"))?
        }
        Some(_) => {
            // The most selective constraint drives the pool: body text is the least.
            let lead = substrings
                .iter()
                .max_by_key(|s| (s.field != SubstringField::Body, s.folded.chars().count()))
                .unwrap_or(&substrings[0]);
            let order = match r.sort {
                Sort::DateDesc => CandidateOrder::DateDesc,
                Sort::DateAsc => CandidateOrder::DateAsc,
                Sort::SizeDesc => CandidateOrder::SizeDesc,
            };
            let mut pool = src.lexical.substring_candidates(
                lead.field,
                &lead.folded,
                (r.after, r.before),
                order,
                BROWSE_WINDOW,
            )?;
            for s in substrings {
                if std::ptr::eq(s, lead) || pool.is_empty() {
                    continue;
                }
                let ok: HashSet<i64> =
                    src.lexical.substring_among(s.field, &s.folded, &pool)?.into_iter().collect();
                pool.retain(|i| ok.contains(i));
            }
            if filters.any {
                let ok = passing(c, filters, &pool)?;
                pool.retain(|i| ok.contains(i));
            }
            pool
        }
    };
    Ok(pool.into_iter().map(|id| Ranked { id, provenance: Provenance::default() }).collect())
}

/// Confirms substrings, collapses threads and cuts the page, lazily: text is read only for
/// candidates the page needs.
fn page(
    c: &Connection,
    r: &SearchRequest,
    ranked: Vec<Ranked>,
    substrings: &[Substring],
    semantic: Semantic,
    terms: &[String],
) -> Result<SearchPage, SearchError> {
    let candidates = ranked.len();
    let want = r.offset + r.limit + 1;
    let mut confirmer = Confirmer { buf: String::new() };
    let mut seen_threads: HashSet<i64> = HashSet::new();
    let mut accepted: Vec<Ranked> = Vec::new();
    let mut substring_rank = 0u32;
    for mut x in ranked {
        if accepted.len() >= want {
            break;
        }
        // The thread first (a point lookup, cheap next to reading a body); a message
        // soft-deleted since the index was written has none and is skipped.
        let thread: Option<i64> = c
            .prepare_cached("SELECT thread_id FROM messages WHERE id = ?1 AND deleted_at IS NULL")
            .and_then(|mut st| st.query_row([x.id], |row| row.get(0)).optional())
            .map_err(q("thread of candidate"))?;
        let Some(thread) = thread else { continue };
        if !r.per_message && seen_threads.contains(&thread) {
            continue;
        }
        let mut ok = true;
        for s in substrings {
            if !confirmer.contains(c, x.id, s.field, &s.folded)? {
                ok = false;
                break;
            }
        }
        if !ok {
            continue;
        }
        if !substrings.is_empty() {
            substring_rank += 1;
            x.provenance.substring = Some(substring_rank);
        }
        seen_threads.insert(thread);
        accepted.push(x);
    }
    let next_offset = (accepted.len() > r.offset + r.limit).then_some(r.offset + r.limit);
    let mut snippet_terms: Vec<String> = terms.to_vec();
    for s in substrings.iter().filter(|s| s.field == SubstringField::Body) {
        snippet_terms.extend(query_terms(&s.folded));
    }
    let messages = accepted
        .into_iter()
        .skip(r.offset)
        .take(r.limit)
        .enumerate()
        .map(|(i, x)| {
            let chars =
                if r.offset + i < SNIPPET_TOP_RESULTS { SNIPPET_TOP_CHARS } else { SNIPPET_CHARS };
            summary(c, x, &snippet_terms, chars)
        })
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .collect();
    Ok(SearchPage {
        messages,
        page: PageInfo { offset: r.offset, limit: r.limit, next_offset, candidates },
        semantic,
    })
}

fn summary(
    c: &Connection,
    x: Ranked,
    terms: &[String],
    chars: usize,
) -> Result<Option<MessageSummary>, SearchError> {
    let mut s = c
        .prepare_cached(
            "SELECT m.rfc_message_id, m.thread_id, m.subject, m.from_name, m.from_addr, m.date,
                    a.name, mb.name, m.attachment_count, m.flags, coalesce(b.body_text, '')
             FROM messages m JOIN accounts a ON a.id = m.account_id
             JOIN mailboxes mb ON mb.id = m.mailbox_id
             LEFT JOIN message_bodies b ON b.message_id = m.id
             WHERE m.id = ?1 AND m.deleted_at IS NULL",
        )
        .map_err(q("summary"))?;
    s.query_row([x.id], |row| {
        let from_addr: Option<String> = row.get(4)?;
        let date: Option<i64> = row.get(5)?;
        let flags: i64 = row.get(9)?;
        let body: String = row.get(10)?;
        Ok(MessageSummary {
            id: x.id,
            message_id: row.get(0)?,
            thread_id: row.get(1)?,
            subject: row.get(2)?,
            from: from_addr.map(|address| Sender { name: row.get(3).ok().flatten(), address }),
            date: date.map(rfc3339),
            account: row.get(6)?,
            mailbox: row.get(7)?,
            snippet: snippet(&body, terms, chars),
            has_attachments: row.get::<_, i64>(8)? > 0,
            unread: flags & 1 == 0,
            provenance: x.provenance,
        })
    })
    .optional()
    .map_err(|e| SearchError::Store(StoreError::query("summary", e)))
}
