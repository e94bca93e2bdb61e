//! # steward-py
//!
//! The PyO3 module `steward._steward`. It converts types and errors and adds nothing: every
//! method is one core call. Errors become a `StewardError` subclass chosen by the error's kind,
//! carrying `.code` and `.kind`. Core calls run with the GIL released.

mod chat;
mod results;

use std::path::PathBuf;

use pyo3::{create_exception, exceptions::PyException, prelude::*, types::PyDict};
use steward_connectors::mail::{
    EmlxSource, MaildirSource, MboxSource,
    demo::{DemoOptions, generate_maildir},
};
use steward_core::{
    ErrorKind, StewardError as CoreError,
    mirror::{MailSource, SyncOptions},
    search::SearchParams,
};

create_exception!(
    steward._steward,
    StewardError,
    PyException,
    "Base class of every Steward error."
);
create_exception!(
    steward._steward,
    InvalidInputError,
    StewardError,
    "The input was malformed or out of bounds."
);
create_exception!(
    steward._steward,
    NotFoundError,
    StewardError,
    "The thing asked for does not exist."
);
create_exception!(
    steward._steward,
    UnavailableError,
    StewardError,
    "A dependency is unavailable; retry later."
);
create_exception!(steward._steward, DeniedError, StewardError, "Policy or authority refused it.");
create_exception!(
    steward._steward,
    ConflictError,
    StewardError,
    "It conflicts with the current state (already resolved, key reused, stale version)."
);
create_exception!(
    steward._steward,
    CorruptError,
    StewardError,
    "A store is damaged; it is left as it is for restore from backup."
);

/// Maps a core error to its Python class, with `.code` and `.kind` set. The only mapping.
fn to_py(e: &dyn CoreError) -> PyErr {
    coded(e.kind(), e.code(), &e.to_string())
}

/// A core error carried out of a `py.detach` closure (where no Python exception can be made)
/// and raised once the GIL is held again.
struct Deferred(ErrorKind, String, String);

impl Deferred {
    fn of(e: &dyn CoreError) -> Self {
        Self(e.kind(), e.code().to_owned(), e.to_string())
    }

    fn raise(self) -> PyErr {
        coded(self.0, &self.1, &self.2)
    }
}

/// The Python exception for an error of `kind` with `code`.
fn coded(kind: ErrorKind, code: &str, message: &str) -> PyErr {
    let message = format!("{code}: {message}");
    let err = match kind {
        ErrorKind::InvalidInput => InvalidInputError::new_err(message),
        ErrorKind::NotFound => NotFoundError::new_err(message),
        ErrorKind::Unavailable => UnavailableError::new_err(message),
        ErrorKind::Denied => DeniedError::new_err(message),
        ErrorKind::Conflict => ConflictError::new_err(message),
        ErrorKind::Corrupt => CorruptError::new_err(message),
        _ => StewardError::new_err(message),
    };
    Python::attach(|py| {
        let value = err.value(py);
        let _ = value.setattr("code", code);
        let _ = value.setattr("kind", kind.as_str());
    });
    err
}

/// JSONL text as given, or a list of JSON-able values, one per line.
fn jsonl_of<'py>(py: Python<'py>, records: &Bound<'py, PyAny>) -> PyResult<String> {
    if let Ok(text) = records.extract::<String>() {
        return Ok(text);
    }
    let json = py.import("json")?;
    let mut lines = Vec::new();
    for item in records.try_iter()? {
        lines.push(json.call_method1("dumps", (item?,))?.extract::<String>()?);
    }
    Ok(lines.join("\n"))
}

/// A Python value (a dict of parameters, a definition) as JSON text for the core to parse;
/// `None` is the empty object.
fn json_object_of<'py>(py: Python<'py>, value: Option<&Bound<'py, PyAny>>) -> PyResult<String> {
    match value {
        Some(v) => py.import("json")?.call_method1("dumps", (v,))?.extract(),
        None => Ok("{}".to_owned()),
    }
}

/// A core result as plain Python values (dicts, lists, numbers, strings).
fn to_python<'py>(py: Python<'py>, value: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value)
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
    py.import("json")?.call_method1("loads", (text,))
}

