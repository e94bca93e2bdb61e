//! Watches from Python: create, list, stop, poll, their events, and the Confirm path of a
//! watch whose rules grant actions.

use super::*;

#[pymethods]
impl PySteward {
    /// Creates a watch, or — when a rule grants future actions — requests the Confirm approval
    /// that starts it (asked by `agent`). Returns `{"outcome": "started", …watch}` or
    /// `{"outcome": "needs_approval", …card}`.
    #[pyo3(signature = (definition, agent="agent:python"))]
    fn propose_watch<'py>(
        &self,
        py: Python<'py>,
        definition: &Bound<'py, PyAny>,
        agent: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let text = json_object_of(py, Some(definition))?;
        let def = steward_core::watch::WatchDefinition::from_json(&text).map_err(|e| to_py(&e))?;
        let p = py.detach(|| self.inner.propose_watch(&def, agent)).map_err(|e| to_py(&e))?;
        to_python(py, &p)
    }

    /// Starts the watch an approved `watch.create_agent` request describes (idempotent).
    fn create_approved_watch<'py>(
        &self,
        py: Python<'py>,
        approval_id: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let w =
            py.detach(|| self.inner.create_approved_watch(approval_id)).map_err(|e| to_py(&e))?;
        to_python(py, &w)
    }

    /// The granted actions an event makes available (only its matched rules' grants), with
    /// the arguments their constraints fix.
    fn granted_actions<'py>(&self, py: Python<'py>, event_id: i64) -> PyResult<Bound<'py, PyAny>> {
        let a = py.detach(|| self.inner.watch_granted_actions(event_id)).map_err(|e| to_py(&e))?;
        to_python(py, &a)
    }

    /// The recorded action runs (claims and outcomes) of an event.
    fn action_runs<'py>(&self, py: Python<'py>, event_id: i64) -> PyResult<Bound<'py, PyAny>> {
        let r = py.detach(|| self.inner.watch_action_runs(event_id)).map_err(|e| to_py(&e))?;
        to_python(py, &r)
    }

    /// `poll_watches(now)` as an asyncio awaitable.
    #[pyo3(signature = (now=None))]
    fn poll_watches_async<'py>(
        &self,
        py: Python<'py>,
        now: Option<i64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let steward = std::sync::Arc::clone(&self.inner);
        awaitable(py, move || outcome(steward.poll_watches(now)))
    }

    /// Creates a watch from a definition dict (source, resource_ref, instruction, rules, and
    /// optionally expires_at and chat); returns it as a dict.
    fn create_watch<'py>(
        &self,
        py: Python<'py>,
        definition: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let text = json_object_of(py, Some(definition))?;
        let def = steward_core::watch::WatchDefinition::from_json(&text).map_err(|e| to_py(&e))?;
        let w = py.detach(|| self.inner.create_watch(&def)).map_err(|e| to_py(&e))?;
        to_python(py, &w)
    }

    /// Watches, newest first, optionally in one state (active, stopped, expired, completed).
    #[pyo3(signature = (status=None, offset=0, limit=20))]
    fn watches<'py>(
        &self,
        py: Python<'py>,
        status: Option<String>,
        offset: usize,
        limit: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let status = status
            .map(|s| s.parse::<steward_core::watch::WatchStatus>())
            .transpose()
            .map_err(|e| to_py(&steward_core::watch::WatchError::from(e)))?;
        let q = steward_core::watch::WatchQuery { status, offset, limit: Some(limit) };
        let page = py.detach(|| self.inner.list_watches(&q)).map_err(|e| to_py(&e))?;
        to_python(py, &page)
    }

    /// Stops a watch (idempotent); returns it.
    fn stop_watch<'py>(&self, py: Python<'py>, id: i64) -> PyResult<Bound<'py, PyAny>> {
        let w = py.detach(|| self.inner.stop_watch(id)).map_err(|e| to_py(&e))?;
        to_python(py, &w)
    }

    /// Runs one poll cycle at `now` (Unix seconds; default the clock — a replay may pass its
    /// own); returns the report.
    #[pyo3(signature = (now=None))]
    fn poll_watches<'py>(&self, py: Python<'py>, now: Option<i64>) -> PyResult<Bound<'py, PyAny>> {
        let r = py.detach(|| self.inner.poll_watches(now)).map_err(|e| to_py(&e))?;
        to_python(py, &r)
    }

    /// Queued watch events, oldest first.
    #[pyo3(signature = (pending=false, watch_id=None, offset=0, limit=20))]
    fn watch_events<'py>(
        &self,
        py: Python<'py>,
        pending: bool,
        watch_id: Option<i64>,
        offset: usize,
        limit: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let q =
            steward_core::watch::WatchEventQuery { pending, watch_id, offset, limit: Some(limit) };
        let events = py.detach(|| self.inner.watch_events(&q)).map_err(|e| to_py(&e))?;
        to_python(py, &events)
    }
}
