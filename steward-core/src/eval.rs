//! Retrieval evaluation: labeled queries run through the real search, scored with recall@k,
//! MRR and nDCG@k, per query kind and overall. The relevance labels are RFC Message-IDs, which
//! survive a mirror rebuild (mirror ids do not).

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::{
    Steward,
    error::{ErrorKind, StewardError},
    jsonl::{LineError, parse_lines},
    mirror::normalize_message_id,
    search::{SearchError, SearchRequest},
};

/// Cases one evaluation runs at most.
/// Fixed (not a setting).
pub const MAX_EVAL_CASES: usize = 5_000;
/// The cutoff when a case names none.
/// Default of a case's `k`.
pub const DEFAULT_K: usize = 10;

/// One labeled query.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RetrievalCase {
    /// A label to group by (`exact`, `paraphrase`, `filter`…); `default` when absent.
    #[serde(default = "default_kind")]
    pub kind: String,
    /// The search, as a frontend would send it (its `limit` is replaced by `k`).
    pub request: SearchRequest,
    /// The relevant messages' Message-IDs (brackets optional).
    pub expected: Vec<String>,
    /// The cutoff (1..=100); [`DEFAULT_K`] when absent.
    #[serde(default)]
    pub k: Option<usize>,
}

fn default_kind() -> String {
    "default".to_owned()
}

/// The scores of one case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    /// The case's position.
    pub index: usize,
    /// Its kind.
    pub kind: String,
    /// The cutoff used.
    pub k: usize,
    /// 1-based ranks (within the top k) of the relevant messages found.
    pub hit_ranks: Vec<usize>,
    /// Found relevant / all relevant.
    pub recall: f64,
    /// 1 / rank of the first relevant message (0 when none is in the top k).
    pub reciprocal_rank: f64,
    /// Binary-relevance nDCG at k.
    pub ndcg: f64,
}

/// Means over a group of cases.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scores {
    /// Cases in the group.
    pub cases: usize,
    /// Mean recall@k.
    pub recall: f64,
    /// Mean reciprocal rank.
    pub mrr: f64,
    /// Mean nDCG@k.
    pub ndcg: f64,
}

/// A whole evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetrievalEval {
    /// Over every case.
    pub overall: Scores,
    /// Per kind.
    pub by_kind: BTreeMap<String, Scores>,
    /// Per case, in order.
    pub cases: Vec<CaseResult>,
}

/// Errors of an evaluation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// A case is unusable.
    #[error("case {index}: {message}")]
    BadCase {
        /// 1-based position.
        index: usize,
        /// What is wrong.
        message: String,
    },
    /// Too many cases.
    #[error("{0} cases; an evaluation takes at most {MAX_EVAL_CASES}")]
    TooMany(usize),
    /// The search failed.
    #[error(transparent)]
    Search(#[from] SearchError),
}

impl StewardError for EvalError {
    fn code(&self) -> &'static str {
        match self {
            Self::BadCase { .. } => "EVAL_BAD_CASE",
            Self::TooMany(_) => "EVAL_TOO_MANY",
            Self::Search(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::BadCase { .. } | Self::TooMany(_) => ErrorKind::InvalidInput,
            Self::Search(e) => e.kind(),
        }
    }
}

/// Parses JSONL cases (blank lines skipped).
pub fn parse_cases(text: &str) -> Result<Vec<RetrievalCase>, EvalError> {
    parse_lines(text, MAX_EVAL_CASES).map_err(|e| match e {
        LineError::Bad { line, message } => EvalError::BadCase { index: line, message },
        LineError::TooMany(n) => EvalError::TooMany(n),
    })
}

/// Scores one ranked list against the relevant set (binary relevance).
fn score(
    ranked: &[Option<String>],
    relevant: &HashSet<String>,
    k: usize,
) -> (Vec<usize>, f64, f64, f64) {
    let hit_ranks: Vec<usize> = ranked
        .iter()
        .take(k)
        .enumerate()
        .filter(|(_, id)| id.as_ref().is_some_and(|id| relevant.contains(id)))
        .map(|(i, _)| i + 1)
        .collect();
    let recall = hit_ranks.len() as f64 / relevant.len() as f64;
    let rr = hit_ranks.first().map_or(0.0, |r| 1.0 / *r as f64);
    let dcg: f64 = hit_ranks.iter().map(|r| 1.0 / ((*r as f64) + 1.0).log2()).sum();
    let ideal: f64 = (1..=relevant.len().min(k)).map(|r| 1.0 / ((r as f64) + 1.0).log2()).sum();
    (hit_ranks, recall, rr, if ideal > 0.0 { dcg / ideal } else { 0.0 })
}

