//! Backup and restore of a home: the primary stores have no other copy, and a damaged journal
//! tells its owner to restore it from a backup.
//!
//! Owns: [`Steward::backup_create`] (a directory holding a snapshot of every primary store, the
//! attachment blobs and the configuration, and a SHA-256 manifest), [`verify`] (every file
//! that differs, is missing or should not be there, named) and [`restore`] (a verified backup
//! into a new or empty home).
//!
//! What a backup holds:
//! - the primary stores [`PRIMARY_STORES`], each copied with SQLite's online backup API from
//!   its own read-only connection: one step over every page inside one read transaction, so
//!   the copy is the store as of one commit while the server and a sync keep writing (WAL
//!   readers never block writers; a stepwise copy would restart on every write of a busy sync
//!   and might never finish). `VACUUM INTO` would give the same snapshot; the backup API is
//!   what the design names and copies pages without rebuilding them. The copy is switched to a
//!   rollback journal, so it is one self-contained file. Consistency is per store, not one
//!   transaction across them (quit writers for a common point in time);
//! - `blobs/` (content-addressed attachments), listed after the stores were copied, so every
//!   blob a copied row names is there (blobs are written before the rows naming them and are
//!   never removed; a newer, unreferenced one is harmless);
//! - `config.toml`, without its secrets: every key named like a password, a token, a secret or
//!   an API key is removed (`[embed] api_key`, `[llm.targets.*] api_key`, …; keys naming
//!   where a secret is kept, such as `smtp_password_file`, stay) and the file is written back
//!   without its comments; unchanged when it had none;
//! - with [`BackupOptions::include_secrets`] only: `config.toml` verbatim, the owner's access
//!   token ([`crate::access::TOKEN_FILE`]) and the file `[mail] smtp_password_file` names (as
//!   [`SMTP_PASSWORD_COPY`]).
//!
//! Never copied: the derived indexes under `index/` (the text index and `vectors.db`, whose
//! embedding state lives with the vectors): a restored home rebuilds the text index on its
//! first sync or search (it has no watermark) and re-embeds everything on its next embedding
//! drain. Nor anything else in the home (a demo mailbox), the OS keyring or the environment.
//!
//! A backup is written under a `.pending-*` sibling of its directory, 0700 directories and
//! 0600 files, each file synced, and renamed to its name once the manifest is written: a
//! directory without `.pending-` is complete; a failure leaves the `.pending-*` directory,
//! which [`verify`] refuses (no manifest). A restore verifies first, copies into a
//! `.pending-restore-*` sibling of the home (checking every hash again) and renames it.
//!
//! Never does: write into an existing non-empty directory, restore into a non-empty home,
//! open a store of the backup with SQLite (verification hashes files), or put a secret's value
//! in a manifest or an error.
//!
//! Bounds: [`MAX_BACKUP_FILES`] files, a manifest of at most [`MAX_MANIFEST_BYTES`], a
//! configuration of at most [`MAX_CONFIG_BYTES`], [`MAX_PROBLEMS_LISTED`] names in an error's
//! message (the error carries them all), [`STORE_BUSY_RETRIES`] retries of a busy store.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs::{self, File},
    io::{self, Write},
    path::{Path, PathBuf},
    time::Duration,
};

use rusqlite::{
    Connection, OpenFlags,
    backup::{Backup, StepResult},
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{
    Steward,
    error::{Cause, ErrorKind, StewardError},
    mirror::hex,
};

/// The manifest's name inside a backup directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The manifest format this build writes and the newest it reads.
/// Fixed (not a setting).
pub const MANIFEST_FORMAT: u32 = 1;
/// The primary stores of a home, copied when present (an absent one is listed as absent).
pub const PRIMARY_STORES: [&str; 7] =
    ["mirror.db", "steward.db", "ops.db", "audit.db", "watches.db", "usage.db", "chats.db"];
/// The derived indexes' directory in a home: never copied, rebuilt after a restore.
pub const DERIVED_DIR: &str = "index";
/// The attachment blobs' directory in a home.
pub const BLOBS_DIR: &str = "blobs";
/// The configuration file of a home.
pub const CONFIG_FILE: &str = crate::embed::CONFIG_FILE;
/// Where a backup with secrets keeps the SMTP password file (`[mail] smtp_password_file`), and
/// where a restore puts it in the new home.
pub const SMTP_PASSWORD_COPY: &str = "smtp-password";
/// The prefix of a backup (or restore) still being written.
pub const PENDING_PREFIX: &str = ".pending-";
/// Most files in one backup.
/// Fixed (not a setting).
pub const MAX_BACKUP_FILES: usize = 1_000_000;
/// Largest manifest read (a million files take about 250 MB of JSON).
/// Fixed (not a setting).
pub const MAX_MANIFEST_BYTES: u64 = 512 * 1024 * 1024;
/// Largest `config.toml` read (its secrets are removed in memory).
/// Fixed (not a setting).
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;
/// Names listed in an error's message (the error itself carries every problem).
/// Fixed (not a setting).
pub const MAX_PROBLEMS_LISTED: usize = 20;
/// Times a store that is busy (locked by a writer's checkpoint) is tried again, 100 ms apart.
/// Fixed (not a setting).
pub const STORE_BUSY_RETRIES: u32 = 50;

/// Fixed (not a setting).
const STORE_BUSY_PAUSE: Duration = Duration::from_millis(100);

/// Why a backup, a verification or a restore failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackupError {
    /// The directory named cannot hold a backup (or a home): no name, or inside the home.
    #[error("cannot use {path}: {why}")]
    BadTarget {
        /// The directory.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The backup directory exists and is not empty: a backup is never written over another.
    #[error("{0} exists and is not empty; choose a new directory for the backup")]
    TargetExists(PathBuf),
    /// The home to restore into exists and is not empty.
    #[error("{0} is not empty; restore only into a new or empty home")]
    TargetNotEmpty(PathBuf),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// SQLite could not copy a store.
    #[error("cannot copy the store {path}: {source}")]
    Store {
        /// The store (or its copy).
        path: PathBuf,
        /// The cause.
        #[source]
        source: Cause,
    },
    /// A store stayed locked for every retry.
    #[error("the store {0} stayed busy; try again")]
    Busy(PathBuf),
    /// `config.toml` cannot be read, so its secrets cannot be left out.
    #[error(
        "{path} cannot be read to leave its secrets out: {detail} (fix it, or include secrets)"
    )]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong (never a value from the file).
        detail: String,
    },
    /// More than [`MAX_BACKUP_FILES`] files.
    #[error("more than {max} files")]
    TooManyFiles {
        /// The bound.
        max: usize,
    },
    /// The directory has no manifest: not a backup, or one that did not finish.
    #[error("{0} has no {MANIFEST_FILE}: not a backup, or an incomplete one")]
    ManifestMissing(PathBuf),
    /// The manifest does not parse or names impossible files.
    #[error("the manifest {path} cannot be used: {detail}")]
    ManifestInvalid {
        /// The manifest.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The backup was written by a newer Steward.
    #[error("{path} has backup format {found}; this build reads up to {MANIFEST_FORMAT}")]
    FormatUnknown {
        /// The manifest.
        path: PathBuf,
        /// Its format.
        found: u64,
    },
    /// Files differ from the manifest: changed, missing, or not in it.
    #[error("the backup {dir} does not match its manifest: {}", listed(.problems))]
    Mismatch {
        /// The backup directory.
        dir: PathBuf,
        /// Every file that differs, by path.
        problems: Vec<BackupProblem>,
    },
}

