//! The error vocabulary every module shares: a coarse [`ErrorKind`] that frontends map to their idiom
//! (an HTTP status, a Python exception class, a Swift enum case) and a stable `code()` string that
//! callers may match on. Each module keeps its own `thiserror` enum and implements [`StewardError`].

use std::fmt;

/// The coarse class of an error. Frontends map this, never the message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The caller supplied something malformed or out of bounds; nothing was changed.
    InvalidInput,
    /// The thing asked for does not exist.
    NotFound,
    /// The request conflicts with the current state (a duplicate, a stale version).
    Conflict,
    /// Policy or authority forbids the request.
    Denied,
    /// A dependency (a file system, an endpoint) is unavailable; retrying later may help.
    Unavailable,
    /// Stored state is damaged; a person must restore or rebuild it.
    Corrupt,
    /// A bug or an unexpected condition inside Steward.
    Internal,
}

impl ErrorKind {
    /// The stable snake_case name of this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidInput => "invalid_input",
            Self::NotFound => "not_found",
            Self::Conflict => "conflict",
            Self::Denied => "denied",
            Self::Unavailable => "unavailable",
            Self::Corrupt => "corrupt",
            Self::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Implemented by every public error enum of the core and the connectors.
pub trait StewardError: std::error::Error {
    /// A stable, SCREAMING_SNAKE_CASE code (`MIRROR_SOURCE_NOT_FOUND`). Never changes once shipped.
    fn code(&self) -> &'static str;
    /// The coarse kind, for frontends.
    fn kind(&self) -> ErrorKind;
}

/// A boxed underlying cause; keeps dependency error types out of public signatures.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;
