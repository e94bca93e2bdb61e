//! The background runner: the one scheduler every frontend runs (the server while it serves,
//! the launcher while it is open, a notebook in a `with` block, cron through
//! `steward jobs run --once`).
//!
//! Named jobs ([`JobName`]), each with an interval and a time budget from `config.toml`
//! (`[jobs.<name>]`: `interval_secs`, `budget_secs`, `enabled`) and the environment
//! (`STEWARD_JOB_<NAME>_INTERVAL_SECS`, `…_BUDGET_SECS`, `…_ENABLED`, the name upper-cased with
//! `-` as `_`), which wins. The scheduling rules are in [`schedule`]: single flight per job,
//! one run on wake for a missed one (never a burst), backoff on failure, a job may ask to run
//! sooner and may wake another. Each run gets a cancel flag that the runner raises when the
//! run overruns its budget; every job stops at its next safe point when it is raised
//! (between sync batches, between embedding batches, at the poll deadline). Every run is
//! recorded in `steward.db` (`jobs`), which the system status, the live feed and
//! `steward jobs status` read.
//!
//! What the jobs act on comes in [`Services`], which the frontends get from
//! `steward-connectors` (configured mail sources, the SMTP transport); the notification
//! [`FeedDelivery`] and the granted-action [`OutboxExecutor`] are the core's own.

mod board;
mod jobs;
pub mod schedule;

use std::{
    collections::BTreeMap,
    path::Path,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    time::{Duration, Instant},
};

pub use board::{JobBoard, JobRecord};
pub use jobs::{FeedDelivery, OutboxExecutor};
use serde::{Deserialize, Serialize};

use crate::{
    Steward,
    error::{ErrorKind, StewardError},
    mirror::MailSource,
    outbox::{MailTransport, Sender},
    store::StoreError,
    time::now_secs,
    watch::Delivery,
};

/// The longest a failing job waits before it is tried again, seconds.
/// Fixed (not a setting).
pub const MAX_BACKOFF_SECS: i64 = 3_600;
/// The shortest interval a job may be configured with, seconds.
/// Fixed (not a setting).
pub const MIN_INTERVAL_SECS: i64 = 1;
/// The longest interval a job may be configured with, seconds (a day).
/// Fixed (not a setting).
pub const MAX_INTERVAL_SECS: i64 = 86_400;
/// The longest time budget a run may be given, seconds.
/// The upper end of `[jobs.<name>] budget_secs`.
pub const MAX_BUDGET_SECS: i64 = 3_600;
/// The runner re-reads the wall clock at least this often while idle, seconds (a machine
/// that slept notices its missed runs this long after waking at the latest).
/// Fixed (not a setting).
pub const IDLE_CHECK_SECS: u64 = 30;
/// Snapshot workers per watch source in one poll cycle (default of `[jobs]
/// watch_poll_per_source`).
pub const WATCH_POLL_PER_SOURCE: usize = 4;
/// The upper end of `[jobs] watch_poll_per_source`.
pub const MAX_WATCH_POLL_PER_SOURCE: usize = 32;
/// Messages one embedding run sends at most (default of `[jobs] embed_pass_items`), so a run
/// ends and reports regularly; a backlog is drained by the next runs, which come sooner.
pub const EMBED_PASS_ITEMS: usize = 512;
/// The upper end of `[jobs] embed_pass_items`.
pub const MAX_EMBED_PASS_ITEMS: usize = 10_000;
/// How long stopping the runner waits for runs in flight to reach their next safe point,
/// seconds (default of `[jobs] stop_grace_secs`).
pub const STOP_GRACE_SECS: u64 = 10;
/// Characters kept of a run's error.
/// Fixed (not a setting).
pub const MAX_JOB_ERROR_CHARS: usize = 500;

/// The jobs, in the order `steward jobs run --once` runs them.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum JobName {
    /// Reconcile every configured mail source (`[[mail.sources]]`) into the mirror.
    MailReconcile,
    /// Embed mirrored mail that has no vector yet (with an embedder configured).
    MailEmbed,
    /// Poll the active watches within the cycle's time budget.
    WatchPoll,
    /// Run the granted actions of pending watch events, then deliver them as notifications.
    WatchDeliver,
    /// Send the scheduled mail that is due (with SMTP configured).
    SendDue,
    /// Confirm journaled writes against the mirror (never re-sends).
    ConfirmWrites,
    /// Expire approval requests nobody answered in time (expiry is a denial).
    ApprovalExpiry,
    /// Bring the configured calendars and address books into their stores.
    PimSync,
    /// Walk the shared folders (`[files] roots`) into `files.db`.
    FilesIndex,
    /// Read the memory note files again (a person's edits), expire old proposals, embed notes.
    MemoryReconcile,
    /// Propose durable facts from recently active mail threads (with a chat model configured).
    MemoryPromote,
}