impl StewardError for BackupError {
    fn code(&self) -> &'static str {
        match self {
            Self::BadTarget { .. } => "BACKUP_TARGET_INVALID",
            Self::TargetExists(_) => "BACKUP_TARGET_EXISTS",
            Self::TargetNotEmpty(_) => "BACKUP_TARGET_NOT_EMPTY",
            Self::Io { .. } => "BACKUP_IO",
            Self::Store { .. } => "BACKUP_STORE_FAILED",
            Self::Busy(_) => "BACKUP_STORE_BUSY",
            Self::Config { .. } => "BACKUP_CONFIG_UNREADABLE",
            Self::TooManyFiles { .. } => "BACKUP_TOO_MANY_FILES",
            Self::ManifestMissing(_) => "BACKUP_MANIFEST_MISSING",
            Self::ManifestInvalid { .. } => "BACKUP_MANIFEST_INVALID",
            Self::FormatUnknown { .. } => "BACKUP_FORMAT_UNKNOWN",
            Self::Mismatch { .. } => "BACKUP_MISMATCH",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::BadTarget { .. } | Self::Config { .. } | Self::TooManyFiles { .. } => {
                ErrorKind::InvalidInput
            }
            Self::TargetExists(_) | Self::TargetNotEmpty(_) => ErrorKind::Conflict,
            Self::Io { .. } | Self::Store { .. } | Self::Busy(_) => ErrorKind::Unavailable,
            Self::ManifestMissing(_) => ErrorKind::NotFound,
            Self::ManifestInvalid { .. } | Self::FormatUnknown { .. } | Self::Mismatch { .. } => {
                ErrorKind::Corrupt
            }
        }
    }
}

/// The first [`MAX_PROBLEMS_LISTED`] problems, and how many more.
fn listed(problems: &[BackupProblem]) -> String {
    let mut text = problems
        .iter()
        .take(MAX_PROBLEMS_LISTED)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if problems.len() > MAX_PROBLEMS_LISTED {
        text.push_str(&format!(" and {} more", problems.len() - MAX_PROBLEMS_LISTED));
    }
    text
}

/// One file of a backup that is not what its manifest says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackupProblem {
    /// The path inside the backup (`/`-separated).
    pub path: String,
    /// What is wrong with it.
    pub issue: BackupIssue,
}

impl std::fmt::Display for BackupProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.path, self.issue.as_str())
    }
}

/// What is wrong with a file of a backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackupIssue {
    /// Listed, but not there.
    Missing,
    /// Its size or SHA-256 differs from the manifest's.
    Changed,
    /// There, but not listed.
    Unexpected,
    /// Listed or found, but not a regular file (a directory, a symbolic link).
    NotAFile,
}

impl BackupIssue {
    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Changed => "changed",
            Self::Unexpected => "unexpected",
            Self::NotAFile => "not_a_file",
        }
    }
}

/// How to back up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackupOptions {
    /// Also copy the secrets: `config.toml` verbatim, the access token and the SMTP password
    /// file. Off by default: such a backup is as sensitive as the machine's keys.
    pub include_secrets: bool,
}

/// Where a backup, a verification or a restore is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackupPhase {
    /// Copying the stores.
    Stores,
    /// Copying the configuration, the secrets and the blobs.
    Files,
    /// Hashing a backup's files.
    Verify,
    /// Copying a backup into a home.
    Restore,
}

