//! The records that cross between a mail source (a connector) and the mirror.

use std::path::{Path, PathBuf};

use crate::error::{ErrorKind, StewardError};

/// What a mailbox is for. Derived from its name (English and Italian), Maildir++ naming, or a
/// source's SPECIAL-USE hint.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum MailboxRole {
    /// The inbox.
    Inbox,
    /// Sent mail.
    Sent,
    /// Drafts.
    Drafts,
    /// Deleted mail.
    Trash,
    /// Spam.
    Junk,
    /// Archived mail.
    Archive,
    /// Gmail's "All Mail": a copy of everything, never the most specific attribution.
    AllMail,
    /// Any other folder or label.
    Other,
}

impl MailboxRole {
    /// Every role, in a stable order.
    pub const ALL: [MailboxRole; 8] = [
        Self::Inbox,
        Self::Sent,
        Self::Drafts,
        Self::Trash,
        Self::Junk,
        Self::Archive,
        Self::AllMail,
        Self::Other,
    ];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Inbox => "inbox",
            Self::Sent => "sent",
            Self::Drafts => "drafts",
            Self::Trash => "trash",
            Self::Junk => "junk",
            Self::Archive => "archive",
            Self::AllMail => "all_mail",
            Self::Other => "other",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// A mailbox as a source names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MailboxRef {
    /// The display path, `/`-separated (`INBOX`, `Archive/2024`, `[Gmail]/Sent Mail`).
    pub name: String,
    /// A role the source states outright (IMAP SPECIAL-USE), which wins over name heuristics.
    pub special_use: Option<MailboxRole>,
}

impl MailboxRef {
    /// A mailbox known only by name.
    pub fn named(name: impl Into<String>) -> Self {
        Self { name: name.into(), special_use: None }
    }

    /// The role: the source's hint, else the name classification.
    pub fn role(&self) -> MailboxRole {
        self.special_use.unwrap_or_else(|| super::role::classify_mailbox(&self.name))
    }
}

/// One physical file a source found while scanning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Absolute path.
    pub path: PathBuf,
    /// The mailbox it belongs to.
    pub mailbox: MailboxRef,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// Size in bytes.
    pub size: u64,
}

/// Message flags, as the source records them.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
pub struct Flags {
    /// Read.
    pub seen: bool,
    /// Replied to.
    pub answered: bool,
    /// Flagged / starred.
    pub flagged: bool,
    /// A draft.
    pub draft: bool,
    /// Marked deleted (Maildir `T`, Mail's deleted bit); the message still exists on disk.
    pub deleted: bool,
}

impl Flags {
    /// The stored bitfield: 1 seen, 2 answered, 4 flagged, 8 draft, 16 deleted.
    pub fn bits(self) -> i64 {
        i64::from(self.seen)
            | i64::from(self.answered) << 1
            | i64::from(self.flagged) << 2
            | i64::from(self.draft) << 3
            | i64::from(self.deleted) << 4
    }

    /// The inverse of [`Self::bits`].
    pub fn from_bits(bits: i64) -> Self {
        Self {
            seen: bits & 1 != 0,
            answered: bits & 2 != 0,
            flagged: bits & 4 != 0,
            draft: bits & 8 != 0,
            deleted: bits & 16 != 0,
        }
    }
}

/// A mailbox address with its display name.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Address {
    /// The display name, decoded (RFC 2047), if any.
    pub name: Option<String>,
    /// The addr-spec as written (case kept).
    pub addr: String,
}

/// How much of a message body the mirror holds. A partial body with usable text stays searchable;
/// individual reads say which state they serve.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum BodyState {
    /// The whole message was on disk.
    Full,
    /// Only part of it was (an Apple Mail `.partial.emlx`), but with usable text.
    Partial,
    /// No usable body text is held locally.
    None,
}

impl BodyState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Partial => "partial",
            Self::None => "none",
        }
    }
}

/// An attachment found while parsing. The bytes, when present, go to the blob store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedAttachment {
    /// The file name (`filename`/`name` parameters, RFC 2231/2047 decoded).
    pub name: Option<String>,
    /// `type/subtype`, lowercased.
    pub mime_type: String,
    /// The decoded size in bytes (the declared size when the bytes are missing).
    pub size: u64,
    /// The decoded bytes; `None` when the source does not hold them (a partial download).
    pub bytes: Option<Vec<u8>>,
}

/// A message as a source parsed it, before the mirror gives it an identity and a thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedMessage {
    /// Position inside its file (mbox); 0 for one-message-per-file sources.
    pub ordinal: u32,
    /// Byte offset of the message inside its file.
    pub offset: u64,
    /// Size of the RFC 822 message in bytes.
    pub size: u64,
    /// A key that is stable for this message in its source even when flags or folders of a
    /// one-file-per-message store change (Maildir unique name, Apple Mail message number, mbox
    /// content hash). Used only to derive a surrogate identity when Message-ID is absent.
    pub source_key: String,
    /// SHA-256 of the RFC 822 bytes.
    pub content_hash: [u8; 32],
    /// The Message-ID, without angle brackets.
    pub message_id: Option<String>,
    /// The decoded subject.
    pub subject: Option<String>,
    /// From addresses.
    pub from: Vec<Address>,
    /// To addresses.
    pub to: Vec<Address>,
    /// Cc addresses.
    pub cc: Vec<Address>,
    /// Bcc addresses.
    pub bcc: Vec<Address>,
    /// The Date header, Unix seconds.
    pub date: Option<i64>,
    /// When the message was received, if the source records it (Unix seconds).
    pub received_at: Option<i64>,
    /// In-Reply-To ids, without angle brackets.
    pub in_reply_to: Vec<String>,
    /// References ids, in header order, without angle brackets.
    pub references: Vec<String>,
    /// Gmail's thread id (`X-GM-THRID`) when present.
    pub gm_thread_id: Option<String>,
    /// Flags.
    pub flags: Flags,
    /// Readable body text: text/plain preferred, else text from HTML with scripts and styles
    /// dropped.
    pub body_text: String,
    /// How complete the body is.
    pub body_state: BodyState,
    /// Attachments.
    pub attachments: Vec<ParsedAttachment>,
    /// Why the headers mark it as bulk or automated mail (`list-unsubscribe`, `list-id`,
    /// `precedence: bulk`, `auto-submitted: auto-generated`), when they do.
    pub bulk: Option<String>,
}

