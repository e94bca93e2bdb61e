//! Who may reach a Steward home over a network transport: the owner's access token and the
//! `Host` / `Origin` rules that keep a browser from being turned against a local server (DNS
//! rebinding, cross-site requests).
//!
//! The HTTP server only asks these questions; the answers live here so that every frontend that
//! ever listens on a socket gets the same ones.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
};

use crate::{ErrorKind, StewardError, store::StoreError};

mod store;

pub use store::{
    AccessStore, Device, IDEMPOTENCY_TTL_SECS, IN_FLIGHT_UNKNOWN_SECS, IdempotentStart,
    MAX_DEVICE_NAME, MAX_DEVICES, MAX_IDEMPOTENCY_KEY, MAX_LIVE_PAIRING_CODES,
    MAX_PAIRING_FAILURES, MAX_REMEMBERED_RESPONSE, PAIRING_CODE_CHARS, PAIRING_CODE_TTL_SECS,
    Pairing, PairingCode,
};

/// The owner's token, in the home directory (mode 0600).
pub const TOKEN_FILE: &str = "auth-token";
/// Shortest token accepted from the environment (`STEWARD_AUTH_TOKEN`) or the token file.
/// Fixed (not a setting).
pub const MIN_TOKEN_CHARS: usize = 32;
/// Longest token accepted (a presented credential longer than this is refused unread).
/// Fixed (not a setting).
pub const MAX_TOKEN_CHARS: usize = 256;
/// Most extra host names or origins a configuration may list.
/// Fixed (not a setting).
pub const MAX_ALLOWED_ENTRIES: usize = 32;

/// Why the access configuration cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AccessError {
    /// The token file or directory could not be read or written.
    #[error("cannot use the access token file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The token file can be read by other users.
    #[error(
        "the access token file {0} is readable by other users; run `chmod 600` on it or delete it to make a new one"
    )]
    Exposed(PathBuf),
    /// A token that is too short, too long or not printable ASCII.
    #[error(
        "an access token must be {MIN_TOKEN_CHARS}..={MAX_TOKEN_CHARS} printable ASCII characters without spaces"
    )]
    BadToken,
    /// A host name or origin in the configuration that cannot be one.
    #[error("{0:?} is not a host name or origin (scheme://host[:port])")]
    BadEntry(String),
    /// More entries than [`MAX_ALLOWED_ENTRIES`].
    #[error("at most {MAX_ALLOWED_ENTRIES} allowed hosts or origins")]
    TooManyEntries,
    /// An `Idempotency-Key` that is empty, too long or not printable ASCII.
    #[error("an Idempotency-Key must be 1..={MAX_IDEMPOTENCY_KEY} printable ASCII characters")]
    BadIdempotencyKey,
    /// The key was used before with a different request.
    #[error("this Idempotency-Key was used with a different request")]
    IdempotencyKeyReused,
    /// The key's first request has not answered yet.
    #[error("a request with this Idempotency-Key is still running; retry in a moment")]
    IdempotencyInFlight,
    /// The key's first request never answered (the server stopped mid-way); it is not run
    /// again.
    #[error(
        "the first request with this Idempotency-Key never answered; check its effect before retrying with a new key"
    )]
    IdempotencyOutcomeUnknown,
    /// A pairing code that is wrong, used or expired.
    #[error("the pairing code is wrong, already used or expired")]
    BadPairingCode,
    /// Too many wrong pairing codes recently.
    #[error(
        "too many wrong pairing codes; pairing is paused for up to {PAIRING_CODE_TTL_SECS} seconds"
    )]
    PairingLocked,
    /// Too many live pairing codes.
    #[error("at most {MAX_LIVE_PAIRING_CODES} unused pairing codes at once")]
    TooManyPairingCodes,
    /// Too many paired devices.
    #[error("at most {MAX_DEVICES} paired devices; revoke one first")]
    TooManyDevices,
    /// A device name that is empty, too long or has control characters.
    #[error("a device name must be 1..={MAX_DEVICE_NAME} characters without control characters")]
    BadDeviceName,
    /// No device has this id.
    #[error("device {0} not found")]
    DeviceNotFound(i64),
    /// The operating system gave no randomness.
    #[error("the operating system has no source of randomness")]
    NoEntropy,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl StewardError for AccessError {
    fn code(&self) -> &'static str {
        match self {
            Self::Io { .. } => "ACCESS_TOKEN_IO",
            Self::Exposed(_) => "ACCESS_TOKEN_EXPOSED",
            Self::BadToken => "ACCESS_TOKEN_INVALID",
            Self::BadEntry(_) => "ACCESS_BAD_ENTRY",
            Self::TooManyEntries => "ACCESS_TOO_MANY_ENTRIES",
            Self::BadIdempotencyKey => "IDEMPOTENCY_KEY_INVALID",
            Self::IdempotencyKeyReused => "IDEMPOTENCY_KEY_REUSED",
            Self::IdempotencyInFlight => "IDEMPOTENCY_IN_FLIGHT",
            Self::IdempotencyOutcomeUnknown => "IDEMPOTENCY_OUTCOME_UNKNOWN",
            Self::BadPairingCode => "PAIRING_CODE_INVALID",
            Self::PairingLocked => "PAIRING_LOCKED",
            Self::TooManyPairingCodes => "PAIRING_TOO_MANY_CODES",
            Self::TooManyDevices => "DEVICE_LIMIT",
            Self::BadDeviceName => "DEVICE_NAME_INVALID",
            Self::DeviceNotFound(_) => "DEVICE_NOT_FOUND",
            Self::NoEntropy => "ACCESS_NO_ENTROPY",
            Self::Store(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Io { .. } => ErrorKind::Unavailable,
            Self::Exposed(_) | Self::BadPairingCode | Self::PairingLocked => ErrorKind::Denied,
            Self::BadToken
            | Self::BadEntry(_)
            | Self::TooManyEntries
            | Self::BadIdempotencyKey
            | Self::BadDeviceName => ErrorKind::InvalidInput,
            Self::IdempotencyKeyReused
            | Self::IdempotencyInFlight
            | Self::IdempotencyOutcomeUnknown
            | Self::TooManyPairingCodes
            | Self::TooManyDevices => ErrorKind::Conflict,
            Self::DeviceNotFound(_) => ErrorKind::NotFound,
            Self::NoEntropy => ErrorKind::Unavailable,
            Self::Store(e) => e.kind(),
        }
    }
}

