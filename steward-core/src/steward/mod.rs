//! The `Steward` handle: one person's home directory and the stores in it.

mod access;
mod calendar;
mod contacts;
mod mail;
mod records;
mod watches;

pub use contacts::ContactsQueryError;
pub use records::AuditPage;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use crate::{
    Limits,
    approval::{ApprovalError, Approvals, HumanAuthority},
    audit::{AuditError, AuditLog},
    error::{ErrorKind, StewardError},
    index::{Embedder, IndexError, LexicalIndex, VectorError, VectorStore},
    mirror::{MailSource, Mirror, MirrorError, Progress, SyncOptions, SyncSummary},
    policy::{PolicyError, PolicyStore, ToolRegistry, ToolSpec},
    search::{MAX_API_LIMIT, MAX_MODEL_LIMIT, SearchError, SearchPage, SearchRequest},
};

/// Errors from opening a [`Steward`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// No home was given and neither `$STEWARD_HOME` nor a platform data directory exists.
    #[error("no home directory: set STEWARD_HOME or pass one explicitly")]
    NoHome,
    /// The home directory could not be created or used.
    #[error("cannot use home {path}: {reason}")]
    Home {
        /// The directory.
        path: PathBuf,
        /// The OS error text.
        reason: String,
    },
    /// A limit is out of range.
    #[error("limit {0} is out of range")]
    InvalidLimit(&'static str),
    /// `[limits]` of the home's `config.toml` cannot be used (the message names the key).
    #[error("{0}")]
    LimitsConfig(String),
    /// The mirror could not be opened.
    #[error(transparent)]
    Mirror(#[from] MirrorError),
    /// A tool could not be registered.
    #[error(transparent)]
    Tool(#[from] PolicyError),
    /// The embedding configuration cannot be used.
    #[error(transparent)]
    Embed(#[from] crate::embed::EmbedConfigError),
    /// The chat-model configuration cannot be used.
    #[error(transparent)]
    Llm(#[from] crate::llm::LlmConfigError),
}

impl StewardError for OpenError {
    fn code(&self) -> &'static str {
        match self {
            Self::NoHome => "STEWARD_NO_HOME",
            Self::Home { .. } => "STEWARD_HOME_UNUSABLE",
            Self::InvalidLimit(_) | Self::LimitsConfig(_) => "STEWARD_INVALID_LIMIT",
            Self::Mirror(e) => e.code(),
            Self::Tool(e) => e.code(),
            Self::Embed(e) => e.code(),
            Self::Llm(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::NoHome | Self::InvalidLimit(_) | Self::LimitsConfig(_) => ErrorKind::InvalidInput,
            Self::Home { .. } => ErrorKind::Unavailable,
            Self::Mirror(e) => e.kind(),
            Self::Tool(e) => e.kind(),
            Self::Embed(e) => e.kind(),
            Self::Llm(e) => e.kind(),
        }
    }
}

/// The default home: `$STEWARD_HOME`, else `<platform data dir>/steward`.
pub fn default_home() -> Option<PathBuf> {
    match std::env::var_os("STEWARD_HOME") {
        Some(h) if !h.is_empty() => Some(PathBuf::from(h)),
        _ => dirs::data_dir().map(|d| d.join("steward")),
    }
}

/// A change to the limits applied after `[limits]` was read ([`StewardBuilder::adjust_limits`]).
type LimitsAdjustment = Arc<dyn Fn(&mut Limits) + Send + Sync>;

/// Opens a [`Steward`]. No `Default`-driven magic: the home is explicit or documented.
#[derive(Clone, Default)]
pub struct StewardBuilder {
    home: Option<PathBuf>,
    limits: Limits,
    embedder: Option<Arc<dyn Embedder>>,
    embedder_from_config: bool,
    llm: Option<crate::llm::LlmConfig>,
    llm_from_config: bool,
    limits_from_config: bool,
    adjust_limits: Vec<LimitsAdjustment>,
    tools: Vec<ToolSpec>,
    watch_adapters: Vec<Arc<dyn crate::watch::WatchAdapter>>,
    calendar: Option<crate::calendar::CalendarSettings>,
    file_roots: Vec<PathBuf>,
    extractor: Option<Arc<dyn crate::docs::Extractor>>,
}

impl std::fmt::Debug for StewardBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StewardBuilder")
            .field("home", &self.home)
            .field("limits", &self.limits)
            .field("embedder", &self.embedder.as_ref().map(|e| e.model().to_owned()))
            .field("tools", &self.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>())
            .finish()
    }
}

impl StewardBuilder {
    /// Reads documents with `extractor` (`steward-connectors` installs its readers of PDF,
    /// OOXML, ODF, HTML, RTF, text and mail); without one, documents cannot be read.
    #[must_use]
    pub fn extractor(mut self, extractor: Arc<dyn crate::docs::Extractor>) -> Self {
        self.extractor = Some(extractor);
        self
    }

    /// Uses `home` instead of the default.
    #[must_use]
    pub fn home(mut self, home: impl Into<PathBuf>) -> Self {
        self.home = Some(home.into());
        self
    }

    /// The folders Steward may read files under (at most [`crate::paths::MAX_FILE_ROOTS`];
    /// none by default: no file is reachable).
    #[must_use]
    pub fn file_roots(mut self, roots: Vec<PathBuf>) -> Self {
        self.file_roots = roots;
        self
    }

    /// Uses `settings` for calendar questions (the person's zone, addresses and working
    /// hours) instead of the system's zone and the default hours.
    #[must_use]
    pub fn calendar_settings(mut self, settings: crate::calendar::CalendarSettings) -> Self {
        self.calendar = Some(settings);
        self
    }

    /// Uses `limits` instead of the reference defaults.
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Uses `embedder` for semantic search (without one, search is lexical and substring only
    /// and says `semantic: "disabled"`).
    #[must_use]
    pub fn embedder(mut self, embedder: Arc<dyn Embedder>) -> Self {
        self.embedder = Some(embedder);
        self
    }

    /// Uses the embedder configured for the home (`[embed]` in `<home>/config.toml` and the
    /// `STEWARD_EMBED_*` environment, see [`crate::embed::EmbedConfig::load`]) unless one is
    /// given with [`StewardBuilder::embedder`]; none when embedding is off. What the frontends
    /// call; an unusable configuration fails the open.
    #[must_use]
    pub fn embedder_from_config(mut self) -> Self {
        self.embedder_from_config = true;
        self
    }

    /// Uses this chat-model configuration (tiers → targets) for [`Steward::llm`].
    #[must_use]
    pub fn llm(mut self, config: crate::llm::LlmConfig) -> Self {
        self.llm = Some(config);
        self
    }

    /// Uses the chat models configured for the home (`[llm]` in `<home>/config.toml` and
    /// `STEWARD_LLM_*`, see [`crate::llm::LlmConfig::load`]) unless one is given with
    /// [`StewardBuilder::llm`]; an unusable configuration fails the open.
    #[must_use]
    pub fn llm_from_config(mut self) -> Self {
        self.llm_from_config = true;
        self
    }

    /// Reads `[limits]` of `<home>/config.toml` over the limits given (see
    /// [`Limits::with_config`]).
    #[must_use]
    pub fn limits_from_config(mut self) -> Self {
        self.limits_from_config = true;
        self
    }

    /// Changes the limits last, after `[limits]` was read: a command's flags win over the
    /// configuration (`steward index mail --ingest-batch N`).
    #[must_use]
    pub fn adjust_limits(mut self, f: impl Fn(&mut Limits) + Send + Sync + 'static) -> Self {
        self.adjust_limits.push(Arc::new(f));
        self
    }

    /// Registers a watch source (a connector's adapter: `time`, `train`, …).
    #[must_use]
    pub fn watch_adapter(mut self, adapter: Arc<dyn crate::watch::WatchAdapter>) -> Self {
        self.watch_adapters.push(adapter);
        self
    }

    /// Registers a tool beside the built-in catalog (a connector's, an app's).
    #[must_use]
    pub fn tool(mut self, spec: ToolSpec) -> Self {
        self.tools.push(spec);
        self
    }

    /// Creates the home if needed and opens every store in it.
    pub fn open(mut self) -> Result<Steward, OpenError> {
        self.limits.validate().map_err(OpenError::InvalidLimit)?;
        let home = match self.home {
            Some(h) => h,
            None => default_home().ok_or(OpenError::NoHome)?,
        };
        if self.limits_from_config {
            self.limits = self.limits.with_config(&home).map_err(OpenError::LimitsConfig)?;
        }
        if !self.adjust_limits.is_empty() {
            for f in &self.adjust_limits {
                f(&mut self.limits);
            }
            self.limits.validate().map_err(OpenError::InvalidLimit)?;
        }
        create_private_dir(&home)
            .map_err(|e| OpenError::Home { path: home.clone(), reason: e.to_string() })?;
        let mut tools = crate::policy::catalog::builtin()?;
        for spec in self.tools {
            tools.register(spec)?;
        }
        let mirror = Mirror::open(&home, &self.limits)?;
        // Opened on first use, and shared with the embedder: its requests are model requests.
        let usage = Arc::new(crate::llm::SharedLedger::new(&home, &self.limits));
        let embedder = match self.embedder {
            Some(e) => Some(e),
            None if self.embedder_from_config => {
                crate::embed::configured(&home, Arc::clone(&usage))?
            }
            None => None,
        };
        let llm_config = match self.llm {
            Some(c) => {
                c.validate()?;
                Some(c)
            }
            None if self.llm_from_config => crate::llm::LlmConfig::load(&home)?,
            None => None,
        };
        Ok(Steward {
            opening: std::sync::Mutex::new(()),
            catching_up: std::sync::Mutex::new(()),
            llm_config,
            llm: std::sync::OnceLock::new(),
            usage,
            tools,
            policy: std::sync::OnceLock::new(),
            access: std::sync::OnceLock::new(),
            journal: std::sync::OnceLock::new(),
            home,
            limits: self.limits,
            mirror,
            lexical: std::sync::OnceLock::new(),
            vectors: std::sync::OnceLock::new(),
            event_vectors: std::sync::OnceLock::new(),
            memory: std::sync::OnceLock::new(),
            memory_vectors: std::sync::OnceLock::new(),
            promotion: std::sync::OnceLock::new(),
            events_embedded: std::sync::Mutex::new(None),
            approvals: std::sync::OnceLock::new(),
            audit: std::sync::OnceLock::new(),
            embedder,
            attachments: crate::attachments::Registry::default(),
            preflights: std::sync::RwLock::default(),
            watch_adapters: self.watch_adapters,
            watches: std::sync::OnceLock::new(),
            chats: std::sync::OnceLock::new(),
            contacts: std::sync::OnceLock::new(),
            calendar: std::sync::OnceLock::new(),
            files: std::sync::OnceLock::new(),
            docs: std::sync::OnceLock::new(),
            docs_index: std::sync::OnceLock::new(),
            docs_memo: crate::docs::read::Memo::default(),
            extractor: self.extractor,
            calendar_settings: self.calendar.unwrap_or_default(),
            file_roots: self.file_roots.into_iter().take(crate::paths::MAX_FILE_ROOTS).collect(),
            agent: std::sync::Mutex::new(std::sync::Weak::new()),
            jobs: std::sync::OnceLock::new(),
        })
    }
}

fn create_private_dir(path: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Why [`Steward::sync_mail`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SyncError {
    /// Mirroring failed (nothing after the last committed batch was written).
    #[error(transparent)]
    Mirror(#[from] MirrorError),
    /// The mirror is up to date but a derived index could not be updated; the next sync or
    /// `index rebuild` catches it up.
    #[error("mirrored, but the index could not be updated: {0}")]
    Index(#[from] crate::index::IndexError),
}

impl StewardError for SyncError {
    fn code(&self) -> &'static str {
        match self {
            Self::Mirror(e) => e.code(),
            Self::Index(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Mirror(e) => e.kind(),
            Self::Index(e) => e.kind(),
        }
    }
}

/// What `Steward::rebuild_indexes` did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RebuildReport {
    /// Messages in the text index (BM25 and substring fields).
    pub lexical_documents: u64,
    /// Notes in the memory index, rebuilt from `memory/notes/`.
    pub memory_notes: Option<usize>,
    /// Why the memory index could not be rebuilt.
    pub memory_error: Option<String>,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// One person's Steward: the home directory and its stores. Cheap to share behind an `Arc`;
/// every method takes `&self`.
pub struct Steward {
    home: PathBuf,
    limits: Limits,
    mirror: Mirror,
    /// The text index, opened on first use.
    lexical: std::sync::OnceLock<LexicalIndex>,
    /// Opened on first use: a lexical search never pays for it.
    vectors: std::sync::OnceLock<VectorStore>,
    /// The event vectors (`calendar-index/vectors.db`).
    event_vectors: std::sync::OnceLock<VectorStore>,
    /// The memory index (`memory-index/index.db`), opened on first use.
    pub(crate) memory: std::sync::OnceLock<crate::memory::MemoryIndexHandle>,
    /// The note vectors (`memory-index/vectors.db`), opened on first use.
    pub(crate) memory_vectors: std::sync::OnceLock<VectorStore>,
    /// The mail promotion's outcomes (`memory-promotion.db`), opened on first use.
    pub(crate) promotion: std::sync::OnceLock<crate::memory::PromotionStore>,
    /// The model and calendar generation of the last event drain that finished.
    pub(crate) events_embedded: std::sync::Mutex<Option<(String, i64)>>,
    /// `steward.db`, opened on first use.
    approvals: std::sync::OnceLock<Approvals>,
    /// `audit.db`, opened on first use.
    audit: std::sync::OnceLock<Arc<AuditLog>>,
    /// The write journal `ops.db`, opened on first use.
    journal: std::sync::OnceLock<crate::journal::Journal>,
    /// The versioned policy in `steward.db`, opened on first use.
    policy: std::sync::OnceLock<PolicyStore>,
    /// Network access state in `steward.db` (idempotent responses, devices), on first use.
    access: std::sync::OnceLock<crate::access::AccessStore>,
    /// The built-in catalog plus the builder's tools.
    tools: ToolRegistry,
    /// Download tokens for mirrored attachments (in memory).
    attachments: crate::attachments::Registry,
    /// The executors' input checks, by tool, registered by [`crate::tools::Toolbox`]: a
    /// person's edit of an approval is checked by the same preflight as the proposal.
    preflights:
        std::sync::RwLock<std::collections::BTreeMap<String, Arc<dyn crate::tools::ToolExecutor>>>,
    /// The registered watch sources.
    watch_adapters: Vec<Arc<dyn crate::watch::WatchAdapter>>,
    /// `watches.db`, opened on first use.
    watches: std::sync::OnceLock<crate::watch::Watches>,
    /// `chats.db` (the agent's chats and turn events), opened on first use.
    chats: std::sync::OnceLock<Arc<crate::agent::store::ChatStore>>,
    /// `contacts.db` (address books and the people merged from them), opened on first use.
    contacts: std::sync::OnceLock<crate::contacts::store::ContactStore>,
    /// `calendar.db` (the calendars' events and their search index), opened on first use.
    calendar: std::sync::OnceLock<crate::calendar::store::CalendarStore>,
    /// `files.db` (the paths under the file roots), opened on first use.
    files: std::sync::OnceLock<crate::files::FileStore>,
    /// `docs.db` (documents' extracted text, a cache), opened on first use.
    docs: std::sync::OnceLock<crate::docs::DocCache>,
    /// `docs-index.db` (passages of the documents under the roots), opened on first use.
    pub(crate) docs_index: std::sync::OnceLock<crate::docs::index::DocIndex>,
    /// The documents last read, prepared in memory (bounded).
    docs_memo: crate::docs::read::Memo,
    /// Turns documents into text, when installed.
    extractor: Option<Arc<dyn crate::docs::Extractor>>,
    /// The person's zone, addresses and working hours.
    calendar_settings: crate::calendar::CalendarSettings,
    /// The folders files may be read under.
    file_roots: Vec<PathBuf>,
    /// The handle's agent while one lives (a handle has one: see [`crate::agent::Agent::open`]).
    pub(crate) agent: std::sync::Mutex<std::sync::Weak<crate::agent::Shared>>,
    /// The runner's jobs table (`steward.db`), opened on first use.
    pub(crate) jobs: std::sync::OnceLock<crate::runner::JobBoard>,
    /// Held while a store or derived index is opened for the first time.
    opening: std::sync::Mutex<()>,
    /// Held while the text index catches up with the mirror.
    catching_up: std::sync::Mutex<()>,
    /// The chat models, when configured.
    llm_config: Option<crate::llm::LlmConfig>,
    /// Built on first use.
    llm: std::sync::OnceLock<crate::llm::LlmClient>,
    /// `usage.db`, opened on first use.
    usage: Arc<crate::llm::SharedLedger>,
    embedder: Option<Arc<dyn Embedder>>,
}

impl std::fmt::Debug for Steward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Steward").field("home", &self.home).finish_non_exhaustive()
    }
}

impl Steward {
    /// Starts building a handle.
    pub fn builder() -> StewardBuilder {
        StewardBuilder::default()
    }

    /// Records `executor` as the input check of `tool` for edits of its approvals.
    pub(crate) fn register_preflight(
        &self,
        tool: &str,
        executor: Arc<dyn crate::tools::ToolExecutor>,
    ) {
        let mut map = self.preflights.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.insert(tool.to_owned(), executor);
    }

    /// The input check of `tool`, when a toolbox registered one.
    pub(crate) fn preflight_of(&self, tool: &str) -> Option<Arc<dyn crate::tools::ToolExecutor>> {
        let map = self.preflights.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(tool).cloned()
    }

    /// The home directory.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The mail mirror.
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn mirror(&self) -> &Mirror {
        &self.mirror
    }

    /// Where the lexical (BM25) index lives.
    pub fn lexical_index_dir(&self) -> PathBuf {
        self.home.join("index").join("lexical")
    }

    /// Mirrors `source` and brings the derived indexes up to date in the same call, so that what
    /// was mirrored is searchable when it returns. Only what the runs after the index's
    /// watermark wrote is re-indexed (a run that crashed after committing some batches
    /// included); an index without a watermark, or claiming a run this mirror never had, is
    /// rebuilt whole.
    pub fn sync_mail(
        &self,
        source: &dyn MailSource,
        options: &SyncOptions<'_>,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<SyncSummary, SyncError> {
        let summary = self.mirror.sync(source, options, progress)?;
        let span = tracing::info_span!("index", run = summary.run_id);
        let _guard = span.enter();
        self.catch_up_index(Some((summary.run_id, summary.changed)))?;
        Ok(summary)
    }

    /// Brings the text index up to the mirror: only what the runs after the index's watermark
    /// wrote is re-indexed (a run that crashed after committing some batches included); an
    /// index without a watermark, or claiming a run this mirror never had, is rebuilt whole.
    /// `just_ran` is the run that just finished and whether it changed anything.
    fn catch_up_index(&self, just_ran: Option<(i64, bool)>) -> Result<(), IndexError> {
        let lexical = self.lexical_index()?;
        // Within this process one catch-up at a time, and the others wait for it: a search
        // that raced a first build would otherwise find the writer taken and search an empty
        // index. (Across processes the writer lock decides, and a search may run on what the
        // index has.)
        let _catching_up =
            self.catching_up.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let last = match just_ran {
            Some((run, _)) => run,
            None => self.mirror.last_finished_run()?,
        };
        let watermark = lexical.watermark()?;
        if watermark == Some(last) {
            lexical.refresh(watermark)?;
            return Ok(());
        }
        let first = match watermark {
            Some(w) if w < last => self.mirror.first_run_after(w)?,
            _ => None,
        };
        match first {
            // This run is the only one the index has not seen, and it changed nothing: only
            // the watermark moves.
            Some((id, _)) if just_ran.is_some_and(|(run, changed)| id == run && !changed) => {
                lexical.set_watermark(last)?;
            }
            Some((_, since)) => {
                let n = lexical.apply_since(&self.mirror, since, last)?;
                tracing::info!(messages = n, since, "text index updated");
            }
            None => {
                let n = lexical.rebuild(&self.mirror)?;
                tracing::info!(messages = n, "text index rebuilt");
            }
        }
        Ok(())
    }

    /// Searches mail (see [`crate::search`]); at most [`MAX_API_LIMIT`] results per page. A
    /// text index behind the mirror (another process mirrored, or a crash) is caught up
    /// first; if that is impossible right now (another writer holds it), the search runs on
    /// what the index has.
    pub fn search(&self, request: &SearchRequest) -> Result<SearchPage, SearchError> {
        self.search_capped(request, MAX_API_LIMIT)
    }

    /// [`Steward::search`] for a model's context: at most [`MAX_MODEL_LIMIT`] results.
    pub fn search_for_model(&self, request: &SearchRequest) -> Result<SearchPage, SearchError> {
        self.search_capped(request, MAX_MODEL_LIMIT)
    }

    fn search_capped(
        &self,
        request: &SearchRequest,
        max: usize,
    ) -> Result<SearchPage, SearchError> {
        // A bad request is refused before anything else happens (no index catch-up either).
        request.validate(max)?;
        if let Err(e) = self.catch_up_index(None) {
            tracing::warn!(error = %e, "text index could not be caught up; searching it as is");
        }
        let sources = crate::search::engine::Sources {
            mirror: &self.mirror,
            lexical: self.lexical_index()?,
            vectors: match &self.embedder {
                Some(_) => match self.vectors() {
                    Ok(v) => Some(v),
                    Err(e) => {
                        tracing::warn!(error = %e, "vector store unavailable; semantic skipped");
                        None
                    }
                },
                None => None,
            },
            embedder: self.embedder.as_deref(),
        };
        crate::search::engine::search(&sources, request, max)
    }

    /// The store in `cell`, opened by `open` on first use. First opens are serialized within
    /// the process (`open` must not call another accessor that opens): two threads opening a
    /// fresh store at once raced on its files and schema, and one of them failed.
    pub(crate) fn open_once<'a, T, E>(
        &'a self,
        cell: &'a std::sync::OnceLock<T>,
        open: impl FnOnce() -> Result<T, E>,
    ) -> Result<&'a T, E> {
        if let Some(v) = cell.get() {
            return Ok(v);
        }
        let _opening = self.opening.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(v) = cell.get() {
            return Ok(v);
        }
        let opened = open()?;
        Ok(cell.get_or_init(|| opened))
    }

    /// The folders Steward may read files under (`[files] roots`).
    pub fn file_roots(&self) -> &[PathBuf] {
        &self.file_roots
    }

    pub(crate) fn file_store(
        &self,
    ) -> Result<&crate::files::FileStore, crate::files::FileStoreError> {
        self.open_once(&self.files, || crate::files::FileStore::open(&self.home, &self.limits))
    }

    /// Walks the file roots and brings `files.db` up to date (see [`crate::files`]).
    pub fn index_files(&self) -> Result<crate::files::FilesReport, crate::files::FileStoreError> {
        self.file_store()?.index(&self.file_roots, &self.home)
    }

    /// The files under the roots that match `q`, newest first (see [`crate::files::FileQuery`]);
    /// a `root` must be one of the roots.
    pub fn find_files(
        &self,
        q: &crate::files::FileQuery,
    ) -> Result<crate::files::FilePage, crate::files::FileStoreError> {
        if self.file_roots.is_empty() {
            return Err(crate::files::FileStoreError::NoRoots);
        }
        if let Some(r) = &q.root {
            let ours = self.file_roots.iter().filter_map(|x| x.canonicalize().ok());
            let asked = r.canonicalize().ok();
            if !ours.into_iter().any(|x| Some(&x) == asked.as_ref()) {
                return Err(crate::files::FileStoreError::BadQuery(format!(
                    "root {}: not one of the shared folders",
                    r.display()
                )));
            }
        }
        self.file_store()?.find(q)
    }

    /// `path` (absolute, or relative to a root) resolved, when it lies inside a root once
    /// every link is followed, names no secret and is outside the home
    /// ([`crate::paths::guard_in_roots`]); nothing is read before this says yes.
    pub fn guard_path(&self, path: &std::path::Path) -> Result<PathBuf, crate::paths::PathError> {
        crate::paths::guard_in_roots(path, &self.file_roots, &self.home)
    }

    /// The document reader, when one is installed.
    pub(crate) fn extractor(&self) -> Option<Arc<dyn crate::docs::Extractor>> {
        self.extractor.clone()
    }

    /// Whether documents can be read (a reader is installed).
    pub fn reads_documents(&self) -> bool {
        self.extractor.is_some()
    }

    pub(crate) fn doc_memo(&self) -> &crate::docs::read::Memo {
        &self.docs_memo
    }

    pub(crate) fn doc_cache(&self) -> Result<&crate::docs::DocCache, crate::store::StoreError> {
        self.open_once(&self.docs, || crate::docs::DocCache::open(&self.home, &self.limits))
    }

    /// The event vector store (`calendar-index/vectors.db`, see [`crate::calendar::vectors`]).
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn event_vectors(&self) -> Result<&VectorStore, VectorError> {
        self.open_once(&self.event_vectors, || {
            VectorStore::open(&self.home.join("calendar-index"), &self.limits)
        })
    }

    /// The embedder, when one is configured.
    pub(crate) fn embedder_ref(&self) -> Option<&dyn Embedder> {
        self.embedder.as_deref()
    }

    /// The vector store (embedders write here; search reads).
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn vectors(&self) -> Result<&VectorStore, VectorError> {
        self.open_once(&self.vectors, || VectorStore::open(&self.home.join("index"), &self.limits))
    }

    /// Approval requests and their resolution (`steward.db`).
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn approvals(&self) -> Result<&Approvals, ApprovalError> {
        if let Some(a) = self.approvals.get() {
            return Ok(a);
        }
        // The audit trail first: opening holds the lock, and a nested open would wait on it.
        // A trail that cannot be opened fails this call (no decision proceeds unaudited) and
        // caches nothing, so the next call tries both again.
        let audit =
            Arc::clone(self.audit().map_err(|e| ApprovalError::AuditUnavailable(e.to_string()))?);
        self.open_once(&self.approvals, || {
            Ok(Approvals::open(&self.home, &self.limits)?.with_audit(audit))
        })
    }

    /// The versioned policy (`steward.db`).
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn policy_store(&self) -> Result<&PolicyStore, PolicyError> {
        self.open_once(&self.policy, || PolicyStore::open(&self.home, &self.limits))
    }

    /// Network access state (`steward.db`): idempotent responses, paired devices, pairing codes.
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn access(&self) -> Result<&crate::access::AccessStore, crate::access::AccessError> {
        self.open_once(&self.access, || crate::access::AccessStore::open(&self.home, &self.limits))
    }

    /// The usage ledger (`usage.db`).
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn usage(&self) -> Result<&Arc<crate::llm::UsageLedger>, crate::store::StoreError> {
        self.usage.get()
    }

    /// What the models cost over a window: `since` is `7d`, `24h`, `90m` (before `now`), `all`,
    /// a date or an RFC 3339 instant. Totals and groups by service, action, model and UTC day.
    pub fn usage_report(
        &self,
        since: &str,
        now: i64,
    ) -> Result<crate::llm::UsageReport, crate::llm::UsageError> {
        let since = crate::llm::since(since, now).map_err(crate::llm::UsageError::BadSince)?;
        Ok(self.usage()?.report(since)?)
    }

    /// The chat-model configuration, when models are configured (read as is: no client is
    /// built, so it may be asked from any thread).
    pub fn llm_config(&self) -> Option<&crate::llm::LlmConfig> {
        self.llm_config.as_ref()
    }

    /// The chat-model client over the configured tiers, recording into the usage ledger.
    pub fn llm(&self) -> Result<&crate::llm::LlmClient, crate::llm::LlmError> {
        if let Some(c) = self.llm.get() {
            return Ok(c);
        }
        let config =
            self.llm_config.clone().ok_or(crate::llm::LlmError::NotConfigured("any capability"))?;
        let ledger = self.usage().map_err(|e| crate::llm::LlmError::Ledger(e.to_string()))?;
        let client = crate::llm::LlmClient::new(config, Some(Arc::clone(ledger)))
            .map_err(|e| crate::llm::LlmError::Invalid(e.to_string()))?;
        Ok(self.llm.get_or_init(|| client))
    }

    /// Durable watches (`watches.db`) over the registered sources.
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn watches(&self) -> Result<&crate::watch::Watches, crate::watch::WatchError> {
        self.open_once(&self.watches, || {
            crate::watch::Watches::open(&self.home, &self.limits, &self.watch_adapters)
        })
    }

    /// `chats.db`: the agent's chats, turns and their event feed (one per handle).
    pub(crate) fn chat_store(
        &self,
    ) -> Result<&Arc<crate::agent::store::ChatStore>, crate::agent::AgentError> {
        self.open_once(&self.chats, || {
            crate::agent::store::ChatStore::open(&self.home, &self.limits).map(Arc::new)
        })
    }

    /// The write journal (`ops.db`), audited.
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn journal(&self) -> Result<&crate::journal::Journal, crate::journal::JournalError> {
        if let Some(j) = self.journal.get() {
            return Ok(j);
        }
        // As for approvals: never opened (or cached) without its audit trail.
        let audit = Arc::clone(
            self.audit()
                .map_err(|e| crate::journal::JournalError::AuditUnavailable(e.to_string()))?,
        );
        self.open_once(&self.journal, || {
            Ok(crate::journal::Journal::open(&self.home, &self.limits)?.with_audit(audit))
        })
    }

    pub(crate) fn attachment_registry(&self) -> &crate::attachments::Registry {
        &self.attachments
    }

    /// Whether an embedder was configured (semantic search takes part).
    pub fn has_embedder(&self) -> bool {
        self.embedder.is_some()
    }

    /// The configured embedder's model, if any.
    pub fn embed_model(&self) -> Option<&str> {
        self.embedder.as_deref().map(Embedder::model)
    }

    /// One drain of the mail embedding queue with the configured embedder (see
    /// [`crate::embed`]): embeds what changed since the last drain, reports progress after
    /// every batch. The endpoint failing is not an error: the report says so and what remains.
    pub fn embed_mail(
        &self,
        opts: &crate::embed::EmbedOptions<'_>,
        progress: &mut dyn FnMut(crate::embed::EmbedProgress),
    ) -> Result<crate::embed::EmbedReport, crate::embed::EmbedRunError> {
        let e = self.embedder.as_deref().ok_or(crate::embed::EmbedRunError::NotConfigured)?;
        crate::embed::drain(&self.mirror, self.vectors()?, e, opts, progress)
    }

    /// Drains the mail embedding queue until nothing is left, backing off while the endpoint is
    /// unavailable, for at most about `within` ([`crate::embed::drain_until_done`]).
    pub fn embed_mail_until_done(
        &self,
        opts: &crate::embed::EmbedOptions<'_>,
        within: std::time::Duration,
        progress: &mut dyn FnMut(crate::embed::EmbedProgress),
    ) -> Result<crate::embed::EmbedReport, crate::embed::EmbedRunError> {
        let e = self.embedder.as_deref().ok_or(crate::embed::EmbedRunError::NotConfigured)?;
        crate::embed::drain_until_done(&self.mirror, self.vectors()?, e, opts, within, progress)
    }

    /// The registered tools: the built-in catalog and the builder's.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// The audit trail (`audit.db`).
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn audit(&self) -> Result<&Arc<AuditLog>, AuditError> {
        self.open_once(&self.audit, || AuditLog::open(&self.home, &self.limits).map(Arc::new))
    }

    /// The authority of `person`, for a frontend that has authenticated them (the command, the
    /// server after its token check, the launcher, a notebook). This is the only constructor of
    /// [`HumanAuthority`], and agent and tool-execution code never holds a `Steward`.
    /// An agent identity (`agent:…`) is refused, and the refusal audited.
    pub fn human(&self, person: &str) -> Result<HumanAuthority, ApprovalError> {
        let made = HumanAuthority::new(person);
        if made.is_err()
            && person.trim().starts_with(crate::approval::AGENT_PREFIX)
            && let Ok(audit) = self.audit()
        {
            audit.record(&crate::audit::AuditEvent {
                actor: person.trim(),
                event_type: "authority.refused",
                risk: crate::audit::Risk::High,
                chat: None,
                tool: None,
                correlation_id: None,
                payload: &serde_json::json!({ "reason": "an agent identity cannot act as a person" }),
                at: crate::time::now_secs(),
            });
        }
        made
    }

    /// The text index, opened on first use (commands that only read the mirror never pay for
    /// it).
    #[cfg_attr(feature = "testing", visibility::make(pub))]
    pub(crate) fn lexical_index(&self) -> Result<&LexicalIndex, IndexError> {
        // One opener at a time: opening creates (or, on a schema change, rebuilds) the index
        // directory, and a second opener racing it would see it half made and remove it.
        self.open_once(&self.lexical, || LexicalIndex::open(&self.lexical_index_dir()))
    }

    /// Drops and rebuilds every derived index: the lexical index from the mirror, the memory
    /// index from the note files.
    pub fn rebuild_indexes(&self) -> Result<RebuildReport, crate::index::IndexError> {
        let started = std::time::Instant::now();
        let documents = self.lexical_index()?.rebuild(&self.mirror)?;
        // The memory index is rebuilt from its note files; its failure does not undo the mail's.
        let (memory_notes, memory_error) = match self.memory_rebuild() {
            Ok(r) => (Some(r.notes), None),
            Err(e) => (None, Some(e.to_string())),
        };
        Ok(RebuildReport {
            lexical_documents: documents,
            memory_notes,
            memory_error,
            seconds: started.elapsed().as_secs_f64(),
        })
    }
}
