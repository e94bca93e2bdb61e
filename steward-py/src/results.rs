//! Replay and evaluation results as plain Python objects: typed read-only attributes, `to_dict()`
//! for a DataFrame, equality, and pickling (each class takes its attributes back as constructor
//! arguments). They mirror the core's `steward_core::replay` and `steward_core::eval` records
//! field for field and are made from them with `From`; nothing is computed here.

use std::collections::BTreeMap;

use pyo3::{prelude::*, types::PyTuple};
use serde::Serialize;
use serde_json::Value;

use crate::{coded, json_object_of, to_python};

/// `Name(a=…, b=…)` from the record's dict, for the small records.
fn repr_of(py: Python<'_>, name: &str, value: &impl Serialize) -> PyResult<String> {
    let dict = to_python(py, value)?;
    let mut parts = Vec::new();
    for item in dict.call_method0("items")?.try_iter()? {
        let (key, value): (String, Bound<'_, PyAny>) = item?.extract()?;
        parts.push(format!("{key}={}", value.repr()?));
    }
    Ok(format!("{name}({})", parts.join(", ")))
}

/// The decision for one replayed record.
#[pyclass(name = "ReplayOutcome", module = "steward._steward", frozen, eq, from_py_object)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ReplayOutcome {
    /// The record's position (0-based).
    #[pyo3(get)]
    index: usize,
    /// The tool.
    #[pyo3(get)]
    tool: String,
    /// `allow`, `gate` or `deny`.
    #[pyo3(get)]
    decision: String,
    /// The level of an allow or a gate.
    #[pyo3(get)]
    level: Option<String>,
    /// The full decision, with a denial's reason.
    detail: Value,
    /// The record's expectation.
    #[pyo3(get)]
    expected: Option<String>,
    /// Whether the decision meets the expectation (None without one).
    #[pyo3(get)]
    matches: Option<bool>,
}

impl From<steward_core::replay::ReplayOutcome> for ReplayOutcome {
    fn from(o: steward_core::replay::ReplayOutcome) -> Self {
        Self {
            index: o.index,
            tool: o.tool,
            decision: o.decision.to_owned(),
            level: o.level.map(str::to_owned),
            detail: serde_json::to_value(&o.detail).unwrap_or(Value::Null),
            expected: o.expected,
            matches: o.matches,
        }
    }
}

#[pymethods]
impl ReplayOutcome {
    #[new]
    #[pyo3(signature = (index, tool, decision, level, detail, expected, matches))]
    fn new(
        index: usize,
        tool: String,
        decision: String,
        level: Option<String>,
        detail: &Bound<'_, PyAny>,
        expected: Option<String>,
        matches: Option<bool>,
    ) -> PyResult<Self> {
        let detail =
            serde_json::from_str(&json_object_of(detail.py(), Some(detail))?).map_err(|e| {
                coded(steward_core::ErrorKind::InvalidInput, "PY_INVALID_ARGUMENT", &e.to_string())
            })?;
        Ok(Self { index, tool, decision, level, detail, expected, matches })
    }

    /// The full decision as a dict (`{"decision": "deny", "why": …}`).
    #[getter]
    fn detail<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.detail)
    }

    /// The attributes as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self)
    }

    fn __getnewargs__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        (
            self.index,
            &self.tool,
            &self.decision,
            &self.level,
            self.detail(py)?,
            &self.expected,
            self.matches,
        )
            .into_pyobject(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        repr_of(py, "ReplayOutcome", self)
    }
}

/// A whole policy replay (`Steward.replay.policy`).
#[pyclass(name = "PolicyReplay", module = "steward._steward", frozen, eq, get_all, from_py_object)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct PolicyReplay {
    /// The policy version the records were decided under.
    policy_version: u64,
    /// Records replayed.
    total: usize,
    /// Records with an expectation.
    compared: usize,
    /// Of those, the ones that matched.
    matched: usize,
    /// Indexes of the records whose decision differs from the expectation.
    differences: Vec<usize>,
    /// One outcome per record, in order.
    outcomes: Vec<ReplayOutcome>,
}

impl From<steward_core::replay::PolicyReplay> for PolicyReplay {
    fn from(r: steward_core::replay::PolicyReplay) -> Self {
        Self {
            policy_version: r.policy_version,
            total: r.total,
            compared: r.compared,
            matched: r.matched,
            differences: r.differences,
            outcomes: r.outcomes.into_iter().map(Into::into).collect(),
        }
    }
}

#[pymethods]
impl PolicyReplay {
    #[new]
    fn new(
        policy_version: u64,
        total: usize,
        compared: usize,
        matched: usize,
        differences: Vec<usize>,
        outcomes: Vec<ReplayOutcome>,
    ) -> Self {
        Self { policy_version, total, compared, matched, differences, outcomes }
    }