/// A secret bearer token. Never printed by `Debug`; compared in constant time.
#[derive(Clone)]
pub struct AccessToken(String);

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessToken(…)")
    }
}

impl AccessToken {
    /// A token from configuration, checked for length and alphabet.
    pub fn new(token: &str) -> Result<Self, AccessError> {
        let t = token.trim();
        if !(MIN_TOKEN_CHARS..=MAX_TOKEN_CHARS).contains(&t.len())
            || !t.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(AccessError::BadToken);
        }
        Ok(Self(t.to_owned()))
    }

    /// A fresh random token: 256 bits, hex.
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        // getrandom fails only where the OS has no entropy source at all; a token of zeros
        // would be worse than refusing, so fall back to the clock mixed through SHA-256.
        if getrandom::fill(&mut bytes).is_err() {
            use sha2::Digest as _;
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos();
            bytes.copy_from_slice(&sha2::Sha256::digest(t.to_le_bytes()));
        }
        Self(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The token itself, for the one place that shows it to the person (the pairing link).
    pub fn reveal(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is this token, in time independent of where they differ.
    pub fn matches(&self, presented: &str) -> bool {
        use subtle::ConstantTimeEq as _;
        presented.len() <= MAX_TOKEN_CHARS
            && bool::from(self.0.as_bytes().ct_eq(presented.as_bytes()))
    }
}

/// The owner's token: `configured` when given (from `STEWARD_AUTH_TOKEN`), else the token file
/// in `home`, created with a fresh random token (mode 0600) on first use. A token file other
/// users can read is refused, not used.
pub fn owner_token(home: &Path, configured: Option<&str>) -> Result<AccessToken, AccessError> {
    if let Some(t) = configured.filter(|t| !t.trim().is_empty()) {
        return AccessToken::new(t);
    }
    let path = home.join(TOKEN_FILE);
    let io = |source| AccessError::Io { path: path.clone(), source };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            check_private(&path)?;
            AccessToken::new(&text)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let token = AccessToken::generate();
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt as _;
                options.mode(0o600);
            }
            match options.open(&path) {
                Ok(mut f) => {
                    f.write_all(token.0.as_bytes()).and_then(|()| f.sync_all()).map_err(io)?;
                    Ok(token)
                }
                // Another process created it first: use theirs.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => owner_token(home, None),
                Err(e) => Err(io(e)),
            }
        }
        Err(e) => Err(io(e)),
    }
}

#[cfg(unix)]
fn check_private(path: &Path) -> Result<(), AccessError> {
    use std::os::unix::fs::PermissionsExt as _;
    let meta = std::fs::metadata(path)
        .map_err(|source| AccessError::Io { path: path.to_owned(), source })?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(AccessError::Exposed(path.to_owned()));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_path: &Path) -> Result<(), AccessError> {
    Ok(())
}

/// Which `Host` and `Origin` values a listener accepts besides its own loopback names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OriginPolicy {
    hosts: Vec<String>,
    origins: Vec<String>,
}

impl OriginPolicy {
    /// Loopback only.
    pub fn loopback() -> Self {
        Self::default()
    }