fn mean(results: &[&CaseResult]) -> Scores {
    let n = results.len().max(1) as f64;
    Scores {
        cases: results.len(),
        recall: results.iter().map(|c| c.recall).sum::<f64>() / n,
        mrr: results.iter().map(|c| c.reciprocal_rank).sum::<f64>() / n,
        ndcg: results.iter().map(|c| c.ndcg).sum::<f64>() / n,
    }
}

impl Steward {
    /// Runs every case through [`Steward::search`] and scores it.
    pub fn eval_retrieval(&self, cases: &[RetrievalCase]) -> Result<RetrievalEval, EvalError> {
        if cases.len() > MAX_EVAL_CASES {
            return Err(EvalError::TooMany(cases.len()));
        }
        let mut results = Vec::with_capacity(cases.len());
        for (index, case) in cases.iter().enumerate() {
            let bad = |message: String| EvalError::BadCase { index: index + 1, message };
            let k = case.k.unwrap_or(DEFAULT_K);
            if k == 0 || k > crate::search::MAX_API_LIMIT {
                return Err(bad(format!("k must be 1..={}", crate::search::MAX_API_LIMIT)));
            }
            let relevant: HashSet<String> = case
                .expected
                .iter()
                .map(|id| normalize_message_id(id))
                .filter(|id| !id.is_empty())
                .collect();
            if relevant.is_empty() {
                return Err(bad("no expected Message-ID".into()));
            }
            let request = SearchRequest { limit: k, offset: 0, ..case.request.clone() };
            let page = self.search(&request)?;
            let ranked: Vec<Option<String>> = page
                .messages
                .iter()
                .map(|m| m.message_id.as_deref().map(normalize_message_id))
                .collect();
            let (hit_ranks, recall, reciprocal_rank, ndcg) = score(&ranked, &relevant, k);
            results.push(CaseResult {
                index,
                kind: case.kind.clone(),
                k,
                hit_ranks,
                recall,
                reciprocal_rank,
                ndcg,
            });
        }
        let mut by_kind: BTreeMap<String, Vec<&CaseResult>> = BTreeMap::new();
        for r in &results {
            by_kind.entry(r.kind.clone()).or_default().push(r);
        }
        let all: Vec<&CaseResult> = results.iter().collect();
        Ok(RetrievalEval {
            overall: mean(&all),
            by_kind: by_kind.into_iter().map(|(k, v)| (k, mean(&v))).collect(),
            cases: results,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::score;

    #[test]
    fn metrics_on_known_rankings() {
        let ids = |v: &[&str]| v.iter().map(|s| Some((*s).to_owned())).collect::<Vec<_>>();
        let rel = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect();
        // The only relevant message first: perfect.
        assert_eq!(score(&ids(&["a", "b"]), &rel(&["a"]), 10), (vec![1], 1.0, 1.0, 1.0));
        // Second of two: MRR 1/2, nDCG 1/log2(3).
        let (ranks, recall, rr, ndcg) = score(&ids(&["x", "a"]), &rel(&["a"]), 10);
        assert_eq!((ranks, recall, rr), (vec![2], 1.0, 0.5));
        assert!((ndcg - 1.0 / 3f64.log2()).abs() < 1e-12);
        // Outside the cutoff: nothing.
        assert_eq!(score(&ids(&["x", "a"]), &rel(&["a"]), 1), (vec![], 0.0, 0.0, 0.0));
        // Two relevant, one found at rank 1: recall 1/2, nDCG 1 / (1 + 1/log2 3).
        let (_, recall, _, ndcg) = score(&ids(&["a", "x"]), &rel(&["a", "b"]), 10);
        assert_eq!(recall, 0.5);
        assert!((ndcg - 1.0 / (1.0 + 1.0 / 3f64.log2())).abs() < 1e-12);
    }
}
