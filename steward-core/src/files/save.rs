//! Saving a mirrored mail attachment into a shared folder (`files.save_attachment`), with the
//! collision rules of the design's import table: a missing name is written; the same bytes
//! under the name are skipped (so a retry, or saving twice, writes nothing twice); different
//! bytes under the name get the next free `name (2).ext`. A file is never overwritten.
//!
//! Every step works on the folder as opened from its shared root one component at a time
//! without following any link, so a folder swapped for a link after the check cannot send the
//! file elsewhere; a name already there is opened without following a link, and only a regular
//! file of the right size is hashed. The bytes are written to a temporary file in that folder,
//! checked against the SHA-256 the person approved, synced, and only then published under
//! their name by a hard link, which fails instead of replacing anything. On a file system
//! without hard links (FAT, exFAT) the name is created exclusively and the bytes copied into
//! it: it still never replaces a file, but a crash in the copy can leave a short file under
//! the name (a later save then picks the next numbered name). A crash otherwise leaves at most
//! a `.steward-save-*.part` file. The name an attachment carries is data from a stranger: it
//! is cut to its last component, stripped of control and bidirectional-override characters and
//! of leading dots, bounded, and refused when it would name a secret.

use std::{
    fs::File,
    io::{Read, Write},
    os::fd::OwnedFd,
    path::{Path, PathBuf},
};

use rustix::fs::{AtFlags, Mode, OFlags};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::{
    ErrorKind, Steward, StewardError,
    attachments::AttachmentError,
    paths::{PathError, is_secret},
};

/// Longest file name a save writes, bytes (an extension of at most 16 bytes is kept when a
/// longer name is cut).
/// Fixed (not a setting).
pub const MAX_SAVE_NAME_BYTES: usize = 200;
/// Most numbered names tried when the name is taken by different bytes (`name (2).ext` to
/// `name (1000).ext`).
/// Fixed (not a setting).
pub const MAX_SAVE_COPIES: u32 = 1_000;

/// Where an attachment would go, before anything is written: what the person approves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SavePlan {
    /// The message's mirror id.
    pub message_id: i64,
    /// The attachment's position.
    pub position: i64,
    /// The folder (canonical, inside a shared folder).
    pub folder: PathBuf,
    /// The file name (cleaned); a taken name gets a number.
    pub name: String,
    /// The bytes' SHA-256 (lowercase hex).
    pub sha256: String,
    /// Bytes.
    pub size: u64,
    /// `type/subtype` as the message declared it.
    pub mime_type: String,
}

/// What a save did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SaveOutcome {
    /// The bytes were written under `path`.
    Written,
    /// `path` already held the same bytes: nothing was written.
    AlreadyThere,
}

/// A finished save.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SavedAttachment {
    /// Written or already there.
    pub outcome: SaveOutcome,
    /// The file that holds the bytes.
    pub path: PathBuf,
    /// Whether the planned name was taken by other bytes and a numbered name was used.
    pub renamed: bool,
    /// The bytes' SHA-256.
    pub sha256: String,
    /// Bytes.
    pub size: u64,
}

/// Why a save was refused or failed. Nothing is left under the file's name when it fails.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SaveError {
    /// The attachment is unknown or its bytes were not mirrored.
    #[error(transparent)]
    Attachment(#[from] AttachmentError),
    /// The folder is outside the shared folders, or a secret.
    #[error(transparent)]
    Path(#[from] PathError),
    /// No folder is shared.
    #[error("no folder is shared with Steward: set [files] roots in config.toml")]
    NoRoots,
    /// The destination is not a folder.
    #[error("{path} is not a folder")]
    NotAFolder {
        /// The path.
        path: PathBuf,
    },
    /// A name that cannot be used.
    #[error("the name {name:?} cannot be used: {why}")]
    BadName {
        /// The name as given.
        name: String,
        /// Why.
        why: String,
    },
    /// The attachment or the folder is not what was approved.
    #[error("not what was approved: {what}")]
    Changed {
        /// What differs.
        what: String,
    },
    /// Every numbered name up to [`MAX_SAVE_COPIES`] is taken by other bytes.
    #[error("{folder} holds {MAX_SAVE_COPIES} different files named like {name}")]
    NoFreeName {
        /// The folder.
        folder: PathBuf,
        /// The name.
        name: String,
    },
    /// The file system failed.
    #[error("{path}: {source}")]
    Io {
        /// Where.
        path: PathBuf,
        /// What.
        source: std::io::Error,
    },
}

impl StewardError for SaveError {
    fn code(&self) -> &'static str {
        match self {
            Self::Attachment(e) => e.code(),
            Self::Path(e) => e.code(),
            Self::NoRoots => "FILES_NO_ROOTS",
            Self::NotAFolder { .. } => "FILES_SAVE_NOT_A_FOLDER",
            Self::BadName { .. } => "FILES_SAVE_BAD_NAME",
            Self::Changed { .. } => "FILES_SAVE_CHANGED",
            Self::NoFreeName { .. } => "FILES_SAVE_NO_FREE_NAME",
            Self::Io { .. } => "FILES_SAVE_IO",
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            Self::Attachment(e) => e.kind(),
            Self::Path(e) => e.kind(),
            Self::NoRoots => ErrorKind::NotFound,
            Self::NotAFolder { .. } | Self::BadName { .. } => ErrorKind::InvalidInput,
            Self::Changed { .. } | Self::NoFreeName { .. } => ErrorKind::Conflict,
            Self::Io { .. } => ErrorKind::Internal,
        }
    }
}