impl JobName {
    /// Every job.
    pub const ALL: [Self; 11] = [
        Self::MailReconcile,
        Self::MailEmbed,
        Self::WatchPoll,
        Self::WatchDeliver,
        Self::SendDue,
        Self::ConfirmWrites,
        Self::ApprovalExpiry,
        Self::PimSync,
        Self::FilesIndex,
        Self::MemoryReconcile,
        Self::MemoryPromote,
    ];

    /// The name in config, on the command line and in the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MailReconcile => "mail-reconcile",
            Self::MailEmbed => "mail-embed",
            Self::WatchPoll => "watch-poll",
            Self::WatchDeliver => "watch-deliver",
            Self::SendDue => "send-due",
            Self::ConfirmWrites => "confirm-writes",
            Self::ApprovalExpiry => "approval-expiry",
            Self::PimSync => "pim-sync",
            Self::FilesIndex => "files-index",
            Self::MemoryReconcile => "memory-reconcile",
            Self::MemoryPromote => "memory-promote",
        }
    }

    /// The job named `name`.
    pub fn parse(name: &str) -> Result<Self, RunnerError> {
        Self::ALL.into_iter().find(|j| j.as_str() == name).ok_or_else(|| {
            RunnerError::UnknownJob(format!(
                "{name:?} (jobs: {})",
                Self::ALL.map(Self::as_str).join(", ")
            ))
        })
    }

    /// The reference configuration (`steward-design.txt`, "Background Jobs").
    pub fn default_config(self) -> JobConfig {
        let (interval_secs, budget_secs) = match self {
            Self::MailReconcile => (600, 600),
            Self::MailEmbed => (900, 300),
            Self::WatchPoll => (i64::try_from(crate::watch::DEFAULT_POLL_SECS).unwrap_or(45), 30),
            Self::WatchDeliver => (30, 60),
            Self::SendDue => (120, 120),
            Self::ConfirmWrites => (600, 120),
            Self::ApprovalExpiry => (60, 30),
            Self::PimSync => (900, 300),
            Self::FilesIndex => (1800, 300),
            Self::MemoryReconcile => (300, 60),
            Self::MemoryPromote => (1800, 600),
        };
        JobConfig { enabled: true, interval_secs, budget_secs }
    }

    fn env_prefix(self) -> String {
        format!("STEWARD_JOB_{}_", self.as_str().to_ascii_uppercase().replace('-', "_"))
    }
}

impl std::fmt::Display for JobName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one job is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct JobConfig {
    /// Whether the runner runs it at all.
    pub enabled: bool,
    /// Seconds from the end of one run to the start of the next.
    pub interval_secs: i64,
    /// Seconds a run may take before it is asked to stop at its next safe point.
    pub budget_secs: i64,
}

