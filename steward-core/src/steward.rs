//! The `Steward` handle: one person's home directory and the stores in it.

use std::path::{Path, PathBuf};

use crate::{
    Limits,
    error::{ErrorKind, StewardError},
    mirror::{MailSource, Mirror, MirrorError, Progress, SyncOptions, SyncSummary},
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
    /// The mirror could not be opened.
    #[error(transparent)]
    Mirror(#[from] MirrorError),
}

impl StewardError for OpenError {
    fn code(&self) -> &'static str {
        match self {
            Self::NoHome => "STEWARD_NO_HOME",
            Self::Home { .. } => "STEWARD_HOME_UNUSABLE",
            Self::InvalidLimit(_) => "STEWARD_INVALID_LIMIT",
            Self::Mirror(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::NoHome | Self::InvalidLimit(_) => ErrorKind::InvalidInput,
            Self::Home { .. } => ErrorKind::Unavailable,
            Self::Mirror(e) => e.kind(),
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

/// Opens a [`Steward`]. No `Default`-driven magic: the home is explicit or documented.
#[derive(Debug, Clone, Default)]
pub struct StewardBuilder {
    home: Option<PathBuf>,
    limits: Limits,
}

impl StewardBuilder {
    /// Uses `home` instead of the default.
    #[must_use]
    pub fn home(mut self, home: impl Into<PathBuf>) -> Self {
        self.home = Some(home.into());
        self
    }

    /// Uses `limits` instead of the reference defaults.
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Creates the home if needed and opens every store in it.
    pub fn open(self) -> Result<Steward, OpenError> {
        self.limits.validate().map_err(OpenError::InvalidLimit)?;
        let home = match self.home {
            Some(h) => h,
            None => default_home().ok_or(OpenError::NoHome)?,
        };
        create_private_dir(&home)
            .map_err(|e| OpenError::Home { path: home.clone(), reason: e.to_string() })?;
        let mirror = Mirror::open(&home, &self.limits)?;
        Ok(Steward { home, limits: self.limits, mirror })
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
    /// Messages in the lexical index.
    pub lexical_documents: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// One person's Steward: the home directory and its stores. Cheap to share behind an `Arc`;
/// every method takes `&self`.
#[derive(Debug)]
pub struct Steward {
    home: PathBuf,
    limits: Limits,
    mirror: Mirror,
}

impl Steward {
    /// Starts building a handle.
    pub fn builder() -> StewardBuilder {
        StewardBuilder::default()
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
    pub fn mirror(&self) -> &Mirror {
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
        let lexical = crate::index::LexicalIndex::open(&self.lexical_index_dir())?;
        // Catch up from the first run after the index's watermark — including runs that
        // crashed before finishing, whose committed batches must not be missed.
        let first = match lexical.watermark()? {
            Some(w) if w < summary.run_id => {
                self.mirror.first_run_after(w).map_err(|e| SyncError::Mirror(e.into()))?
            }
            _ => None,
        };
        match first {
            // This run is the only one the index has not seen, and it changed nothing: only
            // the watermark moves.
            Some((id, _)) if id == summary.run_id && !summary.changed => {
                lexical.set_watermark(summary.run_id)?;
            }
            Some((_, since)) => {
                let n = lexical.apply_since(&self.mirror, since, summary.run_id)?;
                tracing::info!(messages = n, since, "lexical index updated");
            }
            None => {
                let n = lexical.rebuild(&self.mirror)?;
                tracing::info!(messages = n, "lexical index rebuilt");
            }
        }
        Ok(summary)
    }

    /// Drops and rebuilds every derived index from the mirror (today: the lexical index).
    pub fn rebuild_indexes(&self) -> Result<RebuildReport, crate::index::IndexError> {
        let started = std::time::Instant::now();
        let lexical = crate::index::LexicalIndex::open(&self.lexical_index_dir())?;
        let documents = lexical.rebuild(&self.mirror)?;
        Ok(RebuildReport { lexical_documents: documents, seconds: started.elapsed().as_secs_f64() })
    }
}