/// Calls of the `*_async` methods in flight at most (each runs on its own thread).
pub const MAX_ASYNC_CALLS: usize = 32;
static ASYNC_CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// What a background call produced: JSON, or an error's kind, code and message.
type Outcome = Result<String, (ErrorKind, &'static str, String)>;

fn outcome<T: serde::Serialize, E: CoreError>(r: Result<T, E>) -> Outcome {
    match r {
        Ok(v) => serde_json::to_string(&v)
            .map_err(|e| (ErrorKind::Internal, "PY_SERIALIZE", e.to_string())),
        Err(e) => Err((e.kind(), e.code(), e.to_string())),
    }
}

/// An asyncio future for `work`, which runs on a thread of its own without the GIL; the result
/// is set through the running loop's `call_soon_threadsafe` (a cancelled future is left alone).
/// No runtime outlives a call, so a forked child awaits as well as its parent.
fn awaitable<'py>(
    py: Python<'py>,
    work: impl FnOnce() -> Outcome + Send + 'static,
) -> PyResult<Bound<'py, PyAny>> {
    awaitable_with(py, |_| work(), || {})
}

/// [`awaitable`], where `work` can see (through the flag) that the future was cancelled and
/// give up, and `delivered` runs (on the loop's thread, without the GIL) once the result was
/// set — never when the future was cancelled first.
fn awaitable_with<'py>(
    py: Python<'py>,
    work: impl FnOnce(&std::sync::atomic::AtomicBool) -> Outcome + Send + 'static,
    delivered: impl FnOnce() + Send + 'static,
) -> PyResult<Bound<'py, PyAny>> {
    use std::sync::atomic::Ordering;
    let event_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
    let future = event_loop.call_method0("create_future")?;
    let abandoned = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = std::sync::Arc::clone(&abandoned);
    let on_done = pyo3::types::PyCFunction::new_closure(
        py,
        None,
        None,
        move |args: &Bound<'_, pyo3::types::PyTuple>,
              _kw: Option<&Bound<'_, PyDict>>|
              -> PyResult<()> {
            if args.get_item(0)?.call_method0("cancelled")?.extract::<bool>()? {
                flag.store(true, Ordering::SeqCst);
            }
            Ok(())
        },
    )?;
    future.call_method1("add_done_callback", (on_done,))?;
    let delivered = std::sync::Mutex::new(Some(delivered));
    if ASYNC_CALLS.fetch_add(1, Ordering::SeqCst) >= MAX_ASYNC_CALLS {
        ASYNC_CALLS.fetch_sub(1, Ordering::SeqCst);
        return Err(coded(
            ErrorKind::Unavailable,
            "PY_BUSY",
            &format!("{MAX_ASYNC_CALLS} calls are already in flight"),
        ));
    }
    let (loop_ref, future_ref) = (event_loop.unbind(), future.clone().unbind());
    let spawned = std::thread::Builder::new().name("steward-async".into()).spawn(move || {
        let out = work(&abandoned);
        ASYNC_CALLS.fetch_sub(1, Ordering::SeqCst);
        Python::attach(|py| {
            let target = future_ref.clone_ref(py);
            let settle = pyo3::types::PyCFunction::new_closure(
                py,
                None,
                None,
                move |args: &Bound<'_, pyo3::types::PyTuple>,
                      _kw: Option<&Bound<'_, PyDict>>|
                      -> PyResult<()> {
                    let py = args.py();
                    let fut = target.bind(py);
                    if fut.call_method0("done")?.extract::<bool>()? {
                        return Ok(());
                    }
                    match &out {
                        Ok(json) => {
                            let v = py.import("json")?.call_method1("loads", (json,))?;
                            fut.call_method1("set_result", (v,))?;
                            let then = delivered
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .take();
                            if let Some(then) = then {
                                py.detach(then);
                            }
                        }
                        Err((_, code, _)) if *code == chat::END_OF_RUN => {
                            let e = pyo3::exceptions::PyStopAsyncIteration::new_err(());
                            fut.call_method1("set_exception", (e.value(py),))?;
                        }
                        Err((kind, code, message)) => {
                            let e = coded(*kind, code, message);
                            fut.call_method1("set_exception", (e.value(py),))?;
                        }
                    }
                    Ok(())
                },
            );
            if let Ok(f) = settle {
                // A loop that closed meanwhile has nobody waiting.
                let _ = loop_ref.bind(py).call_method1("call_soon_threadsafe", (f,));
            }
        });
    });
    if let Err(e) = spawned {
        ASYNC_CALLS.fetch_sub(1, Ordering::SeqCst);
        return Err(coded(ErrorKind::Unavailable, "PY_THREAD", &e.to_string()));
    }
    Ok(future)
}

