//! Chat with the agent from Python: `Steward.chat(text)` starts a turn and returns its `Run`
//! (iterate its events with `for` or `async for`, `wait()` for its result, `cancel()` it);
//! `Steward.turn_sync(text)` runs one turn to its end for a notebook. The turn runner, its
//! lanes, bounds and approval pauses are the core's (`steward_core::agent`); this module only
//! converts.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use pyo3::prelude::*;
use steward_core::{
    ErrorKind, StewardError as _,
    agent::{Agent, AgentError, EventRecord, TurnEvent},
};

use crate::{Deferred, awaitable, coded, to_py, to_python};

/// The longest `timeout` one wait accepts, seconds (an hour: the longest turn deadline).
pub(crate) const MAX_TURN_WAIT_SECS: f64 = 3600.0;
/// How long a blocking wait runs between checks for Ctrl-C.
const SLICE: Duration = Duration::from_millis(500);
/// Events read from the store at once.
const EVENT_BATCH: usize = 100;
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

/// Where a run's reader is.
struct Position {
    cursor: i64,
    buffered: VecDeque<EventRecord>,
    done: bool,
}

enum Next {
    Event(Box<EventRecord>),
    Nothing,
    Done,
}

/// One turn of a chat (`Steward.chat`, `Steward.run`): its events in order, then its result.
#[pyclass(name = "Run", module = "steward._steward", frozen)]
pub(crate) struct PyRun {
    agent: Agent,
    run: String,
    chat: String,
    position: Arc<Mutex<Position>>,
}

/// The next event of `run` (read from the store after the cursor, waiting up to `wait`).
fn next_event(
    agent: &Agent,
    run: &str,
    chat: &str,
    position: &Mutex<Position>,
    wait: Duration,
) -> Result<Next, AgentError> {
    let mut p = position.lock().unwrap_or_else(PoisonError::into_inner);
    if p.buffered.is_empty() && !p.done {
        let events = agent.wait_events(Some(chat), p.cursor, EVENT_BATCH, wait)?;
        if let Some(last) = events.last() {
            p.cursor = last.seq;
        }
        p.buffered.extend(events.into_iter().filter(|e| e.run_id == run));
    }
    match p.buffered.pop_front() {
        Some(e) => {
            if matches!(e.event, TurnEvent::TurnEnded { .. }) {
                p.done = true;
                p.buffered.clear();
            }
            Ok(Next::Event(Box::new(e)))
        }
        None if p.done => Ok(Next::Done),
        None => Ok(Next::Nothing),
    }
}

impl PyRun {
    pub(crate) fn new(agent: Agent, run: String, chat: String, cursor: i64) -> Self {
        let position =
            Arc::new(Mutex::new(Position { cursor, buffered: VecDeque::new(), done: false }));
        Self { agent, run, chat, position }
    }

    /// Blocks (GIL released, Ctrl-C checked every slice) until the run ends or `timeout`.
    pub(crate) fn wait_result<'py>(
        &self,
        py: Python<'py>,
        timeout: Duration,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let got =
                py.detach(|| self.agent.wait(&self.run, left.min(SLICE))).map_err(|e| to_py(&e))?;
            if let Some(result) = got {
                return to_python(py, &result).map(Some);
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
            let next = py
                .detach(|| next_event(&self.agent, &self.run, &self.chat, &self.position, SLICE))
                .map_err(|e| to_py(&e))?;
            match next {
                Next::Event(e) => return to_python(py, &*e).map(Some),
                Next::Done => return Ok(None),
                Next::Nothing => py.check_signals()?,
            }
        }
    }

    fn __aiter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// `async for event in run`: the same events, awaited on a thread of their own.
    fn __anext__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.position.lock().unwrap_or_else(PoisonError::into_inner).done {
            return Err(pyo3::exceptions::PyStopAsyncIteration::new_err(()));
        }
        let (agent, run, chat) = (self.agent.clone(), self.run.clone(), self.chat.clone());
        let position = Arc::clone(&self.position);
        // Every run ends with `turn_ended` (a turn a dead process left is ended when its home
        // is opened again); a run silent for longer than its deadline is given up on.
        let silent = self.agent.config().deadline + Duration::from_secs(60);
        awaitable(py, move || {
            let started = Instant::now();
            loop {
                if started.elapsed() > silent {
                    return Err((
                        ErrorKind::Unavailable,
                        "RUN_SILENT",
                        format!("run {run} sent no event for {} s", silent.as_secs()),
                    ));
                }
                match next_event(&agent, &run, &chat, &position, SLICE) {
                    Ok(Next::Event(e)) => {
                        return serde_json::to_string(&*e)
                            .map_err(|e| (ErrorKind::Internal, "PY_SERIALIZE", e.to_string()));
                    }
                    Ok(Next::Done) => {
                        return Err((ErrorKind::Internal, END_OF_RUN, String::new()));
                    }
                    Ok(Next::Nothing) => {}
                    Err(e) => return Err((e.kind(), e.code(), e.to_string())),
                }
            }
        })
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

/// Starts a turn in `chat` (a new chat when `None`) and returns it to follow.
pub(crate) fn start(
    py: Python<'_>,
    agent: &Agent,
    text: &str,
    chat: Option<&str>,
) -> PyResult<PyRun> {
    let (run, chat, cursor) = py
        .detach(|| -> Result<_, AgentError> {
            let chat = match chat {
                Some(c) => agent.chat(c)?.id,
                None => {
                    // A message that cannot run leaves no empty chat behind.
                    agent.ready()?;
                    agent.create_chat()?.id
                }
            };
            let cursor = agent.event_position(Some(&chat))?;
            Ok((agent.start_turn(&chat, text)?, chat, cursor))
        })
        .map_err(|e| to_py(&e))?;
    Ok(PyRun::new(agent.clone(), run, chat, cursor))
}

/// A run to follow from its first event.
pub(crate) fn follow(py: Python<'_>, agent: &Agent, run: &str) -> PyResult<PyRun> {
    let chat = py.detach(|| agent.turn(run)).map_err(|e| to_py(&e))?.chat_id;
    Ok(PyRun::new(agent.clone(), run.to_owned(), chat, 0))
}