/// Characters a name never keeps: those that do not format text but reorder or hide it
/// (`invoice\u{202E}fdp.exe` shows as `invoiceexe.pdf`).
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// `raw` made a plain file name: its last path component, without control, invisible or
/// reserved characters, in NFC, without leading dots and trailing dots or spaces, at most
/// [`MAX_SAVE_NAME_BYTES`] bytes (the extension kept). Empty when nothing is left. Cleaning a
/// cleaned name changes nothing.
pub fn clean_file_name(raw: &str) -> String {
    use unicode_normalization::UnicodeNormalization as _;
    let last = raw.rsplit(['/', '\\']).next().unwrap_or_default();
    let kept: String = last
        .chars()
        .filter(|c| {
            !c.is_control()
                && !invisible(*c)
                && !matches!(c, ':' | '*' | '?' | '"' | '<' | '>' | '|')
        })
        .collect();
    let mut name = trimmed(&kept.nfc().collect::<String>());
    if name.len() > MAX_SAVE_NAME_BYTES {
        let (stem, ext) = split_name(&name);
        let ext = if ext.len() <= 16 { ext } else { "" };
        let mut cut = MAX_SAVE_NAME_BYTES - ext.len();
        while !stem.is_char_boundary(cut) {
            cut -= 1;
        }
        name = trimmed(&format!("{}{ext}", &stem[..cut]));
    }
    name
}

/// `s` without surrounding white space, leading dots and trailing dots or spaces, until
/// nothing changes (`". .bashrc"` is `bashrc`, not `.bashrc`).
fn trimmed(s: &str) -> String {
    let mut cur = s.to_owned();
    loop {
        let next = cur.trim().trim_start_matches('.').trim_end_matches(['.', ' ']).to_owned();
        if next == cur {
            return cur;
        }
        cur = next;
    }
}

/// `report.final.pdf` → (`report.final`, `.pdf`); a name without a dot has no extension.
fn split_name(name: &str) -> (&str, &str) {
    match name.rfind('.') {
        Some(i) if i > 0 => (&name[..i], &name[i..]),
        _ => (name, ""),
    }
}

/// The `n`th name for `name`: itself, then `stem (2).ext`, `stem (3).ext`, …
fn numbered(name: &str, n: u32) -> String {
    if n <= 1 {
        return name.to_owned();
    }
    let (stem, ext) = split_name(name);
    format!("{stem} ({n}){ext}")
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SaveError + '_ {
    move |source| SaveError::Io { path: path.to_path_buf(), source }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Streams `from` into `h` (and into `to` when given).
fn pump(from: &mut File, h: &mut Sha256, mut to: Option<&mut File>) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        h.update(&buf[..n]);
        if let Some(t) = to.as_deref_mut() {
            t.write_all(&buf[..n])?;
        }
    }
}

/// The destination folder, opened once and used for every step.
struct Folder {
    fd: OwnedFd,
    path: PathBuf,
}

/// A temporary file in the folder, removed when dropped.
struct Part<'a> {
    folder: &'a Folder,
    name: String,
}

impl Drop for Part<'_> {
    fn drop(&mut self) {
        let _ = rustix::fs::unlinkat(&self.folder.fd, self.name.as_str(), AtFlags::empty());
    }
}

const DIR_FLAGS: OFlags =
    OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