/// One person's Steward home.
#[pyclass(name = "Steward", module = "steward._steward", frozen)]
struct PySteward {
    inner: std::sync::Arc<steward_core::Steward>,
    agent: chat::AgentSlot,
}

/// The background runner working on its own threads: `stop()` it, or use it as a context
/// manager (`with steward.run_background(): …`).
#[pyclass(name = "Background", module = "steward._steward", frozen)]
struct PyBackground {
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

/// The longest wait one `Subscription.next` call accepts, seconds.
const MAX_SUBSCRIPTION_WAIT_SECS: f64 = 60.0;
/// How long `for event in subscription` waits between checks for Ctrl-C.
const SUBSCRIPTION_SLICE: std::time::Duration = std::time::Duration::from_millis(500);

/// A live subscription to the protocol: the state first (`snapshot()`), then every approval,
/// journal, watch and delivery event and every status change, in order, each with the cursor a
/// client resumes from (`Steward.subscribe(after=cursor)`).
#[pyclass(name = "Subscription", module = "steward._steward", frozen)]
struct PySubscription {
    steward: std::sync::Arc<steward_core::Steward>,
    inner: std::sync::Mutex<steward_core::protocol::Subscription>,
    snapshot: Option<steward_core::protocol::ProtocolSnapshot>,
    buffered: std::sync::Mutex<std::collections::VecDeque<steward_core::protocol::Envelope>>,
    /// The cursor after the last event handed to Python.
    returned: std::sync::Mutex<String>,
}

impl PySubscription {
    fn returned(&self, events: &[steward_core::protocol::Envelope]) {
        if let Some(last) = events.last() {
            last.cursor.clone_into(
                &mut self.returned.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
            );
        }
    }

    fn wait(
        &self,
        py: Python<'_>,
        timeout: std::time::Duration,
    ) -> PyResult<Vec<steward_core::protocol::Envelope>> {
        py.detach(|| {
            let mut sub = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            sub.next(&self.steward, timeout, &|| false)
        })
        .map_err(|e| to_py(&e))
    }
}

#[pymethods]
impl PySubscription {
    /// The state at subscription (a dict), or None when resuming from a cursor.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.snapshot.as_ref().map(|s| to_python(py, s)).transpose()
    }

    /// The cursor after the last event returned: pass it to `Steward.subscribe(after=…)`.
    #[getter]
    fn cursor(&self) -> String {
        self.returned.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The events that arrive within `timeout` seconds (0..=60; the GIL is released while
    /// waiting): a list, empty when nothing happened.
    #[pyo3(signature = (timeout=5.0))]
    fn next<'py>(&self, py: Python<'py>, timeout: f64) -> PyResult<Bound<'py, PyAny>> {
        if !(0.0..=MAX_SUBSCRIPTION_WAIT_SECS).contains(&timeout) {
            return Err(coded(
                ErrorKind::InvalidInput,
                "PY_INVALID_ARGUMENT",
                &format!("timeout must be 0..={MAX_SUBSCRIPTION_WAIT_SECS} seconds"),
            ));
        }
        let mut out: Vec<steward_core::protocol::Envelope> = self
            .buffered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .drain(..)
            .collect();
        if out.is_empty() {
            out = self.wait(py, std::time::Duration::from_secs_f64(timeout))?;
        }
        self.returned(&out);
        to_python(py, &out)
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Blocks until the next event (Ctrl-C interrupts).
    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        loop {
            let next =
                self.buffered.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop_front();
            if let Some(e) = next {
                self.returned(std::slice::from_ref(&e));
                return to_python(py, &e);
            }
            let events = self.wait(py, SUBSCRIPTION_SLICE)?;
            self.buffered.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(events);
            py.check_signals()?;
        }
    }
}

/// A person's authority over approvals, minted explicitly by the notebook or script acting for
/// them (`Steward.human("ada")`); agent identities cannot get one.
#[pyclass(name = "Human", module = "steward._steward", frozen)]
struct PyHuman {
    steward: std::sync::Arc<steward_core::Steward>,
    who: steward_core::approval::HumanAuthority,
}

