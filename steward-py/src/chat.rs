//! Chat with the agent from Python: `Steward.chat(text)` starts a turn and returns its `Run`
//! (iterate its events with `for` or `async for`, `wait()` for its result, `cancel()` it);
//! `Steward.turn_sync(text)` runs one turn to its end for a notebook. The turn runner, its
//! lanes, bounds and approval pauses are the core's (`steward_core::agent`); this module only
//! converts.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use pyo3::prelude::*;
use steward_core::{
    ErrorKind, StewardError as _,
    agent::{Agent, RunFollower},
};

use crate::*;

/// The longest `timeout` one wait accepts, seconds (an hour: the longest turn deadline).
pub(crate) const MAX_TURN_WAIT_SECS: f64 = 3600.0;
/// How long a blocking wait runs between checks for Ctrl-C.
const SLICE: Duration = Duration::from_millis(500);
/// The error code an `async for` over a finished run ends with (never reaches Python).
pub(crate) const END_OF_RUN: &str = "PY_END_OF_RUN";

pub(crate) fn check_timeout(timeout: f64) -> PyResult<Duration> {
    if !(0.0..=MAX_TURN_WAIT_SECS).contains(&timeout) {
        return Err(coded(
            ErrorKind::InvalidInput,
            "PY_INVALID_ARGUMENT",
            &format!("timeout must be 0..={MAX_TURN_WAIT_SECS} seconds"),
        ));
    }
    Ok(Duration::from_secs_f64(timeout))
}

/// One turn of a chat (`Steward.chat`, `Steward.run`): its events in order, then its result.
#[pyclass(name = "Run", module = "steward._steward", frozen)]
pub(crate) struct PyRun {
    agent: Agent,
    run: String,
    chat: String,
    follower: Arc<Mutex<RunFollower>>,
}

impl PyRun {
    pub(crate) fn new(agent: &Agent, follower: RunFollower) -> Self {
        let (run, chat) = (follower.run_id().to_owned(), follower.chat_id().to_owned());
        Self { agent: agent.clone(), run, chat, follower: Arc::new(Mutex::new(follower)) }
    }

    /// Blocks (GIL released, Ctrl-C checked every slice) until the run ends or `timeout`.
    pub(crate) fn wait_result<'py>(
        &self,
        py: Python<'py>,
        timeout: Duration,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let deadline = Instant::now() + timeout;
        let mut run = self.run.clone();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let got =
                py.detach(|| self.agent.wait(&run, left.min(SLICE))).map_err(|e| to_py(&e))?;
            if let Some(result) = got {
                match &result.next_run {
                    // It ended without answering a message it was given: the next run does.
                    Some(next) => {
                        run.clone_from(next);
                        continue;
                    }
                    None => return to_python(py, &result).map(Some),
                }
            }
            if left <= SLICE {
                return Ok(None);
            }
            py.check_signals()?;
        }
    }
}

#[pymethods]
impl PyRun {
    /// The run's id.
    #[getter]
    pub(crate) fn run_id(&self) -> &str {
        &self.run
    }

    /// The chat it belongs to.
    #[getter]
    pub(crate) fn chat_id(&self) -> &str {
        &self.chat
    }