/// The runner's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerConfig {
    /// Every job's.
    pub jobs: BTreeMap<JobName, JobConfig>,
    /// See [`WATCH_POLL_PER_SOURCE`].
    pub watch_poll_per_source: usize,
    /// See [`EMBED_PASS_ITEMS`].
    pub embed_pass_items: usize,
    /// See [`STOP_GRACE_SECS`].
    pub stop_grace_secs: u64,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        Self {
            jobs: JobName::ALL.into_iter().map(|j| (j, j.default_config())).collect(),
            watch_poll_per_source: WATCH_POLL_PER_SOURCE,
            embed_pass_items: EMBED_PASS_ITEMS,
            stop_grace_secs: STOP_GRACE_SECS,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobSection {
    enabled: Option<bool>,
    interval_secs: Option<i64>,
    budget_secs: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    jobs: BTreeMap<String, toml::Value>,
}

impl RunnerConfig {
    /// Reads `[jobs]` from `<home>/config.toml`, then the environment, which wins.
    pub fn load(home: &Path) -> Result<Self, RunnerError> {
        Self::load_with(home, &|k| std::env::var(k).ok())
    }

    /// [`RunnerConfig::load`] with the environment given as a lookup (tests, embedders).
    pub fn load_with(
        home: &Path,
        vars: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, RunnerError> {
        let path = home.join(crate::embed::CONFIG_FILE);
        let bad = |what: String| RunnerError::Config(format!("{}: {what}", path.display()));
        let file: ConfigFile = match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text).map_err(|e| bad(e.to_string()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ConfigFile::default(),
            Err(e) => return Err(bad(e.to_string())),
        };
        let mut c = Self::default();
        let count = |key: &str, v: &toml::Value, max: usize| -> Result<usize, RunnerError> {
            v.as_integer()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| bad(format!("[jobs] {key} must be 1..={max}")))
        };
        for (key, value) in &file.jobs {
            match key.as_str() {
                "watch_poll_per_source" => {
                    c.watch_poll_per_source = count(key, value, MAX_WATCH_POLL_PER_SOURCE)?;
                }
                "embed_pass_items" => {
                    c.embed_pass_items = count(key, value, MAX_EMBED_PASS_ITEMS)?;
                }
                "stop_grace_secs" => {
                    c.stop_grace_secs = u64::try_from(count(key, value, 600)?).unwrap_or(600);
                }
                name => {
                    let job =
                        JobName::parse(name).map_err(|e| bad(format!("[jobs.{name}]: {e}")))?;
                    let section: JobSection =
                        value.clone().try_into().map_err(|e| bad(format!("[jobs.{name}]: {e}")))?;
                    let entry = c.jobs.entry(job).or_insert_with(|| job.default_config());
                    if let Some(e) = section.enabled {
                        entry.enabled = e;
                    }
                    if let Some(i) = section.interval_secs {
                        entry.interval_secs = i;
                    }
                    if let Some(b) = section.budget_secs {
                        entry.budget_secs = b;
                    }
                }
            }
        }
        for job in JobName::ALL {
            let prefix = job.env_prefix();
            let env = |k: &str| vars(&format!("{prefix}{k}")).map(|v| v.trim().to_owned());
            let entry = c.jobs.entry(job).or_insert_with(|| job.default_config());
            let number = |k: &str, v: String| {
                v.parse::<i64>().map_err(|_| RunnerError::Config(format!("{prefix}{k}={v:?}")))
            };
            if let Some(v) = env("INTERVAL_SECS") {
                entry.interval_secs = number("INTERVAL_SECS", v)?;
            }
            if let Some(v) = env("BUDGET_SECS") {
                entry.budget_secs = number("BUDGET_SECS", v)?;
            }
            if let Some(v) = env("ENABLED") {
                entry.enabled = match v.to_ascii_lowercase().as_str() {
                    "true" | "1" | "yes" | "on" => true,
                    "false" | "0" | "no" | "off" => false,
                    _ => return Err(RunnerError::Config(format!("{prefix}ENABLED={v:?}"))),
                };
            }
        }
        c.validate()?;
        Ok(c)
    }

    /// Every interval and budget in range.
    pub fn validate(&self) -> Result<(), RunnerError> {
        for (job, c) in &self.jobs {
            if !(MIN_INTERVAL_SECS..=MAX_INTERVAL_SECS).contains(&c.interval_secs) {
                return Err(RunnerError::Config(format!(
                    "{job}: interval_secs {} is out of range ({MIN_INTERVAL_SECS}..={MAX_INTERVAL_SECS})",
                    c.interval_secs
                )));
            }
            if !(1..=MAX_BUDGET_SECS).contains(&c.budget_secs) {
                return Err(RunnerError::Config(format!(
                    "{job}: budget_secs {} is out of range (1..={MAX_BUDGET_SECS})",
                    c.budget_secs
                )));
            }
        }
        if !(1..=MAX_WATCH_POLL_PER_SOURCE).contains(&self.watch_poll_per_source) {
            return Err(RunnerError::Config("watch_poll_per_source out of range".into()));
        }
        if !(1..=MAX_EMBED_PASS_ITEMS).contains(&self.embed_pass_items) {
            return Err(RunnerError::Config("embed_pass_items out of range".into()));
        }
        Ok(())
    }
}

/// Errors of the runner itself (a job's failure is its report, never this).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunnerError {
    /// `[jobs]` or a `STEWARD_JOB_*` variable cannot be used.
    #[error("jobs configuration: {0}")]
    Config(String),
    /// No such job.
    #[error("no job named {0}")]
    UnknownJob(String),
    /// The job cannot run here (not configured); the reason says what is missing.
    #[error("{job} cannot run: {why}")]
    Unavailable {
        /// The job.
        job: JobName,
        /// What is missing.
        why: String,
    },
    /// The runner's thread could not be started.
    #[error("cannot start the runner: {0}")]
    Spawn(String),
    /// The jobs table failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl StewardError for RunnerError {
    fn code(&self) -> &'static str {
        match self {
            Self::Config(_) => "JOBS_CONFIG",
            Self::UnknownJob(_) => "JOBS_UNKNOWN_JOB",
            Self::Unavailable { .. } => "JOBS_UNAVAILABLE",
            Self::Spawn(_) => "JOBS_SPAWN_FAILED",
            Self::Store(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Config(_) | Self::UnknownJob(_) => ErrorKind::InvalidInput,
            Self::Unavailable { .. } | Self::Spawn(_) => ErrorKind::Unavailable,
            Self::Store(e) => e.kind(),
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobOutcome {
    /// It did its work.
    Ok,
    /// It failed; it is tried again after a backoff.
    Failed,
    /// It overran its budget and stopped at a safe point; what it did stays, the next run
    /// goes on.
    OverBudget,
}

impl JobOutcome {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Failed => "failed",
            Self::OverBudget => "over_budget",
        }
    }

    /// The outcome stored as `s`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ok" => Some(Self::Ok),
            "failed" => Some(Self::Failed),
            "over_budget" => Some(Self::OverBudget),
            _ => None,
        }
    }
}

