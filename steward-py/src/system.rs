//! The running system from Python: the background runner (`Background`), jobs, backups,
//! status, usage and a direct model completion.

use super::*;

/// The background runner working on its own threads: `stop()` it, or use it as a context
/// manager (`with steward.run_background(): …`).
#[pyclass(name = "Background", module = "steward._steward", frozen)]
pub(crate) struct PyBackground {
    handle: std::sync::Mutex<Option<steward_core::runner::RunnerHandle>>,
}

#[pymethods]
impl PyBackground {
    /// Stops it: runs in flight stop at their next safe point (waits at most the configured
    /// grace, `[jobs] stop_grace_secs`); a second call does nothing.
    fn stop(&self, py: Python<'_>) {
        let handle = self.handle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(h) = handle {
            py.detach(move || h.stop());
        }
    }

    /// Runs `job` as soon as it is not running.
    fn wake(&self, job: &str) -> PyResult<()> {
        let job = steward_core::runner::JobName::parse(job).map_err(|e| to_py(&e))?;
        if let Some(h) =
            self.handle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref()
        {
            h.wake(job);
        }
        Ok(())
    }

    /// Whether it is still running (not stopped).
    #[getter]
    fn running(&self) -> bool {
        self.handle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_some()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.stop(py);
        false
    }
}