/// Progress, reported after each file. `files_total` of a backup grows once, when the blobs
/// have been listed (after the stores were copied).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BackupProgress {
    /// The phase.
    pub phase: BackupPhase,
    /// Files done.
    pub files_done: u64,
    /// Files known so far.
    pub files_total: u64,
    /// Bytes of the files done.
    pub bytes_done: u64,
}

/// What a file of a backup is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackupFileKind {
    /// A SQLite store (its schema version is recorded).
    Store,
    /// `config.toml`.
    Config,
    /// An attachment blob.
    Blob,
    /// A secret (the access token, the SMTP password), only with `include_secrets`.
    Secret,
}

/// One file of a backup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupFile {
    /// Its path inside the backup and the home (`/`-separated).
    pub path: String,
    /// What it is.
    pub kind: BackupFileKind,
    /// Bytes.
    pub size: u64,
    /// SHA-256, lowercase hex.
    pub sha256: String,
    /// A store's schema version (`PRAGMA user_version`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_version: Option<i64>,
    /// Where a secret kept outside the home came from (the SMTP password file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Something a backup left out on purpose, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupOmission {
    /// The path (in the home, or a secret's own path).
    pub path: String,
    /// Why.
    pub reason: String,
}

/// `manifest.json`: what a backup holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupManifest {
    /// [`MANIFEST_FORMAT`] when written.
    pub format: u32,
    /// Unix seconds.
    pub created_at: i64,
    /// The Steward version that wrote it.
    pub steward_version: String,
    /// The home it was taken from.
    pub source_home: String,
    /// Whether secrets were included.
    pub secrets_included: bool,
    /// Every file, with its size and hash.
    pub files: Vec<BackupFile>,
    /// Optional sources that did not exist (a store never opened, no `config.toml`).
    #[serde(default)]
    pub absent: Vec<String>,
    /// What was left out on purpose (derived indexes, secrets).
    #[serde(default)]
    pub omitted: Vec<BackupOmission>,
    /// The `config.toml` keys removed as secrets (dotted paths; never their values).
    #[serde(default)]
    pub stripped_keys: Vec<String>,
}

impl BackupManifest {
    /// The bytes of every file.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// The file at `path`, if listed.
    pub fn file(&self, path: &str) -> Option<&BackupFile> {
        self.files.iter().find(|f| f.path == path)
    }
}

/// What [`restore`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestoreReport {
    /// The home restored into.
    pub home: PathBuf,
    /// Files written.
    pub files: u64,
    /// Bytes written.
    pub bytes: u64,
    /// The stores restored.
    pub stores: Vec<String>,
    /// When the backup was taken, Unix seconds.
    pub backup_created_at: i64,
    /// The Steward version that took it.
    pub backup_steward_version: String,
    /// Whether secrets were restored (the access token, the SMTP password).
    pub secrets_restored: bool,
    /// Where the SMTP password was restored, when it was: point `[mail] smtp_password_file` at
    /// it if the original path does not exist on this machine.
    pub smtp_password_file: Option<PathBuf>,
    /// What is rebuilt on first use rather than restored.
    pub rebuilt_on_first_use: Vec<String>,
}

impl Steward {
    /// Backs this home up into `dir`, which must not exist or be empty (see [`crate::backup`]):
    /// every primary store as of one commit each (while the server and a sync keep writing),
    /// the blobs and the configuration, secrets only with [`BackupOptions::include_secrets`],
    /// and a SHA-256 manifest. `progress` gets a report after every file.
    pub fn backup_create(
        &self,
        dir: &Path,
        opts: &BackupOptions,
        progress: &mut dyn FnMut(&BackupProgress),
    ) -> Result<BackupManifest, BackupError> {
        create(
            self.home(),
            Duration::from_millis(self.limits().busy_timeout_ms),
            dir,
            opts,
            progress,
        )
    }
}

/// Files done so far, for progress reports.
struct Tally {
    done: u64,
    total: u64,
    bytes: u64,
}

impl Tally {
    fn step(&mut self, phase: BackupPhase, bytes: u64, progress: &mut dyn FnMut(&BackupProgress)) {
        self.done += 1;
        // Sizes come from a manifest, which may lie.
        self.bytes = self.bytes.saturating_add(bytes);
        progress(&BackupProgress {
            phase,
            files_done: self.done,
            files_total: self.total.max(self.done),
            bytes_done: self.bytes,
        });
    }
}