    /// The whole replay as a dict, the outcomes as a list of dicts.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self)
    }

    fn __getnewargs__(&self) -> (u64, usize, usize, usize, Vec<usize>, Vec<ReplayOutcome>) {
        (
            self.policy_version,
            self.total,
            self.compared,
            self.matched,
            self.differences.clone(),
            self.outcomes.clone(),
        )
    }

    fn __repr__(&self) -> String {
        format!(
            "PolicyReplay(policy_version={}, total={}, compared={}, matched={}, differences={:?})",
            self.policy_version, self.total, self.compared, self.matched, self.differences
        )
    }
}

/// Recall, MRR and nDCG over a set of cases.
#[pyclass(name = "Scores", module = "steward._steward", frozen, eq, get_all, from_py_object)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Scores {
    /// Cases scored.
    cases: usize,
    /// Mean recall at k.
    recall: f64,
    /// Mean reciprocal rank.
    mrr: f64,
    /// Mean nDCG at k.
    ndcg: f64,
}

impl From<steward_core::eval::Scores> for Scores {
    fn from(s: steward_core::eval::Scores) -> Self {
        Self { cases: s.cases, recall: s.recall, mrr: s.mrr, ndcg: s.ndcg }
    }
}

#[pymethods]
impl Scores {
    #[new]
    fn new(cases: usize, recall: f64, mrr: f64, ndcg: f64) -> Self {
        Self { cases, recall, mrr, ndcg }
    }

    /// The scores as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self)
    }

    fn __getnewargs__(&self) -> (usize, f64, f64, f64) {
        (self.cases, self.recall, self.mrr, self.ndcg)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        repr_of(py, "Scores", self)
    }
}

/// The scores of one labeled query.
#[pyclass(name = "CaseResult", module = "steward._steward", frozen, eq, get_all, from_py_object)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CaseResult {
    /// The case's position (0-based).
    index: usize,
    /// Its kind.
    kind: String,
    /// The cutoff used.
    k: usize,
    /// 1-based ranks (within the top k) of the relevant messages found.
    hit_ranks: Vec<usize>,
    /// Found relevant / all relevant.
    recall: f64,
    /// 1 / rank of the first relevant message (0 when none is in the top k).
    reciprocal_rank: f64,
    /// Binary-relevance nDCG at k.
    ndcg: f64,
}

impl From<steward_core::eval::CaseResult> for CaseResult {
    fn from(c: steward_core::eval::CaseResult) -> Self {
        Self {
            index: c.index,
            kind: c.kind,
            k: c.k,
            hit_ranks: c.hit_ranks,
            recall: c.recall,
            reciprocal_rank: c.reciprocal_rank,
            ndcg: c.ndcg,
        }
    }
}

#[pymethods]
impl CaseResult {
    #[new]
    fn new(
        index: usize,
        kind: String,
        k: usize,
        hit_ranks: Vec<usize>,
        recall: f64,
        reciprocal_rank: f64,
        ndcg: f64,
    ) -> Self {
        Self { index, kind, k, hit_ranks, recall, reciprocal_rank, ndcg }
    }

    /// The scores as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self)
    }

    fn __getnewargs__(&self) -> (usize, String, usize, Vec<usize>, f64, f64, f64) {
        (
            self.index,
            self.kind.clone(),
            self.k,
            self.hit_ranks.clone(),
            self.recall,
            self.reciprocal_rank,
            self.ndcg,
        )
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        repr_of(py, "CaseResult", self)
    }
}

/// A whole retrieval evaluation (`Steward.eval.retrieval`).
#[pyclass(name = "RetrievalEval", module = "steward._steward", frozen, eq, get_all, from_py_object)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RetrievalEval {
    /// Over all cases.
    overall: Scores,
    /// Per query kind.
    by_kind: BTreeMap<String, Scores>,
    /// One result per case, in order.
    cases: Vec<CaseResult>,
}

impl From<steward_core::eval::RetrievalEval> for RetrievalEval {
    fn from(e: steward_core::eval::RetrievalEval) -> Self {
        Self {
            overall: e.overall.into(),
            by_kind: e.by_kind.into_iter().map(|(k, v)| (k, v.into())).collect(),
            cases: e.cases.into_iter().map(Into::into).collect(),
        }
    }
}

#[pymethods]
impl RetrievalEval {
    #[new]
    fn new(overall: Scores, by_kind: BTreeMap<String, Scores>, cases: Vec<CaseResult>) -> Self {
        Self { overall, by_kind, cases }
    }

    /// The whole evaluation as a dict, the cases as a list of dicts.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self)
    }

    fn __getnewargs__(&self) -> (Scores, BTreeMap<String, Scores>, Vec<CaseResult>) {
        (self.overall.clone(), self.by_kind.clone(), self.cases.clone())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "RetrievalEval(overall={}, kinds={:?}, cases={})",
            self.overall.__repr__(py)?,
            self.by_kind.keys().collect::<Vec<_>>(),
            self.cases.len()
        ))
    }
}
