//! The mail of a `Steward` from Python: mirroring Maildir, mbox and Apple Mail folders (with
//! progress and Ctrl-C), search, the embedding drain and the mirror's counts.

use super::*;

impl PySteward {
    /// Mirrors `source` with the GIL released. After every batch, `progress` (a callable)
    /// gets `{"phase", "files_total", "files_done"}` and pending signals are checked: an
    /// exception from either (Ctrl-C's `KeyboardInterrupt`, or one the callable raises) stops
    /// the run before its next batch — what was committed stays — and is raised here.
    fn sync<'py>(
        &self,
        py: Python<'py>,
        source: &dyn MailSource,
        account: Option<String>,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let cancel = std::sync::atomic::AtomicBool::new(false);
        let callback = progress.map(|p| p.clone().unbind());
        let mut raised: Option<PyErr> = None;
        let opts = SyncOptions { account, cancel: Some(&cancel) };
        let result = py.detach(|| {
            self.inner.sync_mail(source, &opts, &mut |p| {
                if raised.is_some() {
                    return;
                }
                let outcome = Python::attach(|py| {
                    py.check_signals()?;
                    match &callback {
                        Some(cb) => cb.call1(py, (to_python(py, p)?,)).map(drop),
                        None => Ok(()),
                    }
                });
                if let Err(e) = outcome {
                    raised = Some(e);
                    cancel.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            })
        });
        if let Some(e) = raised {
            return Err(e);
        }
        to_python(py, &result.map_err(|e| to_py(&e))?)
    }

    /// `sync` as an asyncio awaitable.
    fn sync_async<'py>(
        &self,
        py: Python<'py>,
        source: impl MailSource + 'static,
        account: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let steward = std::sync::Arc::clone(&self.inner);
        awaitable(py, move || {
            let opts = SyncOptions { account, cancel: None };
            outcome(steward.sync_mail(&source, &opts, &mut |_| {}))
        })
    }
}

#[pymethods]
impl PySteward {
    /// Mirrors a Maildir (and brings the text index up to it); returns the sync summary as a
    /// dict (counts, `errors` — the first failed files —, `seconds`, `messages_per_second`).
    /// `progress(report)` is called after every batch; an exception it raises, or Ctrl-C,
    /// stops the run before its next batch (what was committed stays) and is raised here.
    #[pyo3(signature = (path, account=None, progress=None))]
    fn index_maildir<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        account: Option<String>,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.sync(py, &MaildirSource::new(path), account, progress)
    }

    /// `index_maildir(path, account)` as an asyncio awaitable.
    #[pyo3(signature = (path, account=None))]
    fn index_maildir_async<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        account: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.sync_async(py, MaildirSource::new(path), account)
    }

    /// `index_mbox(path, account)` as an asyncio awaitable.
    #[pyo3(signature = (path, account=None))]
    fn index_mbox_async<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        account: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.sync_async(py, MboxSource::new(path), account)
    }

    /// `index_emlx(path, account)` as an asyncio awaitable.
    #[pyo3(signature = (path, account=None))]
    fn index_emlx_async<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        account: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.sync_async(py, EmlxSource::new(path), account)
    }

    /// One drain of the mail embedding queue with the configured embedder; returns its report
    /// as a dict (an endpoint that is down is in `unavailable`, not an exception).
    fn embed_mail<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let r = py
            .detach(|| self.inner.embed_mail(&Default::default(), &mut |_| {}))
            .map_err(|e| to_py(&e))?;
        to_python(py, &r)
    }

    /// Mirrors an mbox file (mboxrd quoting).
    #[pyo3(signature = (path, account=None, progress=None))]
    fn index_mbox<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        account: Option<String>,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.sync(py, &MboxSource::new(path), account, progress)
    }

    /// Mirrors an Apple Mail folder of `.emlx` files.
    #[pyo3(signature = (path, account=None, progress=None))]
    fn index_emlx<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        account: Option<String>,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.sync(py, &EmlxSource::new(path), account, progress)
    }

    /// Searches the mirror. The keyword arguments are the flat search parameters, as
    /// `GET /search` takes them: `text`, `from` (pass it as `**{"from": …}`), `to`,
    /// `subject_contains`, `role`, `mailbox`, `after`, `before`, `unread`, `has_attachments`,
    /// `sort`, `limit`, `offset`, … An unknown name is an `InvalidInputError`.
    #[pyo3(signature = (**params))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        params: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let json = json_object_of(py, params.map(|d| d.as_any()))?;
        let page = py
            .detach(|| {
                let request = SearchParams::from_json(&json)?.into_request()?;
                self.inner.search(&request)
            })
            .map_err(|e| to_py(&e))?;
        to_python(py, &page)
    }

    /// `search(**params)` as an asyncio awaitable.
    #[pyo3(signature = (**params))]
    fn search_async<'py>(
        &self,
        py: Python<'py>,
        params: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let json = json_object_of(py, params.map(|d| d.as_any()))?;
        let steward = std::sync::Arc::clone(&self.inner);
        awaitable(py, move || {
            outcome(
                SearchParams::from_json(&json)
                    .and_then(SearchParams::into_request)
                    .and_then(|r| steward.search(&r)),
            )
        })
    }

    /// `embed_mail()` as an asyncio awaitable.
    fn embed_mail_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let steward = std::sync::Arc::clone(&self.inner);
        awaitable(py, move || {
            outcome(steward.embed_mail(&steward_core::embed::EmbedOptions::default(), &mut |_| {}))
        })
    }

    /// Live and soft-deleted message counts and the failed-file count.
    fn mirror_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = py.detach(|| self.inner.mail_stats()).map_err(|e| to_py(&e))?;
        let d = PyDict::new(py);
        d.set_item("messages_live", s.messages_live)?;
        d.set_item("messages_deleted", s.messages_deleted)?;
        d.set_item("error_count", s.error_count)?;
        Ok(d)
    }
}