fn create(
    home: &Path,
    busy_timeout: Duration,
    dir: &Path,
    opts: &BackupOptions,
    progress: &mut dyn FnMut(&BackupProgress),
) -> Result<BackupManifest, BackupError> {
    let (parent, name) = split_target(dir)?;
    if !is_absent_or_empty(dir)? {
        return Err(BackupError::TargetExists(dir.to_path_buf()));
    }
    fs::create_dir_all(&parent).map_err(|e| io_err(&parent, e))?;
    let home_real = fs::canonicalize(home).map_err(|e| io_err(home, e))?;
    let parent_real = fs::canonicalize(&parent).map_err(|e| io_err(&parent, e))?;
    if parent_real.join(&name).starts_with(&home_real) {
        return Err(BackupError::BadTarget {
            path: dir.to_path_buf(),
            why: format!("it is inside the home it backs up ({})", home.display()),
        });
    }
    let staging = parent.join(pending_name("", &name));
    create_private_dir(&staging)?;

    let mut m = BackupManifest {
        format: MANIFEST_FORMAT,
        created_at: crate::time::now_secs(),
        steward_version: env!("CARGO_PKG_VERSION").to_owned(),
        source_home: home.display().to_string(),
        secrets_included: opts.include_secrets,
        files: Vec::new(),
        absent: Vec::new(),
        omitted: Vec::new(),
        stripped_keys: Vec::new(),
    };
    let stores: Vec<&str> =
        PRIMARY_STORES.iter().copied().filter(|s| home.join(s).is_file()).collect();
    m.absent
        .extend(PRIMARY_STORES.iter().filter(|s| !stores.contains(*s)).map(|s| (*s).to_owned()));
    let config_path = home.join(CONFIG_FILE);
    let token_path = home.join(crate::access::TOKEN_FILE);
    let mut tally = Tally {
        done: 0,
        total: (stores.len()
            + usize::from(config_path.is_file())
            + usize::from(opts.include_secrets && token_path.is_file())) as u64,
        bytes: 0,
    };

    // The stores first: the blobs listed afterwards include every blob their rows name.
    for store in stores {
        let dest = staging.join(store);
        let user_version = snapshot_store(&home.join(store), &dest, busy_timeout)?;
        let (size, sha256) = hash_file(&dest)?;
        m.files.push(BackupFile {
            path: store.to_owned(),
            kind: BackupFileKind::Store,
            size,
            sha256,
            user_version: Some(user_version),
            source: None,
        });
        tally.step(BackupPhase::Stores, size, progress);
    }

    // The configuration, without its secrets unless they are wanted.
    let mut smtp_password_file = None;
    if config_path.is_file() {
        let prepared = read_config(&config_path, opts.include_secrets)?;
        let (size, sha256) = write_private(&staging.join(CONFIG_FILE), &prepared.bytes)?;
        m.files.push(BackupFile {
            path: CONFIG_FILE.to_owned(),
            kind: BackupFileKind::Config,
            size,
            sha256,
            user_version: None,
            source: None,
        });
        m.stripped_keys = prepared.stripped;
        smtp_password_file = prepared.smtp_password_file;
        tally.step(BackupPhase::Files, size, progress);
    } else {
        m.absent.push(CONFIG_FILE.to_owned());
    }

    // The secrets kept in files.
    if token_path.is_file() {
        if opts.include_secrets {
            let (size, sha256) =
                copy_hashed(&token_path, &staging.join(crate::access::TOKEN_FILE))?;
            m.files.push(BackupFile {
                path: crate::access::TOKEN_FILE.to_owned(),
                kind: BackupFileKind::Secret,
                size,
                sha256,
                user_version: None,
                source: None,
            });
            tally.step(BackupPhase::Files, size, progress);
        } else {
            m.omitted.push(BackupOmission {
                path: crate::access::TOKEN_FILE.to_owned(),
                reason: "a secret (the owner's access token): copied only with secrets included"
                    .to_owned(),
            });
        }
    } else {
        m.absent.push(crate::access::TOKEN_FILE.to_owned());
    }
    if let Some(source) = smtp_password_file {
        let shown = source.display().to_string();
        if !opts.include_secrets {
            m.omitted.push(BackupOmission {
                path: shown,
                reason: "a secret (the SMTP password, [mail] smtp_password_file): copied only \
                         with secrets included"
                    .to_owned(),
            });
        } else if source.is_file() {
            tally.total += 1;
            let (size, sha256) = copy_hashed(&source, &staging.join(SMTP_PASSWORD_COPY))?;
            m.files.push(BackupFile {
                path: SMTP_PASSWORD_COPY.to_owned(),
                kind: BackupFileKind::Secret,
                size,
                sha256,
                user_version: None,
                source: Some(shown),
            });
            tally.step(BackupPhase::Files, size, progress);
        } else {
            m.absent.push(shown);
        }
    }
    if home.join(DERIVED_DIR).exists() {
        m.omitted.push(BackupOmission {
            path: format!("{DERIVED_DIR}/"),
            reason: "derived (the text index and vectors.db): rebuilt from the mirror after a \
                     restore"
                .to_owned(),
        });
    }

    // The blobs.
    let mut made = BTreeSet::new();
    let blobs = home.join(BLOBS_DIR);
    if blobs.is_dir() {
        let limit = MAX_BACKUP_FILES.saturating_sub(m.files.len());
        let found = walk(&blobs, BLOBS_DIR, limit)?;
        // Temporary files of a blob being written (`.tmp-…`) and anything not a regular file
        // are not blobs.
        let found: Vec<Found> =
            found.into_iter().filter(|f| f.regular && f.utf8 && !hidden(&f.rel)).collect();
        tally.total += found.len() as u64;
        for f in found {
            let dest = staging.join(relative_path(&f.rel));
            if let Some(d) = dest.parent() {
                create_private_dir(d)?;
                made.insert(d.to_path_buf());
            }
            let (size, sha256) = copy_hashed(&f.path, &dest)?;
            m.files.push(BackupFile {
                path: f.rel,
                kind: BackupFileKind::Blob,
                size,
                sha256,
                user_version: None,
                source: None,
            });
            tally.step(BackupPhase::Files, size, progress);
        }
    }

    let text = serde_json::to_vec_pretty(&m).map_err(|e| BackupError::ManifestInvalid {
        path: staging.join(MANIFEST_FILE),
        detail: e.to_string(),
    })?;
    write_private(&staging.join(MANIFEST_FILE), &text)?;
    // Every directory made, deepest first, before the rename declares the backup complete.
    for d in made.iter().rev() {
        sync_dir(d);
    }
    sync_dir(&staging);
    if dir.exists() {
        // Empty (checked above): replaced by the finished backup.
        fs::remove_dir(dir).map_err(|e| io_err(dir, e))?;
    }
    fs::rename(&staging, dir).map_err(|e| io_err(dir, e))?;
    sync_dir(&parent);
    Ok(m)
}

