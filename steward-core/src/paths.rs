//! The sensitive-path guard: a file an agent names (an attachment, a document to share) is
//! checked here before anything reads it. The model may be steered by an injection into asking
//! for `~/.ssh/id_ed25519`; deterministic code refuses.
//!
//! Refused: anything under the Steward home; secret stores (`.ssh`, `.gnupg`, `.aws`, `.azure`,
//! `.kube`, `.docker`, `.config/gcloud`, `.password-store`, keychains); dotenv files; private keys
//! and certificate bundles by name or extension; credential files (`.netrc`, `.git-credentials`,
//! `.pgpass`, `credentials.json`…). The path is resolved first (symlinks, `..`), so a link to a
//! secret is refused like the secret itself. Only regular files pass.

use std::path::{Component, Path, PathBuf};

use crate::error::{ErrorKind, StewardError};

/// Largest file the guard lets through (bytes).
/// Fixed (not a setting).
pub const MAX_ATTACHMENT_BYTES: u64 = 25 * 1024 * 1024;

const SECRET_DIRS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".password-store",
    ".gcloud",
    "keychains",
    ".secrets",
];
const SECRET_NAMES: &[&str] = &[
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    "credentials",
    "credentials.json",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "authorized_keys",
    "known_hosts",
    ".htpasswd",
    "shadow",
    "master.key",
];
const SECRET_EXTENSIONS: &[&str] =
    &["pem", "key", "p12", "pfx", "jks", "keystore", "asc", "gpg", "kdbx", "ppk", "ovpn"];

/// Why a path is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The path names a secret or the Steward home.
    #[error("{path} is refused: {why}")]
    Sensitive {
        /// The path as resolved.
        path: PathBuf,
        /// Which rule.
        why: String,
    },
    /// Not a readable regular file.
    #[error("{path} is not a readable file: {why}")]
    NotAFile {
        /// The path as given.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// Larger than [`MAX_ATTACHMENT_BYTES`].
    #[error("{path} is {bytes} bytes; the limit is {MAX_ATTACHMENT_BYTES}")]
    TooLarge {
        /// The path.
        path: PathBuf,
        /// Its size.
        bytes: u64,
    },
}

impl StewardError for PathError {
    fn code(&self) -> &'static str {
        match self {
            Self::Sensitive { .. } => "PATH_SENSITIVE",
            Self::NotAFile { .. } => "PATH_NOT_A_FILE",
            Self::TooLarge { .. } => "PATH_TOO_LARGE",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Sensitive { .. } => ErrorKind::Denied,
            Self::NotAFile { .. } | Self::TooLarge { .. } => ErrorKind::InvalidInput,
        }
    }
}

/// Why `resolved` (already canonical) is sensitive, if it is.
fn sensitive(resolved: &Path, home: Option<&Path>) -> Option<String> {
    if let Some(home) = home
        && resolved.starts_with(home)
    {
        return Some("it is inside the Steward home".to_owned());
    }
    for c in resolved.components() {
        if let Component::Normal(part) = c {
            let part = part.to_string_lossy().to_lowercase();
            if SECRET_DIRS.contains(&part.as_str()) {
                return Some(format!("it is inside a secret store ({part})"));
            }
        }
    }
    let name = resolved.file_name()?.to_string_lossy().to_lowercase();
    if name == ".env" || name.starts_with(".env.") || name.ends_with(".env") {
        return Some("it is an environment file".to_owned());
    }
    if SECRET_NAMES.contains(&name.as_str()) || name.starts_with("id_") && !name.contains('.') {
        return Some(format!("{name} holds credentials or keys"));
    }
    if let Some(ext) = resolved.extension() {
        let ext = ext.to_string_lossy().to_lowercase();
        if SECRET_EXTENSIONS.contains(&ext.as_str()) {
            return Some(format!("*.{ext} files hold keys or secrets"));
        }
    }
    None
}

/// Resolves `path` and lets it through only when it is a regular file of at most
/// [`MAX_ATTACHMENT_BYTES`] that names no secret and lies outside `steward_home`.
pub fn guard_file(path: &Path, steward_home: &Path) -> Result<PathBuf, PathError> {
    let not_a_file = |why: String| PathError::NotAFile { path: path.to_path_buf(), why };
    // Refuse on the name as given too: a dangling or unreadable link to a key is still a key.
    let home = steward_home.canonicalize().ok();
    if let Some(why) = sensitive(path, home.as_deref().or(Some(steward_home))) {
        return Err(PathError::Sensitive { path: path.to_path_buf(), why });
    }
    let resolved = path.canonicalize().map_err(|e| not_a_file(e.to_string()))?;
    if let Some(why) = sensitive(&resolved, home.as_deref()) {
        return Err(PathError::Sensitive { path: resolved, why });
    }
    let meta = std::fs::metadata(&resolved).map_err(|e| not_a_file(e.to_string()))?;
    if !meta.is_file() {
        return Err(not_a_file("not a regular file".to_owned()));
    }
    if meta.len() > MAX_ATTACHMENT_BYTES {
        return Err(PathError::TooLarge { path: resolved, bytes: meta.len() });
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_links_to_secrets_and_the_home_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("steward-home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join("ops.db"), b"x").unwrap();
        std::fs::create_dir_all(root.join(".ssh")).unwrap();
        std::fs::write(root.join(".ssh/config"), b"Host x").unwrap();
        let ok = root.join("report.pdf");
        std::fs::write(&ok, b"%PDF-1.4").unwrap();
        let secrets = [
            ".env",
            ".env.local",
            "prod.env",
            "server.pem",
            "id_ed25519",
            "TLS.KEY",
            ".netrc",
            "vault.kdbx",
        ];
        for name in secrets {
            std::fs::write(root.join(name), b"secret").unwrap();
        }
        assert_eq!(guard_file(&ok, &home).unwrap(), ok);
        let code = |p: &Path| guard_file(p, &home).unwrap_err().code();
        for name in secrets {
            assert_eq!(code(&root.join(name)), "PATH_SENSITIVE", "{name}");
        }
        assert_eq!(code(&root.join(".ssh/config")), "PATH_SENSITIVE");
        assert_eq!(code(&home.join("ops.db")), "PATH_SENSITIVE");
        // `..` and links are resolved before the check.
        assert_eq!(code(&root.join("sub/../.ssh/config")), "PATH_SENSITIVE");
        #[cfg(unix)]
        {
            let link = root.join("harmless.txt");
            std::os::unix::fs::symlink(root.join(".ssh/config"), &link).unwrap();
            assert_eq!(code(&link), "PATH_SENSITIVE");
            let into_home = root.join("notes.txt");
            std::os::unix::fs::symlink(home.join("ops.db"), &into_home).unwrap();
            assert_eq!(code(&into_home), "PATH_SENSITIVE");
        }
        assert_eq!(code(&root.join("missing.pdf")), "PATH_NOT_A_FILE");
        assert_eq!(code(&root), "PATH_NOT_A_FILE");
        let big = root.join("big.bin");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_ATTACHMENT_BYTES + 1).unwrap();
        assert_eq!(code(&big), "PATH_TOO_LARGE");
    }
}