impl PyHuman {
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

/// Offline replay of recorded decisions (`Steward.replay`).
#[pyclass(name = "Replay", module = "steward._steward", frozen)]
struct PyReplay {
    steward: std::sync::Arc<steward_core::Steward>,
}

#[pymethods]
impl PyReplay {
    /// Replays recorded tool calls through the policy in force without executing, approving
    /// or recording anything. `records` is JSONL text or a list of dicts with `tool`, `input`,
    /// optional `expected` (`allow`, `gate`, `deny`, optionally `:level`) and
    /// `headless_grants`. Returns a `PolicyReplay` (`outcomes` one `ReplayOutcome` per
    /// record; `to_dict()` on either for a DataFrame).
    fn policy(
        &self,
        py: Python<'_>,
        records: &Bound<'_, PyAny>,
    ) -> PyResult<results::PolicyReplay> {
        let text = jsonl_of(py, records)?;
        py.detach(|| {
            steward_core::replay::parse_jsonl(&text)
                .and_then(|records| self.steward.replay_policy(&records))
        })
        .map(Into::into)
        .map_err(|e| to_py(&e))
    }
}

/// Evaluation over the real stores (`Steward.eval`).
#[pyclass(name = "Evaluation", module = "steward._steward", frozen)]
struct PyEval {
    steward: std::sync::Arc<steward_core::Steward>,
}

#[pymethods]
impl PyEval {
    /// Scores labeled queries with the real search: `cases` is JSONL text or a list of dicts
    /// with `request` (a search, as the API takes it), `expected` (Message-IDs), optional
    /// `kind` and `k`. Returns a `RetrievalEval`: `overall` and `by_kind` (`Scores`: recall,
    /// mrr, ndcg, cases) and `cases` (one `CaseResult` per case).
    fn retrieval(
        &self,
        py: Python<'_>,
        cases: &Bound<'_, PyAny>,
    ) -> PyResult<results::RetrievalEval> {
        let text = jsonl_of(py, cases)?;
        py.detach(|| {
            steward_core::eval::parse_cases(&text)
                .and_then(|cases| self.steward.eval_retrieval(&cases))
        })
        .map(Into::into)
        .map_err(|e| to_py(&e))
    }
}

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
    /// Opens (creating if needed) the home directory `home` with everything configured: every
    /// watch source and the embedder and chat models its `config.toml` names (what the
    /// `steward` command and the server open).
    #[new]
    fn new(py: Python<'_>, home: PathBuf) -> PyResult<Self> {
        let inner =
            py.detach(|| steward_connectors::home::open(Some(home))).map_err(|e| to_py(&e))?;
        Ok(Self { inner: std::sync::Arc::new(inner), agent: chat::AgentSlot::default() })
    }

    /// Subscribes to the live protocol: without `after`, the current state first
    /// (`snapshot()`); with the cursor of the last event applied, what happened since.
    #[pyo3(signature = (after=None))]
    fn subscribe(&self, py: Python<'_>, after: Option<&str>) -> PyResult<PySubscription> {
        let after = after
            .map(str::parse::<steward_core::protocol::Cursor>)
            .transpose()
            .map_err(|e| to_py(&e))?;
        let (snapshot, sub) =
            py.detach(|| self.inner.protocol_subscribe(after)).map_err(|e| to_py(&e))?;
        Ok(PySubscription {
            steward: std::sync::Arc::clone(&self.inner),
            returned: std::sync::Mutex::new(sub.cursor().to_string()),
            inner: std::sync::Mutex::new(sub),
            snapshot,
            buffered: std::sync::Mutex::new(std::collections::VecDeque::new()),
        })
    }

    /// Sends `text` to the agent in chat `chat` (a new chat when None) and returns the `Run`
    /// at once: iterate its events (`for` / `async for`), `wait()` for its result,
    /// `cancel()` it. A message sent while a turn runs in the chat joins that run. The first
    /// call opens the agent in this process (it then runs this home's turns and resumes chats
    /// as approvals are decided).
    #[pyo3(signature = (text, chat=None))]
    fn chat(&self, py: Python<'_>, text: &str, chat: Option<&str>) -> PyResult<chat::PyRun> {
        let agent = self.agent.get(py, &self.inner)?;
        chat::start(py, &agent, text, chat)
    }

