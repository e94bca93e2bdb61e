//! The one error type that crosses the FFI boundary, mapped from every core error in one place.

use steward_core::StewardError;

/// An error from Steward: the coarse kind (pick a UI reaction from it), the stable code (match
/// on it), and a message for people.
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum FfiError {
    /// Something went wrong; see `kind` and `code`.
    #[error("{code}: {message}")]
    Steward {
        /// `invalid_input`, `not_found`, `conflict`, `denied`, `unavailable`, `corrupt`,
        /// `internal`.
        kind: String,
        /// The stable code, e.g. `MAIL_SOURCE_NOT_FOUND`.
        code: String,
        /// What happened.
        message: String,
    },
}

impl FfiError {
    pub(crate) fn from_core(e: &(impl StewardError + ?Sized)) -> Self {
        Self::Steward {
            kind: e.kind().as_str().to_owned(),
            code: e.code().to_owned(),
            message: e.to_string(),
        }
    }
}

impl From<steward_core::OpenError> for FfiError {
    fn from(e: steward_core::OpenError) -> Self {
        Self::from_core(&e)
    }
}

impl From<steward_core::mirror::MirrorError> for FfiError {
    fn from(e: steward_core::mirror::MirrorError) -> Self {
        Self::from_core(&e)
    }
}