#[pymethods]
impl PySteward {
    /// Sends one chat request to the models its capability maps to (`[llm]` in config.toml
    /// or `STEWARD_LLM_*`), with fallback, one deadline and a usage-ledger row. `request` is a
    /// dict: `capability` (`tier-1`, the weakest, … `tier-6`, the strongest), `messages`
    /// (OpenAI format), optional `tools` (`name`, `description`, `parameters`), `max_tokens`,
    /// `temperature` and `attribution` (`service`, `action`). Returns the answer as a dict (`content`, `tool_calls`,
    /// `finish_reason`, `usage`, `target`, `model`, `attempts`, `request_id`); a tool call is
    /// returned, never run.
    fn complete<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let text = json_object_of(py, Some(request))?;
        let answer = py
            .detach(|| {
                let request = steward_core::llm::ChatRequest::from_json(&text)?;
                self.inner.llm()?.complete(&request)
            })
            .map_err(|e| to_py(&e))?;
        to_python(py, &answer)
    }

    /// `complete(request)` as an asyncio awaitable (replaying many conversations at once:
    /// `asyncio.gather`; at most 32 calls in flight).
    fn complete_async<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let text = json_object_of(py, Some(request))?;
        let steward = std::sync::Arc::clone(&self.inner);
        awaitable(py, move || {
            outcome(
                steward_core::llm::ChatRequest::from_json(&text)
                    .and_then(|request| steward.llm()?.complete(&request)),
            )
        })
    }

    /// Starts the home's background runner (its `[jobs]`, `[[mail.sources]]` and SMTP from
    /// `config.toml`): every available job runs now and then on its schedule, on threads of
    /// its own, until the returned `Background` is stopped — `with s.run_background(): …`
    /// stops it when the block ends.
    fn run_background(&self, py: Python<'_>) -> PyResult<PyBackground> {
        let steward = std::sync::Arc::clone(&self.inner);
        let handle = py
            .detach(|| {
                let runner =
                    steward_connectors::home::runner(steward).map_err(|e| Deferred::of(&e))?;
                std::sync::Arc::new(runner).spawn().map_err(|e| Deferred::of(&e))
            })
            .map_err(Deferred::raise)?;
        Ok(PyBackground { handle: std::sync::Mutex::new(Some(handle)) })
    }

    /// Runs every job that can run here once (or only `job`), in order: a list of dicts
    /// (`job`, `outcome`, `summary`, `error_code`, `error`, `detail`, times).
    #[pyo3(signature = (job=None))]
    fn run_jobs<'py>(&self, py: Python<'py>, job: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
        let only =
            job.map(steward_core::runner::JobName::parse).transpose().map_err(|e| to_py(&e))?;
        let steward = std::sync::Arc::clone(&self.inner);
        let runs = py
            .detach(|| {
                let runner =
                    steward_connectors::home::runner(steward).map_err(|e| Deferred::of(&e))?;
                runner.run_once(only).map_err(|e| Deferred::of(&e))
            })
            .map_err(Deferred::raise)?;
        to_python(py, &runs)
    }

    /// Each job: `name`, `config`, `unavailable` (why it cannot run here), its last run and
    /// the next (`last_outcome`, `last_summary`, `last_error`, `next_run_at`, `failures`, …).
    fn jobs_status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let steward = std::sync::Arc::clone(&self.inner);
        let status = py
            .detach(|| {
                let runner =
                    steward_connectors::home::runner(steward).map_err(|e| Deferred::of(&e))?;
                runner.status().map_err(|e| Deferred::of(&e))
            })
            .map_err(Deferred::raise)?;
        to_python(py, &status)
    }

    /// Backs this home up into `dir` (new or empty): every store as of one commit (also
    /// while a sync or the server writes), the attachments, `config.toml` without its secrets
    /// and a SHA-256 manifest; with `include_secrets`, `config.toml` as it is, the access token
    /// and the SMTP password file too. Returns the manifest as a dict: `format`, `created_at`,
    /// `steward_version`, `secrets_included`, `files` (`path`, `kind`, `size`, `sha256`,
    /// `user_version`), `absent`, `omitted`, `stripped_keys`.
    #[pyo3(signature = (dir, include_secrets=false))]
    fn backup_create<'py>(
        &self,
        py: Python<'py>,
        dir: PathBuf,
        include_secrets: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let opts = steward_core::backup::BackupOptions { include_secrets };
        let m = py
            .detach(|| self.inner.backup_create(&dir, &opts, &mut |_| {}))
            .map_err(|e| to_py(&e))?;
        to_python(py, &m)
    }

    /// Checks the backup in `dir` against its manifest and returns the manifest; a file that
    /// differs, is missing or should not be there raises `CorruptError` (`BACKUP_MISMATCH`)
    /// naming every one.
    #[staticmethod]
    fn backup_verify<'py>(py: Python<'py>, dir: PathBuf) -> PyResult<Bound<'py, PyAny>> {
        let m =
            py.detach(|| steward_core::backup::verify(&dir, &mut |_| {})).map_err(|e| to_py(&e))?;
        to_python(py, &m)
    }

    /// Restores the backup in `dir` into `home`, which must not exist or be empty
    /// (`ConflictError`, `BACKUP_TARGET_NOT_EMPTY`); the backup is verified first. Returns a
    /// dict: `home`, `files`, `bytes`, `stores`, `secrets_restored`, `rebuilt_on_first_use`, ….
    /// Open the home afterwards with `Steward(home)`; its indexes are rebuilt on first use.
    #[staticmethod]
    fn backup_restore<'py>(
        py: Python<'py>,
        dir: PathBuf,
        home: PathBuf,
    ) -> PyResult<Bound<'py, PyAny>> {
        let r = py
            .detach(|| steward_core::backup::restore(&dir, &home, &mut |_| {}))
            .map_err(|e| to_py(&e))?;
        to_python(py, &r)
    }

    /// The status of this home, item by item (stores, disk, index, embedder, ingest,
    /// watches, audit, journal), as a dict: `status` (the worst), `checked_at`, `items`.
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let s = py.detach(|| self.inner.system_status());
        to_python(py, &s)
    }

    /// What the models cost over a window (`7d`, `24h`, `90m`, `all`, a date or an RFC 3339
    /// instant): a dict with `total`, `unattributed`, `unpriced` and groups `by_service`,
    /// `by_action`, `by_model`, `by_day`, and `by_agent` (outside agents' tool calls).
    #[pyo3(signature = (since="7d"))]
    fn usage<'py>(&self, py: Python<'py>, since: &str) -> PyResult<Bound<'py, PyAny>> {
        let now = steward_core::time::now_secs();
        let r = py.detach(|| self.inner.usage_report(since, now)).map_err(|e| to_py(&e))?;
        to_python(py, &r)
    }
}