/// Checks the backup in `dir` against its manifest: every listed file is there with its size
/// and SHA-256, and nothing else is. Returns the manifest; any difference is
/// [`BackupError::Mismatch`] naming every file that differs. `progress` gets a report after
/// every file.
pub fn verify(
    dir: &Path,
    progress: &mut dyn FnMut(&BackupProgress),
) -> Result<BackupManifest, BackupError> {
    let manifest = read_manifest(dir)?;
    let mut found: BTreeMap<String, Found> = walk(dir, "", MAX_BACKUP_FILES + 1)?
        .into_iter()
        .filter(|f| f.rel != MANIFEST_FILE)
        .map(|f| (f.rel.clone(), f))
        .collect();
    let mut problems = Vec::new();
    let mut tally = Tally { done: 0, total: manifest.files.len() as u64, bytes: 0 };
    for f in &manifest.files {
        let issue = match found.remove(&f.path) {
            None => Some(BackupIssue::Missing),
            Some(x) if !x.regular => Some(BackupIssue::NotAFile),
            Some(x) => {
                let (size, sha256) = hash_file(&x.path)?;
                (size != f.size || sha256 != f.sha256).then_some(BackupIssue::Changed)
            }
        };
        if let Some(issue) = issue {
            problems.push(BackupProblem { path: f.path.clone(), issue });
        }
        tally.step(BackupPhase::Verify, f.size, progress);
    }
    problems.extend(found.into_values().map(|x| BackupProblem {
        path: x.rel,
        issue: if x.regular { BackupIssue::Unexpected } else { BackupIssue::NotAFile },
    }));
    if problems.is_empty() {
        Ok(manifest)
    } else {
        Err(BackupError::Mismatch { dir: dir.to_path_buf(), problems })
    }
}

/// Restores the backup in `dir` into `home`, which must not exist or be empty
/// ([`BackupError::TargetNotEmpty`]): verifies the backup first, then copies every file
/// (directories 0700, files 0600), checking each hash again. The derived indexes are not in a
/// backup: the restored home rebuilds its text index on its first sync or search and
/// re-embeds on its next embedding drain. `progress` gets a report after every file.
pub fn restore(
    dir: &Path,
    home: &Path,
    progress: &mut dyn FnMut(&BackupProgress),
) -> Result<RestoreReport, BackupError> {
    let (parent, name) = split_target(home)?;
    if !is_absent_or_empty(home)? {
        return Err(BackupError::TargetNotEmpty(home.to_path_buf()));
    }
    let manifest = verify(dir, progress)?;
    fs::create_dir_all(&parent).map_err(|e| io_err(&parent, e))?;
    // A home inside the backup would make the backup fail its own verification from then on.
    let backup_real = fs::canonicalize(dir).map_err(|e| io_err(dir, e))?;
    let parent_real = fs::canonicalize(&parent).map_err(|e| io_err(&parent, e))?;
    if parent_real.join(&name).starts_with(&backup_real) {
        return Err(BackupError::BadTarget {
            path: home.to_path_buf(),
            why: format!("it is inside the backup it restores ({})", dir.display()),
        });
    }
    let staging = parent.join(pending_name("restore-", &name));
    create_private_dir(&staging)?;
    let mut tally = Tally { done: 0, total: manifest.files.len() as u64, bytes: 0 };
    let mut stores = Vec::new();
    let mut smtp_password_file = None;
    let mut made = BTreeSet::new();
    for f in &manifest.files {
        let rel = relative_path(&f.path);
        let dest = staging.join(&rel);
        if let Some(d) = dest.parent() {
            create_private_dir(d)?;
            made.insert(d.to_path_buf());
        }
        let (size, sha256) = copy_hashed(&dir.join(&rel), &dest)?;
        if size != f.size || sha256 != f.sha256 {
            // Changed since it was verified a moment ago.
            return Err(BackupError::Mismatch {
                dir: dir.to_path_buf(),
                problems: vec![BackupProblem { path: f.path.clone(), issue: BackupIssue::Changed }],
            });
        }
        match f.kind {
            BackupFileKind::Store => stores.push(f.path.clone()),
            BackupFileKind::Secret if f.path == SMTP_PASSWORD_COPY => {
                smtp_password_file = Some(home.join(SMTP_PASSWORD_COPY));
            }
            BackupFileKind::Config | BackupFileKind::Blob | BackupFileKind::Secret => {}
        }
        tally.step(BackupPhase::Restore, size, progress);
    }
    for d in made.iter().rev() {
        sync_dir(d);
    }
    sync_dir(&staging);
    if !is_absent_or_empty(home)? {
        return Err(BackupError::TargetNotEmpty(home.to_path_buf()));
    }
    if home.exists() {
        fs::remove_dir(home).map_err(|e| io_err(home, e))?;
    }
    fs::rename(&staging, home).map_err(|e| io_err(home, e))?;
    sync_dir(&parent);
    let secrets_restored = manifest.files.iter().any(|f| f.kind == BackupFileKind::Secret);
    Ok(RestoreReport {
        home: home.to_path_buf(),
        files: tally.done,
        bytes: tally.bytes,
        stores,
        backup_created_at: manifest.created_at,
        backup_steward_version: manifest.steward_version,
        secrets_restored,
        smtp_password_file,
        rebuilt_on_first_use: vec![
            format!("{DERIVED_DIR}/lexical (on the first sync or search)"),
            format!("{DERIVED_DIR}/vectors.db (on the next embedding drain)"),
        ],
    })
}

