//! The sensitive-path guard: a file an agent names (an attachment, a document to share) is
//! checked here before anything reads it. The model may be steered by an injection into asking
//! for `~/.ssh/id_ed25519`; deterministic code refuses.
//!
//! Refused: anything under the Steward home but its one shareable folder
//! ([`DEMO_DOCUMENTS_DIR`], where `steward demo` writes its sample documents); secret stores (`.ssh`, `.gnupg`, `.aws`, `.azure`,
//! `.kube`, `.docker`, `.config/gcloud`, `.password-store`, keychains); dotenv files; private keys
//! and certificate bundles by name or extension; credential files (`.netrc`, `.git-credentials`,
//! `.pgpass`, `credentials.json`…). The path is resolved first (symlinks, `..`), so a link to a
//! secret is refused like the secret itself. Only regular files pass.

use std::path::{Component, Path, PathBuf};

use crate::error::{ErrorKind, StewardError};

/// The one folder of the Steward home that may be shared (`<home>/demo-documents`, written by
/// `steward demo`): what lies in it is refused like anything else only when it is a secret.
/// A link inside it that leads elsewhere in the home is still refused (paths are resolved
/// first).
pub const DEMO_DOCUMENTS_DIR: &str = "demo-documents";

/// Whether `path` (resolved) lies in the Steward home `home` outside its shareable folder.
pub fn in_private_home(path: &Path, home: &Path) -> bool {
    path.starts_with(home) && !path.starts_with(home.join(DEMO_DOCUMENTS_DIR))
}

/// Most folders `[files] roots` may name.
/// Fixed (not a setting).
pub const MAX_FILE_ROOTS: usize = 32;

/// Largest file the guard lets through (bytes).
/// Fixed (not a setting).
pub const MAX_ATTACHMENT_BYTES: u64 = 25 * 1024 * 1024;

pub(crate) const SECRET_DIRS: &[&str] = &[
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
    // Browser profiles (cookies, saved passwords) and password managers.
    ".mozilla",
    "google-chrome",
    "bravesoftware",
    "1password",
    "bitwarden",
    "keepassxc",
];
pub(crate) const SECRET_NAMES: &[&str] = &[
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
    "login.keychain-db",
    "login data",
    "cookies",
    "key4.db",
    "logins.json",
];
pub(crate) const SECRET_EXTENSIONS: &[&str] =
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
    /// Outside every root the person chose (a link that leaves them included).
    #[error("{path} is outside the folders Steward may read ([files] roots)")]
    OutsideRoots {
        /// The path as resolved.
        path: PathBuf,
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
            Self::OutsideRoots { .. } => "PATH_OUTSIDE_ROOTS",
            Self::TooLarge { .. } => "PATH_TOO_LARGE",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Sensitive { .. } | Self::OutsideRoots { .. } => ErrorKind::Denied,
            Self::NotAFile { .. } | Self::TooLarge { .. } => ErrorKind::InvalidInput,
        }
    }
}

/// A name as the guard compares it: its compatibility form (NFKC: fullwidth `．ｓｓｈ` is
/// `.ssh`), lowercase (a case-insensitive file system opens `.SSH` as `.ssh`).
fn folded(name: &std::ffi::OsStr) -> String {
    fold_name(&name.to_string_lossy())
}

/// A file name as names are compared (the guard, `files.find`): NFKC, lowercase.
pub(crate) fn fold_name(name: &str) -> String {
    use unicode_normalization::UnicodeNormalization as _;
    name.nfkc().collect::<String>().to_lowercase()
}