/// What one run did.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct JobReport {
    /// The job.
    pub job: JobName,
    /// How it ended.
    pub outcome: JobOutcome,
    /// What it did, for a person.
    pub summary: String,
    /// The error's stable code, when it failed.
    pub error_code: Option<String>,
    /// The error, when it failed.
    pub error: Option<String>,
    /// The underlying report (a sync summary, a poll report, …).
    pub detail: serde_json::Value,
    /// Unix seconds.
    pub started_at: i64,
    /// Unix seconds.
    pub finished_at: i64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// When the job wants to run again, seconds (sooner than its interval).
    #[serde(skip)]
    pub next_in: Option<u64>,
    /// Jobs this run found work for.
    #[serde(skip)]
    pub wake: Vec<JobName>,
}

/// A mail source the reconcile job mirrors (`[[mail.sources]]`).
#[derive(Clone)]
pub struct ConfiguredSource {
    /// How the person named it (or the path).
    pub name: String,
    /// The account its messages belong to (`None`: the source's default).
    pub account: Option<String>,
    /// The source.
    pub source: Arc<dyn MailSource>,
}

impl std::fmt::Debug for ConfiguredSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfiguredSource")
            .field("name", &self.name)
            .field("account", &self.account)
            .field("format", &self.source.format())
            .finish_non_exhaustive()
    }
}

/// What one calendar or address book sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PimSummary {
    /// Items or cards added, changed or removed.
    pub changed: usize,
    /// Items or cards that could not be read (reported, never stopping the sync).
    pub errors: usize,
    /// The source's own report.
    pub detail: serde_json::Value,
}

/// A calendar or address book source `pim-sync` brings into its store (`[[calendar.sources]]`,
/// `[[contacts.sources]]`; `steward-connectors` implements them).
pub trait PimSource: Send + Sync {
    /// How status and logs call it.
    fn name(&self) -> &str;
    /// Brings the source into its store: what changed, or a stable code and why not.
    fn sync(&self, steward: &Steward) -> Result<PimSummary, (String, String)>;
}

/// What the jobs act on, from the frontend's configuration (`steward-connectors` builds it).
pub struct Services {
    /// Mirrored by `mail-reconcile`.
    pub mail_sources: Vec<ConfiguredSource>,
    /// Synced by `pim-sync`.
    pub pim_sources: Vec<Arc<dyn PimSource>>,
    /// The calendar sources that take writes: `confirm-writes` reads calendar writes back
    /// from them.
    pub calendar_targets: Vec<Arc<dyn crate::calendar::write::CalendarTarget>>,
    /// Submits scheduled and granted mail; `Err` says why there is none (`send-due` and
    /// granted `mail.send` are then unavailable).
    pub transport: Result<Arc<dyn MailTransport>, String>,
    /// Whose mail a granted `mail.send` is (the person's configured account).
    pub sender: Option<Sender>,
    /// Tells the person about watch events (default [`FeedDelivery`]).
    pub delivery: Arc<dyn Delivery + Send + Sync>,
    /// What knows sooner than a schedule that a job has work (a file-system watcher), started
    /// with the runner and stopped with it. An optimization: a job still runs on its schedule.
    pub triggers: Vec<Arc<dyn Trigger>>,
}

/// Something outside the runner that notices work before a job's schedule would (a file
/// watcher on the shared folders wakes `files-index`).
pub trait Trigger: Send + Sync {
    /// What it is, for the log.
    fn name(&self) -> String;
    /// Starts noticing; `wake` asks the runner to run a job soon. What it returns is kept
    /// while the runner runs and dropped when it stops (dropping stops the trigger).
    fn start(&self, wake: Waker) -> Result<Box<dyn Send>, String>;
}