/// Copies the store at `src` into the new file `dest` with the online backup API, and returns
/// the copy's schema version.
fn snapshot_store(src: &Path, dest: &Path, busy_timeout: Duration) -> Result<i64, BackupError> {
    let failed = |path: &Path| {
        let path = path.to_path_buf();
        move |e: rusqlite::Error| BackupError::Store { path, source: Box::new(e) }
    };
    // Read-only: the source is never written, whatever state it is in.
    let from = Connection::open_with_flags(
        src,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(failed(src))?;
    from.busy_timeout(busy_timeout).map_err(failed(src))?;
    // Created 0600 first: SQLite gives its journal the database file's mode.
    drop(create_private_file(dest)?);
    let mut to = Connection::open_with_flags(
        dest,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(failed(dest))?;
    {
        let backup = Backup::new(&from, &mut to).map_err(failed(src))?;
        let mut retries = 0;
        loop {
            // Every page in one step: one read transaction, so one consistent snapshot that a
            // concurrent writer cannot restart.
            match backup.step(-1).map_err(failed(src))? {
                StepResult::Done => break,
                StepResult::More => {}
                _ if retries < STORE_BUSY_RETRIES => {
                    retries += 1;
                    std::thread::sleep(STORE_BUSY_PAUSE);
                }
                _ => return Err(BackupError::Busy(src.to_path_buf())),
            }
        }
    }
    drop(from);
    // The copy carries the source's WAL flag; a rollback journal makes it one self-contained
    // file (the store turns WAL on again when it is opened).
    let mode: String =
        to.query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0)).map_err(failed(dest))?;
    if !mode.eq_ignore_ascii_case("delete") {
        return Err(BackupError::Store {
            path: dest.to_path_buf(),
            source: format!("the copy stayed in journal mode {mode}").into(),
        });
    }
    let version: i64 =
        to.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(failed(dest))?;
    to.close().map_err(|(_, e)| failed(dest)(e))?;
    // A checkpointed, closed copy in rollback mode leaves nothing beside it that matters.
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut side = dest.as_os_str().to_owned();
        side.push(suffix);
        let side = PathBuf::from(side);
        if side.exists() {
            fs::remove_file(&side).map_err(|e| io_err(&side, e))?;
        }
    }
    set_mode(dest, 0o600)?;
    Ok(version)
}

/// `config.toml` as it goes into a backup.
struct PreparedConfig {
    bytes: Vec<u8>,
    stripped: Vec<String>,
    smtp_password_file: Option<PathBuf>,
}

fn read_config(path: &Path, include_secrets: bool) -> Result<PreparedConfig, BackupError> {
    let bad = |detail: String| BackupError::Config { path: path.to_path_buf(), detail };
    let size = fs::metadata(path).map_err(|e| io_err(path, e))?.len();
    if size > MAX_CONFIG_BYTES {
        return Err(bad(format!("it is larger than {MAX_CONFIG_BYTES} bytes")));
    }
    let bytes = fs::read(path).map_err(|e| io_err(path, e))?;
    let parsed =
        std::str::from_utf8(&bytes).map_err(|_| "it is not UTF-8".to_owned()).and_then(|text| {
            // The parser's message quotes the offending line, which may hold a secret.
            toml::from_str::<toml::Table>(text).map_err(|_| "it is not valid TOML".to_owned())
        });
    let mut table = match parsed {
        Ok(t) => t,
        // Copied as it is, secrets and all, since that was asked for.
        Err(_) if include_secrets => {
            return Ok(PreparedConfig { bytes, stripped: Vec::new(), smtp_password_file: None });
        }
        Err(detail) => return Err(bad(detail)),
    };
    let smtp_password_file = table
        .get("mail")
        .and_then(|m| m.get("smtp_password_file"))
        .and_then(toml::Value::as_str)
        .map(PathBuf::from);
    if include_secrets {
        return Ok(PreparedConfig { bytes, stripped: Vec::new(), smtp_password_file });
    }
    let mut stripped = Vec::new();
    strip_secrets(&mut table, "", &mut stripped);
    // Unchanged only when nothing was removed and there is no comment: a comment may hold a
    // secret too (`# api_key = "sk-…"`, moved to the environment and left behind).
    if stripped.is_empty() && !bytes.contains(&b'#') {
        return Ok(PreparedConfig { bytes, stripped, smtp_password_file });
    }
    let text = toml::to_string(&table).map_err(|e| bad(e.to_string()))?;
    Ok(PreparedConfig { bytes: text.into_bytes(), stripped, smtp_password_file })
}

/// Removes every key of `table` (at any depth, in arrays of tables too) that names a secret,
/// recording its dotted path.
fn strip_secrets(table: &mut toml::Table, prefix: &str, stripped: &mut Vec<String>) {
    table.retain(|key, value| {
        let path = if prefix.is_empty() { key.to_owned() } else { format!("{prefix}.{key}") };
        if is_secret_key(key) {
            stripped.push(path);
            return false;
        }
        strip_value(value, &path, stripped);
        true
    });
}

fn strip_value(value: &mut toml::Value, path: &str, stripped: &mut Vec<String>) {
    match value {
        toml::Value::Table(t) => strip_secrets(t, path, stripped),
        toml::Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                strip_value(item, &format!("{path}[{i}]"), stripped);
            }
        }
        _ => {}
    }
}