impl Folder {
    /// `folder` (canonical, inside `root`) opened from `root` one component at a time, no link
    /// followed: a component swapped for a link since the check is refused, not followed.
    fn open(root: &Path, folder: &Path) -> Result<Self, SaveError> {
        let fail = io(folder);
        let below = folder.strip_prefix(root).map_err(|_| SaveError::Changed {
            what: format!("{} is not below {}", folder.display(), root.display()),
        })?;
        let mut fd = rustix::fs::open(root, DIR_FLAGS.difference(OFlags::NOFOLLOW), Mode::empty())
            .map_err(|e| io(root)(e.into()))?;
        for c in below.components() {
            let std::path::Component::Normal(part) = c else {
                return Err(SaveError::Changed {
                    what: format!("{} is not plain", folder.display()),
                });
            };
            fd = match rustix::fs::openat(&fd, part, DIR_FLAGS, Mode::empty()) {
                Ok(next) => next,
                Err(e) if e == rustix::io::Errno::LOOP || e == rustix::io::Errno::NOTDIR => {
                    return Err(SaveError::Changed {
                        what: format!("{} became a link since it was checked", folder.display()),
                    });
                }
                Err(e) => return Err(fail(e.into())),
            };
        }
        Ok(Self { fd, path: folder.to_path_buf() })
    }

    /// Whether `name` in the folder holds exactly the bytes `sha256` of `size`: `None` when
    /// the name is free; a link, a folder or any other kind of file never holds them (and is
    /// never followed or read).
    fn holds(&self, name: &str, size: u64, sha256: &str) -> Result<Option<bool>, SaveError> {
        let path = self.path.join(name);
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(&self.fd, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) if e == rustix::io::Errno::NOENT => return Ok(None),
            // A link (ELOOP), or something that cannot be opened to read: taken.
            Err(_) => return Ok(Some(false)),
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| io(&path)(e.into()))?;
        let regular =
            rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile;
        if !regular || u64::try_from(st.st_size).ok() != Some(size) {
            return Ok(Some(false));
        }
        let mut f = File::from(fd);
        let mut h = Sha256::new();
        pump(&mut f, &mut h, None).map_err(io(&path))?;
        Ok(Some(hex(&h.finalize()) == sha256))
    }

    /// A new file `name` in the folder (exclusive: never an existing one; never executable).
    fn create(&self, name: &str) -> std::io::Result<File> {
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mode = Mode::RUSR | Mode::WUSR | Mode::RGRP | Mode::ROTH;
        Ok(File::from(rustix::fs::openat(&self.fd, name, flags, mode)?))
    }

    /// Copies `blob` into a new temporary file, hashing as it goes; the copy is synced.
    /// Refused (and removed) when the bytes are not `sha256`.
    fn copy_in(&self, blob: &Path, sha256: &str) -> Result<Part<'_>, SaveError> {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(|_| AttachmentError::NoEntropy)?;
        let name = format!(".steward-save-{}.part", hex(&random));
        let path = self.path.join(&name);
        let mut out = self.create(&name).map_err(io(&path))?;
        let part = Part { folder: self, name };
        let mut src = File::open(blob).map_err(io(blob))?;
        let mut h = Sha256::new();
        pump(&mut src, &mut h, Some(&mut out)).map_err(io(&path))?;
        out.sync_all().map_err(io(&path))?;
        let got = hex(&h.finalize());
        if got != sha256 {
            return Err(SaveError::Changed {
                what: format!("the mirrored bytes hash to {got}, not the approved {sha256}"),
            });
        }
        Ok(part)
    }

    /// Publishes `part` as `name` without ever replacing a file: a hard link (atomic, fails
    /// when `name` exists); where links are not supported, an exclusive creation and a copy.
    fn publish(&self, part: &Part<'_>, name: &str) -> std::io::Result<()> {
        match rustix::fs::linkat(&self.fd, part.name.as_str(), &self.fd, name, AtFlags::empty()) {
            Ok(()) => Ok(()),
            Err(e) if e == rustix::io::Errno::EXIST => Err(e.into()),
            Err(_) => {
                let mut out = self.create(name)?;
                let from = rustix::fs::openat(
                    &self.fd,
                    part.name.as_str(),
                    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )?;
                let copied =
                    std::io::copy(&mut File::from(from), &mut out).and_then(|_| out.sync_all());
                if let Err(e) = copied {
                    let _ = rustix::fs::unlinkat(&self.fd, name, AtFlags::empty());
                    return Err(e);
                }
                Ok(())
            }
        }
    }

    /// Makes a published name durable (best effort).
    fn sync(&self) {
        let _ = rustix::fs::fsync(&self.fd);
    }
}

