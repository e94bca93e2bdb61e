//! Opaque, short-lived tokens for mirrored attachments, so a frontend can offer a download
//! without ever naming a path: a token is registered for one (message, position) and resolves
//! to the blob only through the mirror.

use std::{collections::HashMap, path::PathBuf, sync::Mutex};

use serde::Serialize;

use crate::{ErrorKind, Steward, StewardError, store::StoreError};

/// Tokens held at once; past it the oldest is dropped.
/// Fixed (not a setting).
pub const MAX_ATTACHMENT_TOKENS: usize = 4_096;
/// How long a token works, seconds.
/// Fixed (not a setting).
pub const ATTACHMENT_TOKEN_TTL_SECS: i64 = 3_600;

/// A registered download.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct AttachmentGrant {
    /// The opaque token (`GET /attachments/{token}`).
    pub token: String,
    /// Unix seconds.
    pub expires_at: i64,
    /// The file name, if the message gave one.
    pub name: Option<String>,
    /// `type/subtype`.
    pub mime_type: String,
    /// Bytes.
    pub size: u64,
}

/// What a token resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentFile {
    /// A file name to offer (the message's, else `attachment-<position>`).
    pub name: String,
    /// `type/subtype` as the message declared it.
    pub mime_type: String,
    /// Bytes.
    pub size: u64,
    /// The blob in the mirror.
    pub path: PathBuf,
}

/// Errors of attachment downloads.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttachmentError {
    /// No attachment at that position of that message.
    #[error("message {message_id} has no attachment at position {position}")]
    NotFound {
        /// The message.
        message_id: i64,
        /// The position.
        position: i64,
    },
    /// The source held only the attachment's metadata (a partial download).
    #[error("the attachment's bytes were not in the mirrored source")]
    NotDownloaded,
    /// The token is unknown or expired.
    #[error("unknown or expired attachment token")]
    UnknownToken,
    /// The operating system gave no randomness.
    #[error("the operating system has no source of randomness")]
    NoEntropy,
    /// The mirror could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl StewardError for AttachmentError {
    fn code(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => "ATTACHMENT_NOT_FOUND",
            Self::NotDownloaded => "ATTACHMENT_NOT_DOWNLOADED",
            Self::UnknownToken => "ATTACHMENT_TOKEN_UNKNOWN",
            Self::NoEntropy => "ACCESS_NO_ENTROPY",
            Self::Store(e) => e.code(),
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::NotFound { .. } | Self::NotDownloaded | Self::UnknownToken => ErrorKind::NotFound,
            Self::NoEntropy => ErrorKind::Unavailable,
            Self::Store(e) => e.kind(),
        }
    }
}

/// The token registry of one handle (in memory: tokens die with the process).
#[derive(Debug, Default)]
pub(crate) struct Registry {
    tokens: Mutex<HashMap<String, (i64, i64, i64)>>,
}

impl Steward {
    /// Registers a download token for the attachment at `position` of `message_id`.
    pub fn attachment_token(
        &self,
        message_id: i64,
        position: i64,
        now: i64,
    ) -> Result<AttachmentGrant, AttachmentError> {
        let (name, mime_type, size, sha) = self
            .mirror()
            .attachment_blob(message_id, position)?
            .ok_or(AttachmentError::NotFound { message_id, position })?;
        if self.mirror().blob_path(&sha).is_none() {
            return Err(AttachmentError::NotDownloaded);
        }
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|_| AttachmentError::NoEntropy)?;
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let expires_at = now + ATTACHMENT_TOKEN_TTL_SECS;
        let mut map = self
            .attachment_registry()
            .tokens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.retain(|_, (_, _, exp)| *exp > now);
        if map.len() >= MAX_ATTACHMENT_TOKENS
            && let Some(oldest) =
                map.iter().min_by_key(|(_, (_, _, exp))| *exp).map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(token.clone(), (message_id, position, expires_at));
        Ok(AttachmentGrant { token, expires_at, name, mime_type, size })
    }

    /// The file a live token names.
    pub fn open_attachment(
        &self,
        token: &str,
        now: i64,
    ) -> Result<AttachmentFile, AttachmentError> {
        let found = {
            let map = self
                .attachment_registry()
                .tokens
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            map.get(token).copied()
        };
        let (message_id, position, expires_at) = found.ok_or(AttachmentError::UnknownToken)?;
        if expires_at <= now {
            return Err(AttachmentError::UnknownToken);
        }
        let (name, mime_type, size, sha) = self
            .mirror()
            .attachment_blob(message_id, position)?
            .ok_or(AttachmentError::NotFound { message_id, position })?;
        let path = self.mirror().blob_path(&sha).ok_or(AttachmentError::NotDownloaded)?;
        Ok(AttachmentFile {
            name: name.unwrap_or_else(|| format!("attachment-{position}")),
            mime_type,
            size,
            path,
        })
    }
}