/// Why `resolved` (already canonical) is sensitive, if it is.
fn sensitive(resolved: &Path, home: Option<&Path>) -> Option<String> {
    if let Some(home) = home
        && in_private_home(resolved, home)
    {
        return Some("it is inside the Steward home".to_owned());
    }
    for c in resolved.components() {
        if let Component::Normal(part) = c {
            let part = folded(part);
            if SECRET_DIRS.contains(&part.as_str()) {
                return Some(format!("it is inside a secret store ({part})"));
            }
        }
    }
    let name = folded(resolved.file_name()?);
    if name == ".env" || name.starts_with(".env.") || name.ends_with(".env") {
        return Some("it is an environment file".to_owned());
    }
    if SECRET_NAMES.contains(&name.as_str()) || name.starts_with("id_") && !name.contains('.') {
        return Some(format!("{name} holds credentials or keys"));
    }
    if let Some(ext) = Path::new(&name).extension() {
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

/// Whether `below` (a path below a root) is or lies in a secret (see [`guard_in_roots`]).
pub(crate) fn is_secret(below: &Path) -> bool {
    sensitive(below, None).is_some()
}

/// Resolves `path` (absolute, or relative to the first root holding it) and lets it through
/// only when it lies inside one of `roots` once every link is followed, names no secret and
/// is outside `steward_home`: a file or a folder the person chose to share with Steward.
/// Nothing is read before this says yes.
pub fn guard_in_roots(
    path: &Path,
    roots: &[PathBuf],
    steward_home: &Path,
) -> Result<PathBuf, PathError> {
    let home = steward_home.canonicalize().ok();
    let home = home.as_deref().or(Some(steward_home));
    let roots: Vec<PathBuf> = roots.iter().filter_map(|r| r.canonicalize().ok()).collect();
    let given: PathBuf =
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            roots.iter().map(|r| r.join(path)).find(|p| p.exists()).unwrap_or_else(|| {
                roots.first().map_or_else(|| path.to_path_buf(), |r| r.join(path))
            })
        };
    // The name as given too: a dangling link to a key is still a key.
    if let Some(why) = given.file_name().and_then(|n| sensitive(Path::new(n), None)) {
        return Err(PathError::Sensitive { path: given, why });
    }
    let resolved = given
        .canonicalize()
        .map_err(|e| PathError::NotAFile { path: given.clone(), why: e.to_string() })?;
    if !roots.iter().any(|r| resolved.starts_with(r)) {
        return Err(PathError::OutsideRoots { path: resolved });
    }
    if home.is_some_and(|h| in_private_home(&resolved, h)) {
        let why = "it is inside the Steward home".to_owned();
        return Err(PathError::Sensitive { path: resolved, why });
    }
    // What lies under the root is checked: a root the person chose is theirs to choose, a
    // secret store inside it is not shared by choosing it.
    let root = roots.iter().filter(|r| resolved.starts_with(r)).max_by_key(|r| r.as_os_str().len());
    let inside = root.and_then(|r| resolved.strip_prefix(r).ok()).unwrap_or(&resolved);
    if let Some(why) = sensitive(inside, None) {
        return Err(PathError::Sensitive { path: resolved, why });
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
        // The home's one shareable folder: its documents pass, the rest of the home does
        // not, by `..` or by a link from inside it.
        let shared = home.join(DEMO_DOCUMENTS_DIR);
        std::fs::create_dir_all(&shared).unwrap();
        std::fs::write(shared.join("lease.pdf"), b"%PDF").unwrap();
        assert_eq!(guard_file(&shared.join("lease.pdf"), &home).unwrap(), shared.join("lease.pdf"));
        assert_eq!(code(&shared.join("../ops.db")), "PATH_SENSITIVE");
        assert_eq!(
            guard_in_roots(&shared.join("../ops.db"), std::slice::from_ref(&shared), &home)
                .unwrap_err()
                .code(),
            "PATH_OUTSIDE_ROOTS"
        );
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(home.join("ops.db"), shared.join("db.pdf")).unwrap();
            assert_eq!(code(&shared.join("db.pdf")), "PATH_SENSITIVE");
            let in_roots =
                guard_in_roots(&shared.join("db.pdf"), std::slice::from_ref(&home), &home);
            assert_eq!(in_roots.unwrap_err().code(), "PATH_SENSITIVE");
        }
        assert_eq!(code(&root.join("missing.pdf")), "PATH_NOT_A_FILE");
        assert_eq!(code(&root), "PATH_NOT_A_FILE");
        let big = root.join("big.bin");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_ATTACHMENT_BYTES + 1).unwrap();
        assert_eq!(code(&big), "PATH_TOO_LARGE");
    }

    /// A root with a document, a secret store, links that stay and links that leave, and a
    /// Steward home inside it; a folder outside it.
    #[cfg(unix)]
    fn tree() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (root, outside) = (base.join("docs"), base.join("outside"));
        let home = root.join("steward-home");
        for d in [root.join("a/b"), outside.clone(), home.clone(), root.join(".ssh")] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::create_dir_all(root.join("\u{ff0e}\u{ff53}\u{ff53}\u{ff48}")).unwrap();
        std::fs::create_dir_all(root.join(".SSH2/.Ssh")).unwrap();
        std::fs::write(root.join("a/lease.pdf"), b"%PDF").unwrap();
        std::fs::write(outside.join("other.pdf"), b"%PDF").unwrap();
        std::fs::write(root.join(".ssh/id_ed25519"), b"k").unwrap();
        symlink(outside.join("other.pdf"), root.join("a/out.pdf")).unwrap();
        symlink(root.join("a/out.pdf"), root.join("a/b/chain.pdf")).unwrap();
        symlink(root.join("a/lease.pdf"), root.join("a/b/in.pdf")).unwrap();
        symlink(&outside, root.join("a/outdir")).unwrap();
        symlink(root.join(".ssh/id_ed25519"), root.join("a/notes.txt")).unwrap();
        (dir, root, outside, home)
    }

    #[cfg(unix)]
    #[test]
    fn a_path_passes_only_inside_a_root_once_every_link_is_followed() {
        let (_dir, root, outside, home) = tree();
        let roots = std::slice::from_ref(&root);
        let guard = |p: &Path| guard_in_roots(p, roots, &home);
        let code = |p: &str| guard(Path::new(p)).unwrap_err().code();
        assert_eq!(guard(&root.join("a/lease.pdf")).unwrap(), root.join("a/lease.pdf"));
        assert_eq!(guard(Path::new("a/lease.pdf")).unwrap(), root.join("a/lease.pdf"));
        assert_eq!(guard(&root.join("a/b/in.pdf")).unwrap(), root.join("a/lease.pdf"));
        assert_eq!(guard(&root.join("a")).unwrap(), root.join("a"), "a folder passes too");
        for leaves in
            ["a/out.pdf", "a/b/chain.pdf", "a/outdir/other.pdf", "a/../../outside/other.pdf"]
        {
            assert_eq!(code(leaves), "PATH_OUTSIDE_ROOTS", "{leaves}");
        }
        assert_eq!(guard(&outside.join("other.pdf")).unwrap_err().code(), "PATH_OUTSIDE_ROOTS");
        for secret in [
            ".ssh/id_ed25519",
            "a/notes.txt",
            "\u{ff0e}\u{ff53}\u{ff53}\u{ff48}",
            ".SSH2/.Ssh",
            "steward-home",
        ] {
            assert_eq!(code(secret), "PATH_SENSITIVE", "{secret}");
        }
        assert_eq!(code("a/missing.pdf"), "PATH_NOT_A_FILE");
        // No roots: nothing passes.
        assert_eq!(
            guard_in_roots(&root.join("a/lease.pdf"), &[], &home).unwrap_err().code(),
            "PATH_OUTSIDE_ROOTS"
        );
    }

    #[cfg(unix)]
    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]
        /// Whatever path is asked for — `..`, `.`, links in and out, secret stores by any
        /// spelling — what passes is inside the root, exists, and names no secret.
        #[test]
        fn whatever_passes_is_inside_the_root_and_no_secret(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "a", "b", "..", ".", "lease.pdf", "out.pdf", "chain.pdf", "in.pdf", "outdir",
                    "notes.txt", ".ssh", "id_ed25519", "\u{ff0e}\u{ff53}\u{ff53}\u{ff48}",
                    ".SSH2", ".Ssh", "steward-home", "other.pdf", "outside",
                ]),
                0..7,
            ),
            absolute in proptest::bool::ANY,
        ) {
            let (_dir, root, _outside, home) = tree();
            let rel: PathBuf = parts.iter().collect();
            let asked = if absolute { root.join(&rel) } else { rel };
            if let Ok(p) = guard_in_roots(&asked, std::slice::from_ref(&root), &home) {
                proptest::prop_assert!(p.starts_with(&root), "{} left the root", p.display());
                proptest::prop_assert!(p.exists());
                proptest::prop_assert!(!p.starts_with(&home));
                proptest::prop_assert!(p.canonicalize().unwrap() == p, "{} is not canonical", p.display());
                let inside = p.strip_prefix(&root).unwrap();
                proptest::prop_assert!(sensitive(inside, None).is_none(), "{} is a secret", p.display());
                proptest::prop_assert!(!inside.components().any(|c| folded(c.as_os_str()) == ".ssh"));
            }
        }
    }
}