    /// `chat(text, chat)` run to its end (at most `timeout` seconds, 0..=3600; `TimeoutError`
    /// names the run still going): the result (`run_id`, `chat_id`, `end_reason`,
    /// `approvals`, `text`, `usage`, `error`). For notebooks.
    #[pyo3(signature = (text, chat=None, timeout=300.0))]
    fn turn_sync<'py>(
        &self,
        py: Python<'py>,
        text: &str,
        chat: Option<&str>,
        timeout: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let timeout = chat::check_timeout(timeout)?;
        let agent = self.agent.get(py, &self.inner)?;
        let run = chat::start(py, &agent, text, chat)?;
        run.wait_result(py, timeout)?.ok_or_else(|| {
            pyo3::exceptions::PyTimeoutError::new_err(format!(
                "run {} of chat {} is still running",
                run.run_id(),
                run.chat_id()
            ))
        })
    }

    /// Run `run_id`, to follow from its first event.
    fn run(&self, py: Python<'_>, run_id: &str) -> PyResult<chat::PyRun> {
        let agent = self.agent.get(py, &self.inner)?;
        chat::follow(py, &agent, run_id)
    }

    /// The run of chat `chat` that runs now, else its newest (None before its first turn): how
    /// to follow a chat an approval decision resumed.
    fn chat_run(&self, py: Python<'_>, chat: &str) -> PyResult<Option<chat::PyRun>> {
        let agent = self.agent.get(py, &self.inner)?;
        let run = py.detach(|| agent.latest_run(chat)).map_err(|e| to_py(&e))?;
        Ok(run.map(|r| chat::PyRun::new(&agent, agent.follow(&r, chat, 0))))
    }

    /// Asks run `run_id` to stop at its next safe point; False when it is not running.
    fn cancel_run(&self, py: Python<'_>, run_id: &str) -> PyResult<bool> {
        Ok(self.agent.get(py, &self.inner)?.cancel(run_id))
    }

    /// Creates an empty chat.
    fn create_chat<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let agent = self.agent.get(py, &self.inner)?;
        let c = py.detach(|| agent.create_chat()).map_err(|e| to_py(&e))?;
        to_python(py, &c)
    }

    /// Chats, most recently active first (`limit` 1..=100).
    #[pyo3(signature = (offset=0, limit=50))]
    fn chats<'py>(
        &self,
        py: Python<'py>,
        offset: usize,
        limit: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let agent = self.agent.get(py, &self.inner)?;
        let c = py.detach(|| agent.list_chats(offset, limit)).map_err(|e| to_py(&e))?;
        to_python(py, &c)
    }

    /// Chat `id`'s summary.
    fn get_chat<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Bound<'py, PyAny>> {
        let agent = self.agent.get(py, &self.inner)?;
        let c = py.detach(|| agent.chat(id)).map_err(|e| to_py(&e))?;
        to_python(py, &c)
    }

    /// Chat `chat`'s messages after message `after`, oldest first (`limit` 1..=200).
    #[pyo3(signature = (chat, after=0, limit=200))]
    fn chat_messages<'py>(
        &self,
        py: Python<'py>,
        chat: &str,
        after: i64,
        limit: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let agent = self.agent.get(py, &self.inner)?;
        let m = py.detach(|| agent.messages(chat, after, limit)).map_err(|e| to_py(&e))?;
        to_python(py, &m)
    }

    /// Chat `chat`'s tool calls with their decisions and results.
    fn chat_tool_calls<'py>(&self, py: Python<'py>, chat: &str) -> PyResult<Bound<'py, PyAny>> {
        let agent = self.agent.get(py, &self.inner)?;
        let c = py.detach(|| agent.tool_calls(chat)).map_err(|e| to_py(&e))?;
        to_python(py, &c)
    }

    /// Sets chat `id`'s title; returns its summary.
    fn rename_chat<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        title: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let agent = self.agent.get(py, &self.inner)?;
        let c = py.detach(|| agent.rename_chat(id, title)).map_err(|e| to_py(&e))?;
        to_python(py, &c)
    }

    /// Deletes chat `id` (its content is purged).
    fn delete_chat(&self, py: Python<'_>, id: &str) -> PyResult<()> {
        let agent = self.agent.get(py, &self.inner)?;
        py.detach(|| agent.delete_chat(id)).map_err(|e| to_py(&e))
    }

    /// Resolves the calls whose approvals a person decided (or that expired) into their chats
    /// and resumes them; returns how many. The agent's watcher does this by itself; call it to
    /// not wait for it.
    fn resolve_decided(&self, py: Python<'_>) -> PyResult<usize> {
        let agent = self.agent.get(py, &self.inner)?;
        py.detach(|| agent.resolve_decided()).map_err(|e| to_py(&e))
    }

    /// The authority of `person` over approvals (refused for an agent identity).
    fn human(&self, person: &str) -> PyResult<PyHuman> {
        let who = self.inner.human(person).map_err(|e| to_py(&e))?;
        Ok(PyHuman { steward: std::sync::Arc::clone(&self.inner), who })
    }

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

    /// Offline replay: `steward.replay.policy(records)`.
    #[getter]
    fn replay(&self) -> PyReplay {
        PyReplay { steward: std::sync::Arc::clone(&self.inner) }
    }

    /// Evaluation: `steward.eval.retrieval(cases)`.
    #[getter]
    fn eval(&self) -> PyEval {
        PyEval { steward: std::sync::Arc::clone(&self.inner) }
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

    /// The policy in force (`current`), the tools it governs (`tools`, with effect and default
    /// level) and up to `history` earlier versions, newest first, as a dict.
    #[pyo3(signature = (history=0))]
    fn policy<'py>(&self, py: Python<'py>, history: usize) -> PyResult<Bound<'py, PyAny>> {
        let o = py.detach(|| self.inner.policy_overview(history)).map_err(|e| to_py(&e))?;
        to_python(py, &o)
    }

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
    /// `by_action`, `by_model`, `by_day`.
    #[pyo3(signature = (since="7d"))]
    fn usage<'py>(&self, py: Python<'py>, since: &str) -> PyResult<Bound<'py, PyAny>> {
        let now = steward_core::time::now_secs();
        let r = py.detach(|| self.inner.usage_report(since, now)).map_err(|e| to_py(&e))?;
        to_python(py, &r)
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