    /// Loopback plus these host names (`steward.tailnet.ts.net`) and origins
    /// (`https://steward.tailnet.ts.net:4318`), compared case-insensitively.
    pub fn new(hosts: &[String], origins: &[String]) -> Result<Self, AccessError> {
        if hosts.len() > MAX_ALLOWED_ENTRIES || origins.len() > MAX_ALLOWED_ENTRIES {
            return Err(AccessError::TooManyEntries);
        }
        let hosts = hosts
            .iter()
            .map(|h| {
                let h = h.trim().to_ascii_lowercase();
                if h.is_empty()
                    || !h.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
                {
                    return Err(AccessError::BadEntry(h));
                }
                Ok(strip_port(&h).to_owned())
            })
            .collect::<Result<_, _>>()?;
        let origins = origins
            .iter()
            .map(|o| {
                let o = o.trim().trim_end_matches('/').to_ascii_lowercase();
                match o.split_once("://") {
                    Some(("http" | "https", rest)) if !rest.is_empty() && !rest.contains('/') => {
                        Ok(o)
                    }
                    _ => Err(AccessError::BadEntry(o)),
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { hosts, origins })
    }

    /// Whether a request's `Host` header names this server: a loopback name or a configured
    /// host. Anything else may be a DNS-rebinding attack and gets 421.
    pub fn host_allowed(&self, host: &str) -> bool {
        let name = strip_port(host.trim()).to_ascii_lowercase();
        is_loopback_name(&name) || self.hosts.contains(&name)
    }

    /// Whether a browser `Origin` may change state or open a socket: the same origin as the
    /// request's `host` (either scheme), or a configured origin. `null` and anything
    /// unparsable are refused.
    pub fn origin_allowed(&self, origin: &str, host: &str) -> bool {
        let origin = origin.trim().to_ascii_lowercase();
        let Some((scheme, authority)) = origin.split_once("://") else {
            return false;
        };
        if !matches!(scheme, "http" | "https") || authority.is_empty() {
            return false;
        }
        authority == host.trim().to_ascii_lowercase() || self.origins.contains(&origin)
    }
}

/// What makes a request this request, for idempotency: method, path with query, body.
pub fn request_fingerprint(method: &str, path_and_query: &str, body: &[u8]) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(method.as_bytes());
    h.update(b"\n");
    h.update(path_and_query.as_bytes());
    h.update(b"\n");
    h.update(body);
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// `host:port` → `host`, `[::1]:4317` → `[::1]`.
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |i| &host[..=i]);
    }
    match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !h.contains(':') => h,
        _ => host,
    }
}

fn is_loopback_name(name: &str) -> bool {
    name == "localhost"
        || name.ends_with(".localhost")
        || name == "[::1]"
        || name.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_is_created_private_and_reused() {
        let home = tempfile::tempdir().unwrap();
        let a = owner_token(home.path(), None).unwrap();
        let b = owner_token(home.path(), None).unwrap();
        assert!(a.matches(b.reveal()));
        assert_eq!(a.reveal().len(), 64);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode =
                std::fs::metadata(home.path().join(TOKEN_FILE)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            std::fs::set_permissions(
                home.path().join(TOKEN_FILE),
                std::fs::Permissions::from_mode(0o644),
            )
            .unwrap();
            let e = owner_token(home.path(), None).unwrap_err();
            assert_eq!(e.code(), "ACCESS_TOKEN_EXPOSED");
        }
        // A configured token wins and is validated.
        let t = owner_token(home.path(), Some(&"x".repeat(40))).unwrap();
        assert!(t.matches(&"x".repeat(40)));
        assert!(!t.matches(&"x".repeat(39)));
        assert!(!t.matches(""));
        assert_eq!(
            owner_token(home.path(), Some("short")).unwrap_err().code(),
            "ACCESS_TOKEN_INVALID"
        );
        assert!(!format!("{t:?}").contains("xxxx"));
    }

    #[test]
    fn hosts_and_origins() {
        let p = OriginPolicy::new(
            &["Steward.tailnet.ts.net".to_owned()],
            &["https://app.example:8443/".to_owned()],
        )
        .unwrap();
        for ok in [
            "localhost",
            "localhost:4317",
            "127.0.0.1:4317",
            "127.8.0.1",
            "[::1]:4317",
            "a.localhost",
            "steward.tailnet.ts.net:4318",
        ] {
            assert!(p.host_allowed(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:4317",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "",
            "0.0.0.0",
            "[::2]",
        ] {
            assert!(!p.host_allowed(bad), "{bad}");
        }
        assert!(p.origin_allowed("http://localhost:4317", "localhost:4317"));
        assert!(p.origin_allowed("https://app.example:8443", "localhost:4317"));
        assert!(!p.origin_allowed("null", "localhost:4317"));
        assert!(!p.origin_allowed("http://localhost:4318", "localhost:4317"));
        assert!(!p.origin_allowed("https://evil.example", "localhost:4317"));
        assert!(!p.origin_allowed("file://", "localhost:4317"));
        assert!(OriginPolicy::new(&[], &["app.example".to_owned()]).is_err());
        assert!(OriginPolicy::new(&["a b".to_owned()], &[]).is_err());
    }
}