/// Whether a configuration key holds a secret: named like a password, a token, a secret or an
/// API, access or private key. A key naming where a secret is kept (`…_file`, `…_keyring`,
/// `…_path`, `…_env`) does not.
fn is_secret_key(key: &str) -> bool {
    const WORDS: &[&str] = &[
        "password",
        "passwd",
        "passphrase",
        "secret",
        "token",
        "apikey",
        "credential",
        "credentials",
    ];
    const PAIRS: &[&str] = &["api_key", "access_key", "private_key"];
    let lower = key.to_ascii_lowercase().replace('-', "_");
    let words: Vec<&str> = lower.split(['_', '.']).filter(|w| !w.is_empty()).collect();
    if matches!(words.last(), Some(&("file" | "keyring" | "path" | "env"))) {
        return false;
    }
    words.iter().any(|w| WORDS.contains(w)) || PAIRS.iter().any(|p| lower.contains(p))
}

fn read_manifest(dir: &Path) -> Result<BackupManifest, BackupError> {
    let path = dir.join(MANIFEST_FILE);
    let invalid = |detail: String| BackupError::ManifestInvalid { path: path.clone(), detail };
    // Not followed if it is a link: a manifest that is a link to a device or a pipe would be
    // read without end.
    let size = match fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_file() => meta.len(),
        Ok(_) => return Err(invalid("it is not a regular file".to_owned())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(BackupError::ManifestMissing(dir.to_path_buf()));
        }
        Err(e) => return Err(io_err(&path, e)),
    };
    if size > MAX_MANIFEST_BYTES {
        return Err(invalid(format!("it is larger than {MAX_MANIFEST_BYTES} bytes")));
    }
    // Read at most the bound, also if the file grew since it was looked at.
    let mut bytes = Vec::new();
    io::Read::read_to_end(
        &mut io::Read::take(
            File::open(&path).map_err(|e| io_err(&path, e))?,
            MAX_MANIFEST_BYTES + 1,
        ),
        &mut bytes,
    )
    .map_err(|e| io_err(&path, e))?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(invalid(format!("it is larger than {MAX_MANIFEST_BYTES} bytes")));
    }
    // The format first, skipping the rest without building it (a newer format may not parse
    // as this one; a generic JSON value of a large manifest would take many times its size).
    #[derive(Deserialize)]
    struct Format {
        format: Option<u64>,
    }
    let found = serde_json::from_slice::<Format>(&bytes)
        .map_err(|e| invalid(e.to_string()))?
        .format
        .ok_or_else(|| invalid("no format".to_owned()))?;
    if found > u64::from(MANIFEST_FORMAT) {
        return Err(BackupError::FormatUnknown { path: path.clone(), found });
    }
    let m: BackupManifest = serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
    if m.files.len() > MAX_BACKUP_FILES {
        return Err(invalid(format!("more than {MAX_BACKUP_FILES} files")));
    }
    let mut seen = BTreeSet::new();
    for f in &m.files {
        // A restore writes these paths under the new home: nothing may point elsewhere.
        if !is_safe_relative(&f.path) {
            return Err(invalid(format!("{:?} is not a plain relative path", f.path)));
        }
        if !seen.insert(f.path.as_str()) {
            return Err(invalid(format!("{} is listed twice", f.path)));
        }
        if f.sha256.len() != 64 || !f.sha256.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err(invalid(format!("{} has no SHA-256", f.path)));
        }
    }
    Ok(m)
}

/// `/`-separated, relative, without `.`, `..`, empty or hidden-root parts, and not the
/// manifest itself.
fn is_safe_relative(rel: &str) -> bool {
    !rel.is_empty()
        && rel != MANIFEST_FILE
        && !rel.starts_with(PENDING_PREFIX)
        && rel.split('/').all(|part| {
            !part.is_empty() && part != "." && part != ".." && !part.contains(['\\', ':', '\0'])
        })
}

fn relative_path(rel: &str) -> PathBuf {
    rel.split('/').collect()
}

/// Whether any part of `rel` starts with a dot (a blob being written: `.tmp-…`).
fn hidden(rel: &str) -> bool {
    rel.split('/').any(|part| part.starts_with('.'))
}

/// A file or other non-directory entry found under a directory.
struct Found {
    /// `/`-separated, under the prefix given.
    rel: String,
    path: PathBuf,
    regular: bool,
    /// Whether every part of the name is UTF-8 (`rel` is lossy otherwise).
    utf8: bool,
}

/// Every non-directory entry under `root` (symbolic links are not followed), at most `max`.
fn walk(root: &Path, prefix: &str, max: usize) -> Result<Vec<Found>, BackupError> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), prefix.to_owned(), true)];
    while let Some((dir, rel, utf8)) = stack.pop() {
        for entry in fs::read_dir(&dir).map_err(|e| io_err(&dir, e))? {
            let entry = entry.map_err(|e| io_err(&dir, e))?;
            let name = entry.file_name();
            let part_utf8 = name.to_str().is_some();
            let name = name.to_string_lossy();
            let child_rel =
                if rel.is_empty() { name.into_owned() } else { format!("{rel}/{name}") };
            let path = entry.path();
            let kind = entry.file_type().map_err(|e| io_err(&path, e))?;
            if kind.is_dir() {
                stack.push((path, child_rel, utf8 && part_utf8));
                continue;
            }
            if out.len() >= max {
                return Err(BackupError::TooManyFiles { max: MAX_BACKUP_FILES });
            }
            out.push(Found {
                rel: child_rel,
                path,
                regular: kind.is_file(),
                utf8: utf8 && part_utf8,
            });
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

/// The parent and the final name of a target directory.
fn split_target(dir: &Path) -> Result<(PathBuf, String), BackupError> {
    let bad = |why: &str| BackupError::BadTarget { path: dir.to_path_buf(), why: why.to_owned() };
    let name = match dir.components().next_back() {
        Some(std::path::Component::Normal(n)) => n.to_string_lossy().into_owned(),
        _ => return Err(bad("it has no final name")),
    };
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((parent, name))
}

/// Whether `dir` does not exist or is an empty directory.
fn is_absent_or_empty(dir: &Path) -> Result<bool, BackupError> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(BackupError::Io { path: dir.to_path_buf(), source: e }),
        Ok(meta) if !meta.is_dir() => Ok(false),
        Ok(_) => Ok(fs::read_dir(dir).map_err(|e| io_err(dir, e))?.next().is_none()),
    }
}

