//! Backups across the FFI: create one of the open home, verify one, restore one into a new
//! home (`steward_core::backup`). Results are summaries: a manifest can list a million blobs,
//! and it is in the backup directory (`manifest.json`) for whoever needs every file.

use std::path::{Path, PathBuf};

use steward_core::backup::{
    self, BackupFileKind, BackupManifest, BackupOptions, BackupProgress, RestoreReport,
};

use crate::{FfiError, Steward};

/// A store in a backup.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct BackupStore {
    /// The file (`mirror.db`, `ops.db`, …).
    pub path: String,
    /// Its schema version.
    pub user_version: Option<i64>,
    /// Bytes.
    pub size: u64,
}

/// Something a backup left out on purpose.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct BackupOmitted {
    /// The path.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// What a backup holds.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct BackupSummary {
    /// The backup directory.
    pub dir: String,
    /// When it was taken, Unix seconds.
    pub created_at: i64,
    /// The Steward version that took it.
    pub steward_version: String,
    /// Whether the secrets (access token, SMTP password, config keys) are in it.
    pub secrets_included: bool,
    /// Files.
    pub files: u64,
    /// Bytes.
    pub bytes: u64,
    /// The stores, with their schema versions.
    pub stores: Vec<BackupStore>,
    /// Attachment blobs.
    pub blobs: u64,
    /// Optional sources that did not exist.
    pub absent: Vec<String>,
    /// What was left out on purpose, and why.
    pub omitted: Vec<BackupOmitted>,
    /// `config.toml` keys removed as secrets.
    pub stripped_keys: Vec<String>,
}

impl BackupSummary {
    fn of(dir: &Path, m: BackupManifest) -> Self {
        let count = |kind| m.files.iter().filter(|f| f.kind == kind).count() as u64;
        Self {
            dir: dir.display().to_string(),
            created_at: m.created_at,
            files: m.files.len() as u64,
            bytes: m.total_bytes(),
            blobs: count(BackupFileKind::Blob),
            stores: m
                .files
                .iter()
                .filter(|f| f.kind == BackupFileKind::Store)
                .map(|f| BackupStore {
                    path: f.path.clone(),
                    user_version: f.user_version,
                    size: f.size,
                })
                .collect(),
            steward_version: m.steward_version,
            secrets_included: m.secrets_included,
            absent: m.absent,
            omitted: m
                .omitted
                .into_iter()
                .map(|o| BackupOmitted { path: o.path, reason: o.reason })
                .collect(),
            stripped_keys: m.stripped_keys,
        }
    }
}

/// What a restore did.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct RestoreSummary {
    /// The home restored into.
    pub home: String,
    /// Files written.
    pub files: u64,
    /// Bytes written.
    pub bytes: u64,
    /// The stores restored.
    pub stores: Vec<String>,
    /// When the backup was taken, Unix seconds.
    pub backup_created_at: i64,
    /// Whether secrets were restored.
    pub secrets_restored: bool,
    /// Where the SMTP password was restored, when it was.
    pub smtp_password_file: Option<String>,
    /// What is rebuilt on first use rather than restored.
    pub rebuilt_on_first_use: Vec<String>,
}

impl From<RestoreReport> for RestoreSummary {
    fn from(r: RestoreReport) -> Self {
        Self {
            home: r.home.display().to_string(),
            files: r.files,
            bytes: r.bytes,
            stores: r.stores,
            backup_created_at: r.backup_created_at,
            secrets_restored: r.secrets_restored,
            smtp_password_file: r.smtp_password_file.map(|p| p.display().to_string()),
            rebuilt_on_first_use: r.rebuilt_on_first_use,
        }
    }
}

fn no_progress(_: &BackupProgress) {}

fn create(
    steward: &steward_core::Steward,
    dir: &Path,
    include_secrets: bool,
) -> Result<BackupSummary, FfiError> {
    steward
        .backup_create(dir, &BackupOptions { include_secrets }, &mut no_progress)
        .map(|m| BackupSummary::of(dir, m))
        .map_err(|e| FfiError::from_core(&e))
}

#[uniffi::export]
impl Steward {
    /// Backs this home up into `dir` (new or empty): every store as of one commit, the
    /// attachments and the configuration, and a SHA-256 manifest. Secrets (the access token,
    /// the SMTP password, API keys in config.toml) only with `include_secrets`. An existing
    /// non-empty `dir` is `BACKUP_TARGET_EXISTS`.
    #[uniffi::method(default(include_secrets = false))]
    pub fn backup_create(
        &self,
        dir: String,
        include_secrets: bool,
    ) -> Result<BackupSummary, FfiError> {
        create(self.inner(), Path::new(&dir), include_secrets)
    }

    /// [`Steward::backup_create`] as an async call, on the library's runtime.
    #[uniffi::method(default(include_secrets = false))]
    pub async fn backup_create_async(
        &self,
        dir: String,
        include_secrets: bool,
    ) -> Result<BackupSummary, FfiError> {
        let steward = self.handle();
        crate::runtime::blocking(move || create(&steward, Path::new(&dir), include_secrets)).await
    }
}

/// Checks the backup in `dir` against its manifest. Any file that differs, is missing or
/// should not be there fails with `BACKUP_MISMATCH`, whose message names them.
#[uniffi::export]
pub fn backup_verify(dir: String) -> Result<BackupSummary, FfiError> {
    let dir = PathBuf::from(dir);
    backup::verify(&dir, &mut no_progress)
        .map(|m| BackupSummary::of(&dir, m))
        .map_err(|e| FfiError::from_core(&e))
}

/// Restores the backup in `dir` into `home`, which must not exist or be empty
/// (`BACKUP_TARGET_NOT_EMPTY`); the backup is verified first. Open the home afterwards: its
/// derived indexes are rebuilt on first use.
#[uniffi::export]
pub fn backup_restore(dir: String, home: String) -> Result<RestoreSummary, FfiError> {
    backup::restore(Path::new(&dir), Path::new(&home), &mut no_progress)
        .map(Into::into)
        .map_err(|e| FfiError::from_core(&e))
}
