//! The records a person reviews from Python: approvals and a person's authority over them
//! (`Human`), the journal's operations, the audit trail and the policy.

use super::*;

/// A person's authority over approvals, minted explicitly by the notebook or script acting for
/// them (`Steward.human("ada")`); agent identities cannot get one.
#[pyclass(name = "Human", module = "steward._steward", frozen)]
pub(crate) struct PyHuman {
    steward: std::sync::Arc<steward_core::Steward>,
    who: steward_core::approval::HumanAuthority,
}

impl PyHuman {
    /// The handle and the person's authority.
    pub(crate) fn parts(
        &self,
    ) -> (&steward_core::Steward, &steward_core::approval::HumanAuthority) {
        (&self.steward, &self.who)
    }

    fn decide<'py>(
        &self,
        py: Python<'py>,
        id: i64,
        kind: steward_core::approval::DecisionKind,
        input: steward_core::approval::DecisionInput,
    ) -> PyResult<Bound<'py, PyAny>> {
        let card = py
            .detach(|| self.steward.decide_approval(id, kind, &input, &self.who))
            .map_err(|e| to_py(&e))?;
        to_python(py, &card)
    }
}

#[pymethods]
impl PyHuman {
    /// Who is acting.
    #[getter]
    fn person(&self) -> &str {
        self.who.person()
    }

    /// Approves request `id` (with `edit`, a dict, that input runs instead; `pin` for a
    /// secure request). An approved watch card starts its watch. Returns the card.
    #[pyo3(signature = (id, note=None, pin=None, edit=None))]
    fn approve<'py>(
        &self,
        py: Python<'py>,
        id: i64,
        note: Option<String>,
        pin: Option<String>,
        edit: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let edit = match edit {
            Some(e) => Some(serde_json::from_str(&json_object_of(py, Some(e))?).map_err(|e| {
                coded(ErrorKind::InvalidInput, "PY_INVALID_ARGUMENT", &e.to_string())
            })?),
            None => None,
        };
        let input = steward_core::approval::DecisionInput { note, pin, edit };
        self.decide(py, id, steward_core::approval::DecisionKind::Approve, input)
    }

    /// Denies request `id`; returns the card.
    #[pyo3(signature = (id, note=None))]
    fn deny<'py>(
        &self,
        py: Python<'py>,
        id: i64,
        note: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let input = steward_core::approval::DecisionInput { note, ..Default::default() };
        self.decide(py, id, steward_core::approval::DecisionKind::Deny, input)
    }

    /// Sets one tool's rule as this person: `level` is L0-L3 (or auto, logged, confirm,
    /// secure; floors still apply), `allow`, `deny` (with `reason`) or `default`. With
    /// `expect_version`, refused if the policy moved on. Returns the new version as a dict.
    #[pyo3(signature = (tool, level, reason=None, expect_version=None))]
    fn set_tool_rule<'py>(
        &self,
        py: Python<'py>,
        tool: &str,
        level: String,
        reason: Option<String>,
        expect_version: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let input = steward_core::ToolRuleInput { level, reason, expect_version };
        let v = py
            .detach(|| self.steward.set_tool_rule(&self.who, tool, &input))
            .map_err(|e| to_py(&e))?;
        to_python(py, &v)
    }

    /// Applies one policy change as this person: a dict tagged by `change` (`set_level`,
    /// `clear_level`, `set_rule`, `clear_rule`, `deny_namespace`, `undeny_namespace`,
    /// `allow_read`, `disallow_read`), as the `policy.set` tool takes it. Returns the new
    /// version as a dict.
    #[pyo3(signature = (change, expect_version=None))]
    fn set_policy<'py>(
        &self,
        py: Python<'py>,
        change: &Bound<'py, PyAny>,
        expect_version: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let change: steward_core::policy::PolicyChange =
            serde_json::from_str(&json_object_of(py, Some(change))?).map_err(|e| {
                coded(ErrorKind::InvalidInput, "PY_INVALID_ARGUMENT", &e.to_string())
            })?;
        let v = py
            .detach(|| self.steward.set_policy(&self.who, &change, expect_version))
            .map_err(|e| to_py(&e))?;
        to_python(py, &v)
    }

    /// Sends request `id` back to the agent with `note` (what to change); returns the card.
    fn revise<'py>(&self, py: Python<'py>, id: i64, note: String) -> PyResult<Bound<'py, PyAny>> {
        let input =
            steward_core::approval::DecisionInput { note: Some(note), ..Default::default() };
        self.decide(py, id, steward_core::approval::DecisionKind::Revise, input)
    }
}

#[pymethods]
impl PySteward {
    /// The authority of `person` over approvals (refused for an agent identity).
    fn human(&self, person: &str) -> PyResult<PyHuman> {
        let who = self.inner.human(person).map_err(|e| to_py(&e))?;
        Ok(PyHuman { steward: std::sync::Arc::clone(&self.inner), who })
    }

    /// Approval requests, newest first (at most 100 per page), as dicts.
    #[pyo3(signature = (pending_only=false, chat=None, offset=0, limit=50))]
    fn approvals<'py>(
        &self,
        py: Python<'py>,
        pending_only: bool,
        chat: Option<String>,
        offset: usize,
        limit: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let q = steward_core::approval::ApprovalQuery {
            status: pending_only.then(|| "pending".to_owned()),
            chat,
            offset,
            limit: Some(limit),
        };
        let page = py.detach(|| self.inner.list_approvals(&q)).map_err(|e| to_py(&e))?;
        to_python(py, &page)
    }

    /// One approval request, as a dict.
    fn approval<'py>(&self, py: Python<'py>, id: i64) -> PyResult<Bound<'py, PyAny>> {
        let a = py.detach(|| self.inner.approval(id)).map_err(|e| to_py(&e))?;
        to_python(py, &a)
    }

    /// Journaled operations, newest first (at most 100 per page), optionally in one state.
    #[pyo3(signature = (state=None, offset=0, limit=50))]
    fn write_operations<'py>(
        &self,
        py: Python<'py>,
        state: Option<String>,
        offset: usize,
        limit: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let q = steward_core::journal::OpsQuery { state, offset, limit: Some(limit) };
        let ops = py.detach(|| self.inner.query_write_operations(&q)).map_err(|e| to_py(&e))?;
        to_python(py, &ops)
    }

    /// One journaled operation with its complete input and evidence.
    fn write_operation<'py>(&self, py: Python<'py>, id: i64) -> PyResult<Bound<'py, PyAny>> {
        let op = py.detach(|| self.inner.read_write_operation(id)).map_err(|e| to_py(&e))?;
        to_python(py, &op)
    }

    /// The redacted audit trail, newest first: `query` is a dict of filters (actor, event_type,
    /// risk, chat, tool, after, before, text, offset, limit).
    #[pyo3(signature = (query=None))]
    fn audit<'py>(
        &self,
        py: Python<'py>,
        query: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let text = json_object_of(py, query)?;
        let q = steward_core::audit::AuditQuery::from_json(&text).map_err(|e| to_py(&e))?;
        let page = py.detach(|| self.inner.audit_page(&q)).map_err(|e| to_py(&e))?;
        to_python(py, &page.events)
    }

    /// The policy in force (`current`), the tools it governs (`tools`, with effect and default
    /// level) and up to `history` earlier versions, newest first, as a dict.
    #[pyo3(signature = (history=0))]
    fn policy<'py>(&self, py: Python<'py>, history: usize) -> PyResult<Bound<'py, PyAny>> {
        let o = py.detach(|| self.inner.policy_overview(history)).map_err(|e| to_py(&e))?;
        to_python(py, &o)
    }
}