/// Wakes a job of a running runner (cheap to clone; a stopped runner ignores it).
#[derive(Debug, Clone)]
pub struct Waker {
    tx: mpsc::Sender<Msg>,
}

impl Waker {
    /// Asks the runner to run `job` as soon as it is not running.
    pub fn wake(&self, job: JobName) {
        let _ = self.tx.send(Msg::Wake(job));
    }
}

impl Default for Services {
    fn default() -> Self {
        Self {
            mail_sources: Vec::new(),
            pim_sources: Vec::new(),
            calendar_targets: Vec::new(),
            transport: Err("no SMTP server is configured ([mail] smtp_host)".to_owned()),
            sender: None,
            delivery: Arc::new(FeedDelivery),
            triggers: Vec::new(),
        }
    }
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("mail_sources", &self.mail_sources)
            .field("pim_sources", &self.pim_sources.iter().map(|s| s.name()).collect::<Vec<_>>())
            .field("transport", &self.transport.as_ref().map(|_| "configured"))
            .field("sender", &self.sender)
            .field("triggers", &self.triggers.iter().map(|t| t.name()).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// A job as `steward jobs status` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct JobStatus {
    /// The job.
    pub name: JobName,
    /// Its configuration.
    pub config: JobConfig,
    /// Why it cannot run here, when it cannot.
    pub unavailable: Option<String>,
    /// Its last run and the next, as recorded.
    #[serde(flatten)]
    pub record: JobRecord,
}

/// The one background runner of a home.
pub struct Runner {
    steward: Arc<Steward>,
    config: RunnerConfig,
    services: Services,
    executor: Option<OutboxExecutor>,
    embed_schedule: Mutex<crate::embed::EmbedSchedule>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("config", &self.config)
            .field("services", &self.services)
            .finish_non_exhaustive()
    }
}

enum Msg {
    Finished(Box<JobReport>),
    Wake(JobName),
    Stop,
}

/// A runner working on its own thread; [`RunnerHandle::stop`] (or dropping it) stops it.
pub struct RunnerHandle {
    tx: mpsc::Sender<Msg>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The started triggers, stopped when the handle goes.
    _triggers: Vec<Box<dyn Send>>,
}

impl std::fmt::Debug for RunnerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunnerHandle")
            .field("triggers", &self._triggers.len())
            .finish_non_exhaustive()
    }
}

impl RunnerHandle {
    /// A waker for this runner (for a trigger started outside [`Services::triggers`]).
    pub fn waker(&self) -> Waker {
        Waker { tx: self.tx.clone() }
    }

    /// Runs `job` as soon as it is not running (a frontend that knows there is work).
    pub fn wake(&self, job: JobName) {
        let _ = self.tx.send(Msg::Wake(job));
    }