/// `.pending-<what><name>-<pid>-<nanos>`: unique per process and moment.
fn pending_name(what: &str, name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{PENDING_PREFIX}{what}{name}-{}-{}-{nanos}",
        std::process::id(),
        crate::time::now_secs()
    )
}

fn io_err(path: &Path, source: io::Error) -> BackupError {
    BackupError::Io { path: path.to_path_buf(), source }
}

/// Creates `dir` and its missing parents, mode 0700.
fn create_private_dir(dir: &Path) -> Result<(), BackupError> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(|e| io_err(dir, e))?;
    set_mode(dir, 0o700)
}

/// Creates the new file `path`, mode 0600.
fn create_private_file(path: &Path) -> Result<File, BackupError> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    options.open(path).map_err(|e| io_err(path, e))
}

/// Sets the permission bits of `path` (Unix; elsewhere the directory's ACLs decide).
fn set_mode(path: &Path, mode: u32) -> Result<(), BackupError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(|e| io_err(path, e))?;
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
    Ok(())
}

/// Best effort: makes a directory's entries (a rename, new files) durable. (Opening a
/// directory fails where it cannot be synced this way, and then nothing happens.)
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// A writer that hashes and counts what passes through it.
struct Hashing<W> {
    inner: W,
    sha: Sha256,
    bytes: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The size and SHA-256 of the file at `path`.
fn hash_file(path: &Path) -> Result<(u64, String), BackupError> {
    let mut input = File::open(path).map_err(|e| io_err(path, e))?;
    let mut h = Hashing { inner: io::sink(), sha: Sha256::new(), bytes: 0 };
    io::copy(&mut input, &mut h).map_err(|e| io_err(path, e))?;
    Ok((h.bytes, hex(&h.sha.finalize())))
}

/// Copies `src` into the new file `dest` (0600, synced); returns its size and SHA-256.
fn copy_hashed(src: &Path, dest: &Path) -> Result<(u64, String), BackupError> {
    let mut input = File::open(src).map_err(|e| io_err(src, e))?;
    let out = create_private_file(dest)?;
    let mut h = Hashing { inner: out, sha: Sha256::new(), bytes: 0 };
    io::copy(&mut input, &mut h).map_err(|e| io_err(dest, e))?;
    h.inner.sync_all().map_err(|e| io_err(dest, e))?;
    Ok((h.bytes, hex(&h.sha.finalize())))
}

/// Writes `bytes` into the new file `dest` (0600, synced); returns its size and SHA-256.
fn write_private(dest: &Path, bytes: &[u8]) -> Result<(u64, String), BackupError> {
    let mut out = create_private_file(dest)?;
    out.write_all(bytes).and_then(|()| out.sync_all()).map_err(|e| io_err(dest, e))?;
    Ok((bytes.len() as u64, hex(&Sha256::digest(bytes))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_keys_are_recognized_and_references_are_not() {
        for k in [
            "api_key",
            "apiKey",
            "API-KEY",
            "smtp_password",
            "auth_token",
            "client_secret",
            "access_key_id",
            "private_key",
            "passphrase",
            "token",
        ] {
            assert!(is_secret_key(k), "{k}");
        }
        for k in [
            "smtp_password_file",
            "smtp_password_keyring",
            "max_tokens",
            "model",
            "endpoint",
            "smtp_username",
            "input",
            "cache_read",
            "token_file",
        ] {
            assert!(!is_secret_key(k), "{k}");
        }
    }

    #[test]
    fn secrets_are_stripped_at_any_depth_and_named_by_path() {
        let mut t: toml::Table = toml::from_str(
            "[embed]\nendpoint = \"https://x\"\napi_key = \"sk-1\"\n\
             [llm.targets.a]\nbase_url = \"https://y\"\napi_key = \"sk-2\"\n\
             [[mail.sources]]\nkind = \"maildir\"\ntoken = \"t\"\n",
        )
        .unwrap();
        let mut stripped = Vec::new();
        strip_secrets(&mut t, "", &mut stripped);
        stripped.sort();
        assert_eq!(stripped, ["embed.api_key", "llm.targets.a.api_key", "mail.sources[0].token"]);
        let text = toml::to_string(&t).unwrap();
        assert!(!text.contains("sk-") && text.contains("https://x") && text.contains("maildir"));
    }

    #[test]
    fn manifest_paths_cannot_leave_the_home() {
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a//b",
            "./a",
            "manifest.json",
            ".pending-x/a",
            "a\\b",
            "c:x",
        ] {
            assert!(!is_safe_relative(bad), "{bad:?}");
        }
        for good in ["mirror.db", "blobs/ab/abcdef", "auth-token"] {
            assert!(is_safe_relative(good), "{good:?}");
        }
    }
}