impl Steward {
    /// Where the attachment at `position` of `message_id` would be saved: `folder` (absolute
    /// or relative to a shared folder; the first shared folder when absent), under `name`
    /// (the attachment's own name, cleaned, when absent). Nothing is written.
    pub fn plan_attachment_save(
        &self,
        message_id: i64,
        position: i64,
        folder: Option<&Path>,
        name: Option<&str>,
    ) -> Result<SavePlan, SaveError> {
        let (own_name, mime_type, size, sha) = self
            .mirror()
            .attachment_blob(message_id, position)
            .map_err(AttachmentError::from)?
            .ok_or(AttachmentError::NotFound { message_id, position })?;
        if self.mirror().blob_path(&sha).is_none() {
            return Err(AttachmentError::NotDownloaded.into());
        }
        let roots = self.file_roots();
        let Some(first) = roots.first() else { return Err(SaveError::NoRoots) };
        let folder = self.guard_path(folder.unwrap_or(first.as_path()))?;
        if !folder.is_dir() {
            return Err(SaveError::NotAFolder { path: folder });
        }
        let name = match name {
            // A name the model or the person gave is used as given or refused, never changed.
            Some(given) => {
                let clean = clean_file_name(given);
                if clean.is_empty() || clean != given {
                    let why = if clean.is_empty() {
                        "nothing of it is a usable file name".to_owned()
                    } else {
                        format!("a plain file name is needed (for example {clean:?})")
                    };
                    return Err(SaveError::BadName { name: given.to_owned(), why });
                }
                clean
            }
            // The mail's name is a stranger's: cleaned, else a neutral one.
            None => Some(clean_file_name(own_name.as_deref().unwrap_or_default()))
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| format!("attachment-{position}")),
        };
        // A cleaned name never starts with a dot, so it is never one of the `.part` files.
        if is_secret(Path::new(&name)) {
            return Err(SaveError::BadName { name, why: "it would name a secret".to_owned() });
        }
        Ok(SavePlan {
            message_id,
            position,
            folder,
            name,
            sha256: sha.to_ascii_lowercase(),
            size,
            mime_type,
        })
    }

    /// Saves what `approved` (a [`Self::plan_attachment_save`]) describes, after checking
    /// that the attachment's bytes and the folder are still the approved ones: the name when
    /// it is free; nothing when it (or an earlier numbered copy) already holds the same bytes;
    /// else the next free `name (N).ext`. Never overwrites.
    pub fn save_attachment(&self, approved: &SavePlan) -> Result<SavedAttachment, SaveError> {
        let now = self.plan_attachment_save(
            approved.message_id,
            approved.position,
            Some(&approved.folder),
            Some(&approved.name),
        )?;
        if now.folder != approved.folder {
            return Err(SaveError::Changed {
                what: format!(
                    "the folder now resolves to {}, not {}",
                    now.folder.display(),
                    approved.folder.display()
                ),
            });
        }
        if now.sha256 != approved.sha256.to_ascii_lowercase() || now.size != approved.size {
            return Err(SaveError::Changed {
                what: format!("the attachment's bytes are {}, not {}", now.sha256, approved.sha256),
            });
        }
        let blob = self.mirror().blob_path(&now.sha256).ok_or(AttachmentError::NotDownloaded)?;
        // The shared root holding the folder (the longest, when roots nest).
        let root = self
            .file_roots()
            .iter()
            .filter_map(|r| r.canonicalize().ok())
            .filter(|r| now.folder.starts_with(r))
            .max_by_key(|r| r.as_os_str().len())
            .ok_or_else(|| PathError::OutsideRoots { path: now.folder.clone() })?;
        let folder = Folder::open(&root, &now.folder)?;
        let done = |outcome, name: &str, n: u32| SavedAttachment {
            outcome,
            path: now.folder.join(name),
            renamed: n > 1,
            sha256: now.sha256.clone(),
            size: now.size,
        };
        // The same bytes already under the name or a numbered one: nothing to write.
        let mut first_free = None;
        for n in 1..=MAX_SAVE_COPIES {
            let candidate = numbered(&now.name, n);
            match folder.holds(&candidate, now.size, &now.sha256)? {
                Some(true) => return Ok(done(SaveOutcome::AlreadyThere, &candidate, n)),
                Some(false) => {}
                None => {
                    first_free = Some(n);
                    break;
                }
            }
        }
        let Some(start) = first_free else {
            return Err(SaveError::NoFreeName { folder: now.folder, name: now.name });
        };
        let part = folder.copy_in(&blob, &now.sha256)?;
        for n in start..=MAX_SAVE_COPIES {
            let candidate = numbered(&now.name, n);
            if is_secret(Path::new(&candidate)) {
                continue;
            }
            match folder.publish(&part, &candidate) {
                Ok(()) => {
                    folder.sync();
                    return Ok(done(SaveOutcome::Written, &candidate, n));
                }
                // Taken since the look above (another writer): the same bytes count as saved.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if folder.holds(&candidate, now.size, &now.sha256)? == Some(true) {
                        return Ok(done(SaveOutcome::AlreadyThere, &candidate, n));
                    }
                }
                Err(e) => return Err(io(&now.folder.join(&candidate))(e)),
            }
        }
        Err(SaveError::NoFreeName { folder: now.folder, name: now.name })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_strangers_are_made_plain() {
        assert_eq!(clean_file_name("../../.ssh/authorized_keys"), "authorized_keys");
        assert_eq!(clean_file_name("C:\\Windows\\evil.bat"), "evil.bat");
        assert_eq!(clean_file_name(".bashrc"), "bashrc");
        assert_eq!(clean_file_name("invoice\u{202E}fdp.exe"), "invoicefdp.exe");
        assert_eq!(clean_file_name("a\u{0}b\nc.pdf"), "abc.pdf");
        assert_eq!(clean_file_name("report. . ."), "report");
        assert_eq!(clean_file_name("what?.txt"), "what.txt");
        assert_eq!(clean_file_name("/"), "");
        assert_eq!(clean_file_name("...."), "");
        let long = format!("{}.pdf", "é".repeat(300));
        let cut = clean_file_name(&long);
        assert!(cut.len() <= MAX_SAVE_NAME_BYTES && cut.ends_with(".pdf"), "{cut}");
        assert_eq!(numbered("lease.final.pdf", 2), "lease.final (2).pdf");
        assert_eq!(numbered("README", 3), "README (3)");
        assert_eq!(numbered("x.pdf", 1), "x.pdf");
        // Cleaning a cleaned name changes nothing (the save checks the approved name again).
        assert_eq!(clean_file_name(". .bashrc"), "bashrc");
        assert_eq!(clean_file_name("e\u{200B}\u{301}.txt"), "\u{e9}.txt");
        for raw in [
            ". .bashrc",
            "e\u{200B}\u{301}.txt",
            " . a . ",
            &long,
            "x\u{202E} .pdf",
            ".. ..",
            "a. .b",
        ] {
            let once = clean_file_name(raw);
            assert_eq!(clean_file_name(&once), once, "{raw:?}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_folder_swapped_for_a_link_is_refused_and_links_and_pipes_at_a_name_are_never_read() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().canonicalize().unwrap();
        let (root, outside) = (base.join("root"), base.join("outside"));
        std::fs::create_dir_all(root.join("real")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("sub")).unwrap();
        let e = Folder::open(&root, &root.join("sub")).err().unwrap();
        assert_eq!(e.code(), "FILES_SAVE_CHANGED", "{e}");
        assert!(Folder::open(&root, &outside).is_err(), "a folder outside the root");

        let f = Folder::open(&root, &root.join("real")).unwrap();
        std::fs::write(outside.join("x.pdf"), b"abc").unwrap();
        std::os::unix::fs::symlink(outside.join("x.pdf"), root.join("real/x.pdf")).unwrap();
        let sha = hex(&Sha256::digest(b"abc"));
        assert_eq!(f.holds("x.pdf", 3, &sha).unwrap(), Some(false), "a link is taken, not read");
        assert_eq!(f.holds("free.pdf", 3, &sha).unwrap(), None);
        rustix::fs::mknodat(&f.fd, "pipe", rustix::fs::FileType::Fifo, Mode::RUSR | Mode::WUSR, 0)
            .unwrap();
        // Opening a pipe to read would wait for a writer forever: it is taken, never read.
        assert_eq!(f.holds("pipe", 0, &sha).unwrap(), Some(false));
        std::fs::write(root.join("real/y.pdf"), b"abc").unwrap();
        assert_eq!(f.holds("y.pdf", 3, &sha).unwrap(), Some(true));
    }
}