/// Writes the deterministic demo mailbox (a Maildir of `messages` realistic messages, with
/// label copies and a few malformed files) under `path`; returns what was written.
#[pyfunction]
#[pyo3(signature = (path, messages=300))]
fn demo_maildir<'py>(
    py: Python<'py>,
    path: PathBuf,
    messages: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let report = py
        .detach(|| generate_maildir(&path, &DemoOptions::new(messages)))
        .map_err(|e| to_py(&e))?;
    to_python(py, &report)
}

/// The library version.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _steward(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySteward>()?;
    m.add_class::<PyBackground>()?;
    m.add_class::<PyHuman>()?;
    m.add_class::<PySubscription>()?;
    m.add_class::<chat::PyRun>()?;
    m.add_class::<PyReplay>()?;
    m.add_class::<PyEval>()?;
    m.add_class::<results::PolicyReplay>()?;
    m.add_class::<results::ReplayOutcome>()?;
    m.add_class::<results::RetrievalEval>()?;
    m.add_class::<results::Scores>()?;
    m.add_class::<results::CaseResult>()?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(demo_maildir, m)?)?;
    let py = m.py();
    m.add("StewardError", py.get_type::<StewardError>())?;
    m.add("InvalidInputError", py.get_type::<InvalidInputError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("UnavailableError", py.get_type::<UnavailableError>())?;
    m.add("DeniedError", py.get_type::<DeniedError>())?;
    m.add("ConflictError", py.get_type::<ConflictError>())?;
    m.add("CorruptError", py.get_type::<CorruptError>())?;
    // The short names of the error hierarchy, the same classes.
    m.add("InvalidInput", py.get_type::<InvalidInputError>())?;
    m.add("NotFound", py.get_type::<NotFoundError>())?;
    m.add("Unavailable", py.get_type::<UnavailableError>())?;
    m.add("Denied", py.get_type::<DeniedError>())?;
    m.add("Conflict", py.get_type::<ConflictError>())?;
    m.add("Corrupt", py.get_type::<CorruptError>())?;
    Ok(())
}
