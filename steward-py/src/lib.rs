//! # steward-py
//!
//! The PyO3 module `steward._steward`. It converts types and errors and adds nothing: every
//! method is one core call. Errors become a `StewardError` subclass chosen by the error's kind,
//! carrying `.code` and `.kind`. Core calls run with the GIL released.

mod chat;
mod docs;
mod mail;
mod memory;
mod pim;
mod records;
mod results;
mod system;
mod watches;

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
    m.add_class::<system::PyBackground>()?;
    m.add_class::<records::PyHuman>()?;
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
