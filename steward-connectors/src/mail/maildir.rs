//! Maildir and Maildir++ stores: `cur/` and `new/` (never `tmp/`), flags from the `:2,` info
//! suffix (also `;2,`, which some tools write on file systems that forbid `:`), and Maildir++
//! subfolders `.Name.Sub` mapped to `Name/Sub`.

use std::{
    fs,
    path::{Path, PathBuf},
    time::UNIX_EPOCH,
};

use steward_core::mirror::{
    FileError, Flags, MailSource, MailboxRef, ParseLimits, ParsedMessage, SourceError, SourceFile,
};

use super::mime::{MessageContext, parse_message};

/// A Maildir (with optional Maildir++ subfolders) on disk.
#[derive(Debug, Clone)]
pub struct MaildirSource {
    root: PathBuf,
}

impl MaildirSource {
    /// A source rooted at `root` (the directory holding `cur/`, `new/` and `.Folder/`s).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }
}

/// Splits a Maildir file name into its unique part and its flags.
pub fn split_info(file_name: &str) -> (&str, Flags) {
    let split = file_name
        .rfind(":2,")
        .or_else(|| file_name.rfind(";2,"))
        .or_else(|| file_name.rfind("!2,"));
    match split {
        Some(at) => {
            let letters = &file_name[at + 3..];
            let flags = Flags {
                seen: letters.contains('S'),
                answered: letters.contains('R'),
                flagged: letters.contains('F'),
                draft: letters.contains('D'),
                deleted: letters.contains('T'),
            };
            (&file_name[..at], flags)
        }
        None => (file_name, Flags::default()),
    }
}

pub(crate) fn mtime_ns(meta: &fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

fn is_maildir(dir: &Path) -> bool {
    dir.join("cur").is_dir() || dir.join("new").is_dir()
}

fn folder_name(dot_name: &str) -> String {
    dot_name.trim_start_matches('.').replace('.', "/")
}

fn scan_folder(
    dir: &Path,
    mailbox: &MailboxRef,
    out: &mut Vec<SourceFile>,
) -> Result<(), SourceError> {
    for sub in ["cur", "new"] {
        let d = dir.join(sub);
        let entries = match fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(SourceError::io(&d, &e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| SourceError::io(&d, &e))?;
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            // A file can vanish between listing and stat; that is a normal race, not an error.
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            out.push(SourceFile {
                path: entry.path(),
                mailbox: mailbox.clone(),
                mtime_ns: mtime_ns(&meta),
                size: meta.len(),
            });
        }
    }
    Ok(())
}

/// Deepest nested folder followed.
/// Fixed (not a setting).
const MAX_FOLDER_DEPTH: usize = 16;

/// Finds Maildirs in plain subdirectories (not Maildir++ dot folders, not cur/new/tmp).
fn nested_folders(
    dir: &Path,
    prefix: &str,
    depth: usize,
    out: &mut Vec<(PathBuf, MailboxRef)>,
) -> Result<(), SourceError> {
    if depth >= MAX_FOLDER_DEPTH {
        return Ok(());
    }
    let entries = fs::read_dir(dir).map_err(|e| SourceError::io(dir, &e))?;
    for entry in entries {
        let entry = entry.map_err(|e| SourceError::io(dir, &e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || matches!(name.as_str(), "cur" | "new" | "tmp") {
            continue;
        }
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        let mailbox = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
        if is_maildir(&path) {
            out.push((path.clone(), MailboxRef::named(mailbox.clone())));
        }
        nested_folders(&path, &mailbox, depth + 1, out)?;
    }
    Ok(())
}

impl MailSource for MaildirSource {
    fn format(&self) -> &'static str {
        "maildir"
    }

    fn root(&self) -> &Path {
        &self.root
    }

    fn default_account(&self) -> String {
        self.root
            .file_name()
            .map_or_else(|| "maildir".to_owned(), |n| n.to_string_lossy().into_owned())
    }

    fn scan(&self) -> Result<Vec<SourceFile>, SourceError> {
        let meta = fs::metadata(&self.root).map_err(|e| SourceError::io(&self.root, &e))?;
        if !meta.is_dir() {
            return Err(SourceError::WrongFormat {
                path: self.root.clone(),
                expected: "Maildir directory",
            });
        }
        let mut folders = Vec::new();
        if is_maildir(&self.root) {
            folders.push((self.root.clone(), MailboxRef::named("INBOX")));
        }
        let entries = fs::read_dir(&self.root).map_err(|e| SourceError::io(&self.root, &e))?;
        for entry in entries {
            let entry = entry.map_err(|e| SourceError::io(&self.root, &e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if name.starts_with('.')
                && name.len() > 1
                && name != ".."
                && path.is_dir()
                && is_maildir(&path)
            {
                folders.push((path, MailboxRef::named(folder_name(&name))));
            }
        }
        // Nested layout (mbsync `SubFolders Verbatim`, offlineimap): `Work/Clients/cur`.
        nested_folders(&self.root, "", 0, &mut folders)?;
        if folders.is_empty() {
            return Err(SourceError::WrongFormat {
                path: self.root.clone(),
                expected: "Maildir (no cur/ or new/ found)",
            });
        }
        folders.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out = Vec::new();
        for (dir, mailbox) in &folders {
            scan_folder(dir, mailbox, &mut out)?;
        }
        Ok(out)
    }

    fn read(
        &self,
        file: &SourceFile,
        limits: &ParseLimits,
        each: &mut dyn FnMut(ParsedMessage),
    ) -> Result<(), FileError> {
        if file.size > limits.max_message_bytes {
            return Err(FileError::TooLarge { size: file.size, limit: limits.max_message_bytes });
        }
        let bytes = fs::read(&file.path).map_err(|e| FileError::Io { reason: e.to_string() })?;
        let name =
            file.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let (unique, flags) = split_info(&name);
        let ctx = MessageContext {
            source_key: format!("{}/{}", file.mailbox.name, unique),
            flags: Some(flags),
            ..MessageContext::default()
        };
        each(parse_message(&bytes, &ctx, limits, None)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_suffixes() {
        let (u, f) = split_info("1234.M1P2.host,S=10:2,RS");
        assert_eq!(u, "1234.M1P2.host,S=10");
        assert!(f.seen && f.answered && !f.flagged);
        let (u, f) = split_info("1276533073.M242911P3632.kurkku;2,FP");
        assert_eq!(u, "1276533073.M242911P3632.kurkku");
        assert!(f.flagged && !f.seen);
        let (_, f) = split_info("x;2,RDF,");
        assert!(f.answered && f.draft && f.flagged);
        let (_, f) = split_info("x:2,STln");
        assert!(f.seen && f.deleted);
        let (u, f) = split_info("no-info-yet");
        assert_eq!((u, f), ("no-info-yet", Flags::default()));
    }

    #[test]
    fn maildirpp_names() {
        assert_eq!(folder_name(".My Folder.Nested Folder"), "My Folder/Nested Folder");
        assert_eq!(folder_name(".Sent"), "Sent");
    }
}