    /// Asks every run in flight to stop at its next safe point, waits for them (at most the
    /// configured grace) and ends the runner.
    pub fn stop(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for RunnerHandle {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

struct InFlight {
    cancel: Arc<AtomicBool>,
    started: Instant,
    budget: Duration,
    over: bool,
}

impl Runner {
    /// A runner over `steward` with `config` and `services`.
    pub fn new(steward: Arc<Steward>, config: RunnerConfig, services: Services) -> Self {
        let executor = match (&services.transport, &services.sender) {
            (Ok(t), Some(sender)) => {
                Some(OutboxExecutor::new(Arc::clone(&steward), Arc::clone(t), sender.clone()))
            }
            _ => None,
        };
        Self {
            steward,
            config,
            services,
            executor,
            embed_schedule: Mutex::new(crate::embed::EmbedSchedule::default()),
        }
    }

    /// The handle the runner works on.
    pub fn steward(&self) -> &Arc<Steward> {
        &self.steward
    }

    /// The configuration in force.
    pub fn config(&self) -> &RunnerConfig {
        &self.config
    }

    /// Why `job` cannot run here (nothing configured for it), or `None` when it can.
    pub fn unavailable(&self, job: JobName) -> Option<String> {
        match job {
            JobName::MailReconcile if self.services.mail_sources.is_empty() => {
                Some("no mail source is configured ([[mail.sources]] in config.toml)".to_owned())
            }
            JobName::MailEmbed if !self.steward.has_embedder() => Some(
                "no embedder is configured ([embed] or STEWARD_EMBED_ENDPOINT): search is lexical"
                    .to_owned(),
            ),
            JobName::SendDue => self.services.transport.as_ref().err().cloned(),
            JobName::MemoryPromote if self.steward.llm_config().is_none() => Some(
                "no chat model is configured ([llm] or STEWARD_LLM_BASE_URL): mail is not \
                 promoted to memory"
                    .to_owned(),
            ),
            JobName::FilesIndex if self.steward.file_roots().is_empty() => {
                Some("no folder is shared ([files] roots in config.toml)".to_owned())
            }
            JobName::PimSync if self.services.pim_sources.is_empty() => Some(
                "no calendar or address book is configured ([[calendar.sources]], \
                 [[contacts.sources]] in config.toml)"
                    .to_owned(),
            ),
            _ => None,
        }
    }

    /// The jobs' configuration, availability and last runs.
    pub fn status(&self) -> Result<Vec<JobStatus>, RunnerError> {
        let board = self.steward.job_board()?;
        JobName::ALL
            .into_iter()
            .map(|name| {
                Ok(JobStatus {
                    name,
                    config: self.config.jobs.get(&name).copied().unwrap_or(name.default_config()),
                    unavailable: self.unavailable(name),
                    record: board.get(name)?.unwrap_or_default(),
                })
            })
            .collect()
    }

    /// Runs `job` once now (recorded like a scheduled run). A job that cannot run here is
    /// `JOBS_UNAVAILABLE`; a run that fails is a report with outcome `failed`.
    pub fn run_job(&self, job: JobName) -> Result<JobReport, RunnerError> {
        if let Some(why) = self.unavailable(job) {
            return Err(RunnerError::Unavailable { job, why });
        }
        let board = self.steward.job_board()?;
        let started_at = now_secs();
        board.started(job, started_at)?;
        let cancel = AtomicBool::new(false);
        let budget = self.budget(job);
        let report = self.execute(job, &cancel, Instant::now() + budget);
        let failures = u32::from(report.outcome == JobOutcome::Failed);
        board.finished(&report, None, failures)?;
        Ok(report)
    }

    /// Runs every job that can run here once, in [`JobName::ALL`]'s order (`steward jobs run
    /// --once`); `only` runs one.
    pub fn run_once(&self, only: Option<JobName>) -> Result<Vec<JobReport>, RunnerError> {
        match only {
            Some(job) => Ok(vec![self.run_job(job)?]),
            None => JobName::ALL
                .into_iter()
                .filter(|j| self.unavailable(*j).is_none())
                .filter(|j| self.config.jobs.get(j).is_none_or(|c| c.enabled))
                .map(|j| self.run_job(j))
                .collect(),
        }
    }

    fn budget(&self, job: JobName) -> Duration {
        let secs =
            self.config.jobs.get(&job).map_or(job.default_config().budget_secs, |c| c.budget_secs);
        Duration::from_secs(u64::try_from(secs).unwrap_or(1))
    }

    /// Starts the runner on a thread of its own: every available, enabled job runs now and
    /// then on its schedule until the handle is stopped.
    pub fn spawn(self: Arc<Self>) -> Result<RunnerHandle, RunnerError> {
        let board = self.steward.job_board()?;
        board.reset_running()?;
        let (tx, rx) = mpsc::channel();
        let loop_tx = tx.clone();
        let mut triggers = Vec::new();
        for t in &self.services.triggers {
            match t.start(Waker { tx: tx.clone() }) {
                Ok(guard) => triggers.push(guard),
                // The schedule still runs the job: the trigger only makes it sooner.
                Err(e) => tracing::warn!(trigger = t.name(), error = %e, "trigger not started"),
            }
        }
        let thread = std::thread::Builder::new()
            .name("steward-runner".to_owned())
            .spawn(move || self.run_loop(&rx, &loop_tx))
            .map_err(|e| RunnerError::Spawn(e.to_string()))?;
        Ok(RunnerHandle { tx, thread: Some(thread), _triggers: triggers })
    }

    fn run_loop(self: Arc<Self>, rx: &mpsc::Receiver<Msg>, tx: &mpsc::Sender<Msg>) {
        let jobs: BTreeMap<JobName, JobConfig> = self
            .config
            .jobs
            .iter()
            .filter(|(j, _)| self.unavailable(**j).is_none())
            .map(|(j, c)| (*j, *c))
            .collect();
        let mut schedule = schedule::Schedule::new(&jobs);
        let mut running: BTreeMap<JobName, InFlight> = BTreeMap::new();
        tracing::info!(jobs = ?schedule.jobs().map(JobName::as_str).collect::<Vec<_>>(), "runner started");
        loop {
            let now = now_secs();
            for job in schedule.due(now) {
                if let Some(flight) = self.start(job, tx) {
                    schedule.started(job);
                    running.insert(job, flight);
                } else {
                    // Not started (the thread could not be made): counted as a failed run.
                    schedule.started(job);
                    schedule.finished(job, now, JobOutcome::Failed, None);
                }
            }
            let mut wait = Duration::from_secs(IDLE_CHECK_SECS);
            if let Some(s) = schedule.until_next(now) {
                wait = wait.min(Duration::from_secs(u64::try_from(s).unwrap_or(0).max(1)));
            }
            for (job, f) in &mut running {
                let elapsed = f.started.elapsed();
                if !f.over && elapsed >= f.budget {
                    f.over = true;
                    f.cancel.store(true, Ordering::SeqCst);
                    tracing::warn!(
                        job = job.as_str(),
                        budget_secs = f.budget.as_secs(),
                        "run over budget: asked to stop"
                    );
                } else if !f.over {
                    wait = wait.min(f.budget - elapsed);
                }
            }
            match rx.recv_timeout(wait) {
                Ok(Msg::Finished(report)) => {
                    running.remove(&report.job);
                    self.record(&mut schedule, &report);
                }
                Ok(Msg::Wake(job)) => schedule.wake(job, now_secs()),
                Ok(Msg::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
        // Stopping: every run in flight is asked to stop at its next safe point.
        for f in running.values() {
            f.cancel.store(true, Ordering::SeqCst);
        }
        let deadline = Instant::now() + Duration::from_secs(self.config.stop_grace_secs);
        while !running.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(Msg::Finished(report)) => {
                    running.remove(&report.job);
                    self.record(&mut schedule, &report);
                }
                Ok(_) => {}
                Err(_) => {
                    tracing::warn!(
                        jobs = ?running.keys().map(|j| j.as_str()).collect::<Vec<_>>(),
                        "runner stopped with runs still in flight"
                    );
                    break;
                }
            }
        }
        tracing::info!("runner stopped");
    }

    fn start(self: &Arc<Self>, job: JobName, tx: &mpsc::Sender<Msg>) -> Option<InFlight> {
        let cancel = Arc::new(AtomicBool::new(false));
        let budget = self.budget(job);
        let started = Instant::now();
        if let Ok(board) = self.steward.job_board()
            && let Err(e) = board.started(job, now_secs())
        {
            tracing::warn!(job = job.as_str(), error = %e, "cannot record the run's start");
        }
        let (me, flag, tx) = (Arc::clone(self), Arc::clone(&cancel), tx.clone());
        let spawned = std::thread::Builder::new().name(format!("job-{job}")).spawn(move || {
            let report = me.execute(job, &flag, started + budget);
            let _ = tx.send(Msg::Finished(Box::new(report)));
        });
        match spawned {
            Ok(_) => Some(InFlight { cancel, started, budget, over: false }),
            Err(e) => {
                tracing::error!(job = job.as_str(), error = %e, "cannot start the job's thread");
                None
            }
        }
    }

    fn record(&self, schedule: &mut schedule::Schedule, report: &JobReport) {
        let next =
            schedule.finished(report.job, report.finished_at, report.outcome, report.next_in);
        let failures = schedule.slot(report.job).map_or(0, |s| s.failures);
        for w in &report.wake {
            schedule.wake(*w, report.finished_at);
        }
        match report.outcome {
            JobOutcome::Failed => tracing::warn!(
                job = report.job.as_str(),
                code = report.error_code.as_deref().unwrap_or(""),
                error = report.error.as_deref().unwrap_or(""),
                failures,
                "job failed"
            ),
            _ if report.summary.is_empty() => {}
            _ => tracing::info!(job = report.job.as_str(), summary = %report.summary, "job ran"),
        }
        match self.steward.job_board() {
            Ok(board) => {
                if let Err(e) = board.finished(report, next, failures) {
                    tracing::warn!(job = report.job.as_str(), error = %e, "cannot record the run");
                }
            }
            Err(e) => tracing::warn!(error = %e, "the jobs table is unavailable"),
        }
    }

    /// One run of `job`: never panics into the caller (a panic is a failed run).
    fn execute(&self, job: JobName, cancel: &AtomicBool, deadline: Instant) -> JobReport {
        let started_at = now_secs();
        let clock = Instant::now();
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            jobs::run(self, job, cancel, deadline)
        }));
        let mut report = JobReport {
            job,
            outcome: JobOutcome::Ok,
            summary: String::new(),
            error_code: None,
            error: None,
            detail: serde_json::Value::Null,
            started_at,
            finished_at: now_secs(),
            seconds: clock.elapsed().as_secs_f64(),
            next_in: None,
            wake: Vec::new(),
        };
        match ran {
            Ok(Ok(done)) => {
                report.summary = done.summary;
                report.detail = done.detail;
                report.next_in = done.next_in;
                report.wake = done.wake;
                report.error = done.partial_error.map(|(code, e)| {
                    report.error_code = Some(code);
                    e
                });
                if report.error.is_some() {
                    report.outcome = JobOutcome::Failed;
                }
            }
            Ok(Err(e)) => {
                report.outcome = JobOutcome::Failed;
                report.error_code = Some(e.code);
                report.error = Some(e.message);
            }
            Err(_) => {
                report.outcome = JobOutcome::Failed;
                report.error_code = Some("JOBS_PANICKED".to_owned());
                report.error = Some("the run panicked; the log has the details".to_owned());
            }
        }
        if cancel.load(Ordering::SeqCst) {
            report.outcome = JobOutcome::OverBudget;
        }
        if let Some(e) = &mut report.error {
            *e = e.chars().take(MAX_JOB_ERROR_CHARS).collect();
        }
        report
    }
}

impl Steward {
    /// The jobs table (`steward.db`), opened on first use.
    pub fn job_board(&self) -> Result<&JobBoard, RunnerError> {
        self.open_once(&self.jobs, || JobBoard::open(self.home(), self.limits()))
    }

