//! `steward backup …`: back a home up, check a backup, restore one into a new home
//! (`steward_core::backup`).

use std::path::{Path, PathBuf};

use clap::Subcommand;
use indicatif::ProgressBar;
use serde_json::json;
use steward_core::{
    Steward,
    backup::{self, BackupFileKind, BackupManifest, BackupOptions, BackupPhase, BackupProgress},
};

use super::{Failure, json_line, progress_bar, usage};

#[derive(Debug, Subcommand)]
pub(super) enum BackupCmd {
    /// Back the home up into DIR (new or empty): every store as of one commit (also while the
    /// server or a sync runs), the attachments, config.toml without its secrets, and a SHA-256
    /// manifest. The derived indexes are left out: a restored home rebuilds them.
    Create {
        /// The backup directory to create.
        dir: PathBuf,
        /// Also copy the secrets: config.toml as it is, the access token and the SMTP password
        /// file. Keep such a backup as safe as the secrets themselves.
        #[arg(long)]
        include_secrets: bool,
        /// Print a summary as one JSON object (the manifest is DIR/manifest.json).
        #[arg(long)]
        json: bool,
    },
    /// Check a backup against its manifest: every file that differs, is missing or should not
    /// be there is named.
    Verify {
        /// The backup directory.
        dir: PathBuf,
        /// Print a summary as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Restore a backup into --home (else the default home), which must not exist or be
    /// empty. The backup is verified first.
    Restore {
        /// The backup directory.
        dir: PathBuf,
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn backup(home: Option<PathBuf>, cmd: BackupCmd) -> Result<(), Failure> {
    let home = home
        .or_else(steward_core::default_home)
        .ok_or_else(|| usage("no home: pass --home or set STEWARD_HOME".to_owned()))?;
    match cmd {
        BackupCmd::Create { dir, include_secrets, json } => {
            if !home.is_dir() {
                return Err(usage(format!("there is no home at {} to back up", home.display())));
            }
            let steward = Steward::builder().home(&home).open()?;
            let pb = progress_bar();
            let result = steward.backup_create(
                &dir,
                &BackupOptions { include_secrets },
                &mut |p: &BackupProgress| show(&pb, p),
            );
            pb.finish_and_clear();
            let m = result?;
            if json {
                json_line(&summary(&dir, &m));
            } else {
                print_manifest("backed up", &dir, &m);
            }
            Ok(())
        }
        BackupCmd::Verify { dir, json } => {
            let pb = progress_bar();
            let result = backup::verify(&dir, &mut |p: &BackupProgress| show(&pb, p));
            pb.finish_and_clear();
            let m = result?;
            if json {
                json_line(&summary(&dir, &m));
            } else {
                print_manifest("verified", &dir, &m);
            }
            Ok(())
        }
        BackupCmd::Restore { dir, json } => {
            let pb = progress_bar();
            let result = backup::restore(&dir, &home, &mut |p: &BackupProgress| show(&pb, p));
            pb.finish_and_clear();
            let r = result?;
            if json {
                json_line(&r);
                return Ok(());
            }
            out!(
                "restored {} files ({}) from {} into {}",
                r.files,
                megabytes(r.bytes),
                dir.display(),
                r.home.display()
            );
            out!("  stores   {}", r.stores.join(", "));
            out!(
                "  taken    {} by steward {}",
                when(r.backup_created_at),
                r.backup_steward_version
            );
            if let Some(p) = &r.smtp_password_file {
                out!(
                    "  the SMTP password is in {}: point [mail] smtp_password_file at it if the \
                     original file is not on this machine",
                    p.display()
                );
            }
            for what in &r.rebuilt_on_first_use {
                out!("  rebuilt  {what}");
            }
            Ok(())
        }
    }
}

fn show(pb: &ProgressBar, p: &BackupProgress) {
    pb.set_message(match p.phase {
        BackupPhase::Stores => "stores",
        BackupPhase::Files => "files",
        BackupPhase::Verify => "verifying",
        BackupPhase::Restore => "restoring",
    });
    pb.set_length(p.files_total);
    pb.set_position(p.files_done);
}

fn when(secs: i64) -> String {
    steward_core::time::CivilTime::from_unix(secs).rfc3339()
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1_000_000.0)
}

/// The manifest without its per-file list (which can hold a million blobs).
fn summary(dir: &Path, m: &BackupManifest) -> serde_json::Value {
    let stores: Vec<serde_json::Value> = m
        .files
        .iter()
        .filter(|f| f.kind == BackupFileKind::Store)
        .map(|f| json!({"path": f.path, "user_version": f.user_version, "size": f.size}))
        .collect();
    json!({
        "dir": dir.display().to_string(),
        "format": m.format,
        "created_at": m.created_at,
        "steward_version": m.steward_version,
        "source_home": m.source_home,
        "secrets_included": m.secrets_included,
        "files": m.files.len(),
        "bytes": m.total_bytes(),
        "stores": stores,
        "blobs": m.files.iter().filter(|f| f.kind == BackupFileKind::Blob).count(),
        "absent": m.absent,
        "omitted": m.omitted,
        "stripped_keys": m.stripped_keys,
    })
}

fn print_manifest(what: &str, dir: &Path, m: &BackupManifest) {
    out!("{what} {} files ({}) in {}", m.files.len(), megabytes(m.total_bytes()), dir.display());
    out!(
        "  taken    {} by steward {} from {}",
        when(m.created_at),
        m.steward_version,
        m.source_home
    );
    let stores: Vec<String> = m
        .files
        .iter()
        .filter(|f| f.kind == BackupFileKind::Store)
        .map(|f| match f.user_version {
            Some(v) => format!("{} (schema {v})", f.path),
            None => f.path.clone(),
        })
        .collect();
    out!("  stores   {}", stores.join(", "));
    out!("  blobs    {}", m.files.iter().filter(|f| f.kind == BackupFileKind::Blob).count());
    out!("  secrets  {}", if m.secrets_included { "included" } else { "left out" });
    if !m.absent.is_empty() {
        out!("  absent   {}", m.absent.join(", "));
    }
    for o in &m.omitted {
        out!("  left out {}: {}", o.path, o.reason);
    }
    if !m.stripped_keys.is_empty() {
        out!("  removed from config.toml: {}", m.stripped_keys.join(", "));
    }
}