/// Bounds a source applies while parsing (taken from [`crate::Limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseLimits {
    /// See [`crate::limits::MAX_MESSAGE_BYTES`].
    pub max_message_bytes: u64,
    /// See [`crate::limits::MAX_HEADER_BYTES`].
    pub max_header_bytes: usize,
    /// See [`crate::limits::MAX_BODY_CHARS`].
    pub max_body_chars: usize,
    /// See [`crate::limits::MAX_ADDRESSES_PER_FIELD`].
    pub max_addresses_per_field: usize,
    /// See [`crate::limits::MAX_REFERENCES`].
    pub max_references: usize,
    /// See [`crate::limits::MAX_ATTACHMENTS`].
    pub max_attachments: usize,
}

impl From<&crate::Limits> for ParseLimits {
    fn from(l: &crate::Limits) -> Self {
        Self {
            max_message_bytes: l.max_message_bytes,
            max_header_bytes: l.max_header_bytes,
            max_body_chars: l.max_body_chars,
            max_addresses_per_field: l.max_addresses_per_field,
            max_references: l.max_references,
            max_attachments: l.max_attachments,
        }
    }
}

/// Why one file could not be ingested. Recorded per file; never stops an ingest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The file is empty.
    #[error("file is empty")]
    Empty,
    /// The file is larger than the limit.
    #[error("message is {size} bytes, above the {limit}-byte limit")]
    TooLarge {
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The header block is larger than the limit (a header bomb).
    #[error("header block exceeds {limit} bytes")]
    HeaderTooLarge {
        /// The limit.
        limit: usize,
    },
    /// The bytes are not an RFC 822 message (binary, no header fields).
    #[error("not a mail message: {reason}")]
    NotMail {
        /// What was wrong.
        reason: String,
    },
    /// The container framing (emlx byte count, plist trailer, mbox From_ line) is broken.
    #[error("bad {format} framing: {reason}")]
    Framing {
        /// `emlx` or `mbox`.
        format: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// The file could not be read.
    #[error("cannot read file: {reason}")]
    Io {
        /// The OS error text.
        reason: String,
    },
}

impl StewardError for FileError {
    fn code(&self) -> &'static str {
        match self {
            Self::Empty => "MAIL_FILE_EMPTY",
            Self::TooLarge { .. } => "MAIL_FILE_TOO_LARGE",
            Self::HeaderTooLarge { .. } => "MAIL_HEADER_TOO_LARGE",
            Self::NotMail { .. } => "MAIL_NOT_A_MESSAGE",
            Self::Framing { .. } => "MAIL_BAD_FRAMING",
            Self::Io { .. } => "MAIL_FILE_UNREADABLE",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Io { .. } => ErrorKind::Unavailable,
            _ => ErrorKind::InvalidInput,
        }
    }
}

/// Why a whole source could not be scanned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The root does not exist.
    #[error("mail source {path} does not exist")]
    NotFound {
        /// The root.
        path: PathBuf,
    },
    /// The root is not what this source reads (not a directory, not a Maildir, not an mbox).
    #[error("{path} is not a {expected}")]
    WrongFormat {
        /// The root.
        path: PathBuf,
        /// What was expected.
        expected: &'static str,
    },
    /// The root could not be read.
    #[error("cannot read {path}: {reason}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error text.
        reason: String,
    },
}

impl SourceError {
    /// An I/O error at `path`.
    pub fn io(path: &Path, e: &std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::NotFound {
            Self::NotFound { path: path.to_path_buf() }
        } else {
            Self::Io { path: path.to_path_buf(), reason: e.to_string() }
        }
    }
}

impl StewardError for SourceError {
    fn code(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => "MAIL_SOURCE_NOT_FOUND",
            Self::WrongFormat { .. } => "MAIL_SOURCE_WRONG_FORMAT",
            Self::Io { .. } => "MAIL_SOURCE_UNREADABLE",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::NotFound { .. } => ErrorKind::NotFound,
            Self::WrongFormat { .. } => ErrorKind::InvalidInput,
            Self::Io { .. } => ErrorKind::Unavailable,
        }
    }
}

/// A mail store on disk that the mirror can sync from. Implemented in `steward-connectors`
/// (Maildir, mbox, Apple Mail). `scan` lists files cheaply (names, mtimes, sizes); `read` parses
/// one file into its messages.
pub trait MailSource: Send + Sync {
    /// A short name for the format (`maildir`, `mbox`, `emlx`).
    fn format(&self) -> &'static str;
    /// The root path of the store.
    fn root(&self) -> &Path;
    /// An account name to use when the caller gives none.
    fn default_account(&self) -> String;
    /// Lists every message file. Must not parse contents.
    fn scan(&self) -> Result<Vec<SourceFile>, SourceError>;
    /// Parses one file, handing each message to `each` as soon as it is parsed (an mbox holds
    /// thousands; the caller stores attachment bytes and drops them at once, so memory does not
    /// grow with the file). Called from several threads at once.
    fn read(
        &self,
        file: &SourceFile,
        limits: &ParseLimits,
        each: &mut dyn FnMut(ParsedMessage),
    ) -> Result<(), FileError>;
}