    /// The jobs' last runs without a runner (another process's), for the system status:
    /// only when `steward.db` is open in this process already (the status never creates or
    /// migrates a store).
    pub(crate) fn job_records(&self) -> Option<Vec<(JobName, JobRecord)>> {
        let board = self.jobs.get()?;
        Some(
            JobName::ALL
                .into_iter()
                .filter_map(|j| board.get(j).ok().flatten().map(|r| (j, r)))
                .collect(),
        )
    }
}

/// Tells `PoisonError` users apart: the schedule's lock is only held for bookkeeping.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(toml: &str, vars: &[(&str, &str)]) -> Result<RunnerConfig, RunnerError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), toml).unwrap();
        let vars: Vec<(String, String)> =
            vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        RunnerConfig::load_with(dir.path(), &|k| {
            vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn jobs_are_configured_from_the_file_and_the_environment_wins() {
        let c = load(
            "[jobs]\nwatch_poll_per_source = 2\n[jobs.send-due]\ninterval_secs = 5\nbudget_secs = 7\n\
             [jobs.mail-embed]\nenabled = false\n[mail]\nfrom = \"x\"\n",
            &[("STEWARD_JOB_SEND_DUE_INTERVAL_SECS", "1"), ("STEWARD_JOB_WATCH_POLL_ENABLED", "off")],
        )
        .unwrap();
        assert_eq!(
            c.jobs[&JobName::SendDue],
            JobConfig { enabled: true, interval_secs: 1, budget_secs: 7 }
        );
        assert!(!c.jobs[&JobName::MailEmbed].enabled);
        assert!(!c.jobs[&JobName::WatchPoll].enabled);
        assert_eq!(c.jobs[&JobName::ConfirmWrites], JobName::ConfirmWrites.default_config());
        assert_eq!(c.watch_poll_per_source, 2);
        assert_eq!(load("", &[]).unwrap(), RunnerConfig::default());
    }

    #[test]
    fn a_bad_jobs_configuration_is_a_typed_error() {
        for (toml, vars) in [
            ("[jobs.send-soon]\ninterval_secs = 5\n", vec![]),
            ("[jobs.send-due]\ninterval_secs = 0\n", vec![]),
            ("[jobs.send-due]\nbudget_secs = 100000\n", vec![]),
            ("[jobs.send-due]\nevery = 5\n", vec![]),
            ("[jobs]\nwatch_poll_per_source = 99\n", vec![]),
            ("", vec![("STEWARD_JOB_CONFIRM_WRITES_INTERVAL_SECS", "soon")]),
            ("", vec![("STEWARD_JOB_CONFIRM_WRITES_ENABLED", "maybe")]),
        ] {
            let e = load(toml, &vars).unwrap_err();
            assert_eq!(e.code(), "JOBS_CONFIG", "{toml} {vars:?}: {e}");
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
        }
        assert_eq!(JobName::parse("nope").unwrap_err().code(), "JOBS_UNKNOWN_JOB");
        for j in JobName::ALL {
            assert_eq!(JobName::parse(j.as_str()).unwrap(), j);
        }
    }
}