    /// Waits up to `timeout` seconds (0..=3600; the GIL is released) for the run to end:
    /// its result (`run_id`, `chat_id`, `end_reason`, `approvals`, `text`, `usage`, `error`),
    /// or None while it still runs.
    #[pyo3(signature = (timeout=60.0))]
    fn wait<'py>(&self, py: Python<'py>, timeout: f64) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.wait_result(py, check_timeout(timeout)?)
    }

    /// The result once the run has ended (`RUN_RUNNING`, a conflict, before).
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let r = py.detach(|| self.agent.result(&self.run)).map_err(|e| to_py(&e))?;
        to_python(py, &r)
    }

    /// The run as recorded now (status, counters, times).
    fn record<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let r = py.detach(|| self.agent.turn(&self.run)).map_err(|e| to_py(&e))?;
        to_python(py, &r)
    }

    /// Asks the run to stop at its next safe point; False when it has already ended.
    fn cancel(&self) -> bool {
        self.agent.cancel(&self.run)
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next event (`seq`, `run_id`, `chat_id`, `at`, `event`); the iteration stops after
    /// the run's `turn_ended`. Blocks with the GIL released; Ctrl-C interrupts.
    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        loop {
            let (event, done) = py
                .detach(|| {
                    let mut f = self.follower.lock().unwrap_or_else(PoisonError::into_inner);
                    if f.done() { Ok((None, true)) } else { f.next(SLICE).map(|e| (e, false)) }
                })
                .map_err(|e| to_py(&e))?;
            match event {
                Some(e) => return to_python(py, &e).map(Some),
                None if done => return Ok(None),
                None => py.check_signals()?,
            }
        }
    }

    fn __aiter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// `async for event in run`: the same events, awaited on a thread of their own.
    fn __anext__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.follower.lock().unwrap_or_else(PoisonError::into_inner).done() {
            return Err(pyo3::exceptions::PyStopAsyncIteration::new_err(()));
        }
        // The event is only looked at on the worker; it is taken once the future has it, so
        // a cancelled `await` (a timeout around `anext`) loses nothing, and its worker gives
        // up within a slice instead of holding an async slot until the next event.
        let (follower, taker) = (Arc::clone(&self.follower), Arc::clone(&self.follower));
        let seen = Arc::new(Mutex::new(None::<i64>));
        let seen_by_taker = Arc::clone(&seen);
        awaitable_with(
            py,
            move |abandoned| {
                loop {
                    if abandoned.load(std::sync::atomic::Ordering::SeqCst) {
                        return Err((ErrorKind::Internal, "PY_ABANDONED", String::new()));
                    }
                    let mut f = follower.lock().unwrap_or_else(PoisonError::into_inner);
                    if f.done() {
                        return Err((ErrorKind::Internal, END_OF_RUN, String::new()));
                    }
                    match f.peek(SLICE) {
                        Ok(Some(e)) => {
                            *seen.lock().unwrap_or_else(PoisonError::into_inner) = Some(e.seq);
                            return serde_json::to_string(&e)
                                .map_err(|e| (ErrorKind::Internal, "PY_SERIALIZE", e.to_string()));
                        }
                        Ok(None) => {}
                        Err(e) => return Err((e.kind(), e.code(), e.to_string())),
                    }
                }
            },
            move || {
                if let Some(seq) = *seen_by_taker.lock().unwrap_or_else(PoisonError::into_inner) {
                    taker.lock().unwrap_or_else(PoisonError::into_inner).take(seq);
                }
            },
        )
    }

    fn __repr__(&self) -> String {
        format!("Run(run_id={:?}, chat_id={:?})", self.run, self.chat)
    }
}

/// The agent of a Python `Steward`, opened on first use: it runs the home's turns here
/// (unless another process does) and resumes chats as approvals are decided.
#[derive(Default)]
pub(crate) struct AgentSlot(Mutex<Option<Agent>>);

impl AgentSlot {
    pub(crate) fn get(
        &self,
        py: Python<'_>,
        steward: &Arc<steward_core::Steward>,
    ) -> PyResult<Agent> {
        // The lock is taken without the GIL: a thread that holds the GIL never waits on it
        // while the thread opening the agent waits for the GIL.
        py.detach(|| {
            let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(a) = slot.as_ref() {
                return Ok(a.clone());
            }
            let agent = steward_connectors::home::agent(Arc::clone(steward))
                .map_err(|e| Deferred::of(&e))?;
            if agent.runs_turns() && agent.config().resume_on_decision {
                agent.watch_approvals().map_err(|e| {
                    Deferred(
                        ErrorKind::Unavailable,
                        "PY_THREAD".into(),
                        format!("approval watcher: {e}"),
                    )
                })?;
            }
            *slot = Some(agent.clone());
            Ok(agent)
        })
        .map_err(Deferred::raise)
    }
}

impl Drop for AgentSlot {
    fn drop(&mut self) {
        if let Some(a) = self.0.get_mut().unwrap_or_else(PoisonError::into_inner).take() {
            a.shutdown();
        }
    }
}

/// Sends `text` to `chat` (a new chat when `None`) and returns the run to follow.
pub(crate) fn start(
    py: Python<'_>,
    agent: &Agent,
    text: &str,
    chat: Option<&str>,
) -> PyResult<PyRun> {
    let sent = py.detach(|| agent.send(chat, text)).map_err(|e| to_py(&e))?;
    Ok(PyRun::new(agent, agent.follow(&sent.run_id, &sent.chat_id, sent.cursor)))
}

/// A recorded run to follow from its first event.
pub(crate) fn follow(py: Python<'_>, agent: &Agent, run: &str) -> PyResult<PyRun> {
    let f = py.detach(|| agent.follow_run(run)).map_err(|e| to_py(&e))?;
    Ok(PyRun::new(agent, f))
}

#[pymethods]
impl PySteward {
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
}
