//! `steward memory import DIR`: existing markdown memory (an Obsidian vault, a basic-memory
//! folder, an OpenClaw `MEMORY.md`) turned into proposals, or, when a person imports with
//! `accept`, into notes of theirs.
//!
//! Each file is split into facts: its list items when it is a list (a `MEMORY.md`), else its
//! paragraphs; any frontmatter of the other tool is dropped, headings give context only. The
//! collisions follow the design's import table, per origin file (`memory/imports.json` maps
//! each origin to the hash of the bytes last imported and what they became):
//!
//! | the origin | the import |
//! |---|---|
//! | never imported | its facts are proposed (or accepted) |
//! | the same bytes as last time | skipped; the tracking stays |
//! | other bytes, a known origin | its proposals still waiting are replaced by the new ones |
//!
//! A fact already known (an accepted note or a waiting proposal of the same words) is not
//! written again, a fact the person rejected or forgot is dropped, and an accepted note is
//! never overwritten.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use super::{
    Files, MemoryError, MemoryKind, MemorySource, NewMemory, ProposeOutcome, Sensitivity, note,
};
use crate::{Steward, approval::HumanAuthority};

/// Most files one import reads.
/// Fixed (not a setting).
pub const MAX_IMPORT_FILES: usize = 10_000;
/// Largest file imported, bytes (a larger one is skipped and reported).
/// Fixed (not a setting).
pub const MAX_IMPORT_FILE_BYTES: u64 = 1024 * 1024;
/// Most facts taken from one file.
/// Fixed (not a setting).
pub const MAX_IMPORT_FACTS_PER_FILE: usize = 500;
/// Most folders deep an import walks.
/// Fixed (not a setting).
pub const MAX_IMPORT_DEPTH: usize = 16;

/// The tracking file under `memory/`.
const MANIFEST: &str = "imports.json";

/// What one origin file became last time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Origin {
    /// SHA-256 of its bytes.
    sha: String,
    /// The proposals and notes made from it.
    ids: Vec<String>,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ImportReport {
    /// Markdown files read.
    pub files: usize,
    /// Files skipped because their bytes were imported before.
    pub unchanged: usize,
    /// Facts proposed (or, accepted by a person, written as notes).
    pub added: usize,
    /// Facts already known (a note or a waiting proposal of the same words).
    pub known: usize,
    /// Facts the person rejected or forgot before: dropped.
    pub suppressed: usize,
    /// Waiting proposals of changed files replaced by the new ones.
    pub replaced: usize,
    /// Files not imported, with why.
    pub skipped: Vec<(String, String)>,
    /// The import stopped early (the inbox is full): why.
    pub stopped: Option<String>,
}

/// The facts of a markdown text: list items when it is a list, else paragraphs.
pub(crate) fn facts(text: &str) -> Vec<String> {
    let body = match text.strip_prefix("---\n").and_then(|r| r.find("\n---").map(|i| &r[i + 4..])) {
        Some(rest) => rest,
        None => text,
    };
    let mut items: Vec<String> = Vec::new();
    let mut paragraphs: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut in_item = false;
    for line in body.lines() {
        let t = line.trim();
        let bullet = t
            .strip_prefix("- ")
            .or_else(|| t.strip_prefix("* "))
            .or_else(|| t.strip_prefix("+ "))
            .filter(|_| !line.starts_with("  ") && !line.starts_with('\t'));
        if let Some(b) = bullet {
            let b = b.strip_prefix("[ ] ").or_else(|| b.strip_prefix("[x] ")).unwrap_or(b);
            items.push(b.trim().to_owned());
            in_item = true;
        } else if t.is_empty() {
            in_item = false;
            if !current.trim().is_empty() {
                paragraphs.push(std::mem::take(&mut current));
            }
            current.clear();
        } else if t.starts_with('#') {
            in_item = false;
            if !current.trim().is_empty() {
                paragraphs.push(std::mem::take(&mut current));
            }
        } else if in_item && line.starts_with([' ', '\t']) {
            if let Some(last) = items.last_mut() {
                last.push(' ');
                last.push_str(t);
            }
        } else {
            in_item = false;
            current.push_str(t);
            current.push('\n');
        }
    }
    if !current.trim().is_empty() {
        paragraphs.push(current);
    }
    let chosen =
        if items.len() >= 2 { items } else { paragraphs.into_iter().chain(items).collect() };
    chosen
        .into_iter()
        .map(|f| f.trim().to_owned())
        .filter(|f| !note::normalized(f).is_empty())
        .flat_map(|f| split_long(&f))
        .take(MAX_IMPORT_FACTS_PER_FILE)
        .collect()
}

/// `text` in pieces of at most [`note::MAX_NOTE_CHARS`] characters, cut at whitespace.
fn split_long(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut piece = String::new();
    for word in text.split_inclusive(char::is_whitespace) {
        if piece.chars().count() + word.chars().count() > note::MAX_NOTE_CHARS && !piece.is_empty()
        {
            out.push(std::mem::take(&mut piece).trim().to_owned());
        }
        piece.extend(word.chars().take(note::MAX_NOTE_CHARS));
    }
    if !piece.trim().is_empty() {
        out.push(piece.trim().to_owned());
    }
    out
}

/// The markdown files under `dir` (not hidden, no links followed), by path, at most
/// [`MAX_IMPORT_FILES`]; the rest are reported.
fn walk(dir: &Path, report: &mut ImportReport) -> Result<Vec<PathBuf>, MemoryError> {
    let mut out = Vec::new();
    let mut todo = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, depth)) = todo.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| super::io(&d, &e))?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let Ok(kind) = entry.file_type() else { continue };
            let path = entry.path();
            if kind.is_dir() {
                if depth < MAX_IMPORT_DEPTH {
                    todo.push((path, depth + 1));
                }
            } else if kind.is_file() && name.to_lowercase().ends_with(".md") {
                if out.len() >= MAX_IMPORT_FILES {
                    report.skipped.push((
                        path.display().to_string(),
                        format!("more than {MAX_IMPORT_FILES} files"),
                    ));
                    continue;
                }
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

impl Steward {
    /// Imports the markdown under `dir` (see the module's documentation): proposals, or notes
    /// of `accept`'s person.
    pub fn memory_import(
        &self,
        dir: &Path,
        accept: Option<&HumanAuthority>,
    ) -> Result<ImportReport, MemoryError> {
        let meta = std::fs::metadata(dir).map_err(|e| super::io(dir, &e))?;
        if !meta.is_dir() {
            return Err(MemoryError::BadNote(format!("{} is not a folder", dir.display())));
        }
        let dir = dir.canonicalize().map_err(|e| super::io(dir, &e))?;
        let files = Files::new(self.home());
        if dir.starts_with(files.root.canonicalize().unwrap_or_else(|_| files.root.clone())) {
            return Err(MemoryError::BadNote("the memory folder cannot import itself".to_owned()));
        }
        let mut report = ImportReport::default();
        let paths = walk(&dir, &mut report)?;
        let manifest_path = files.root.join(MANIFEST);
        let mut manifest: BTreeMap<String, Origin> = std::fs::read_to_string(&manifest_path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        for path in paths {
            let origin = path.display().to_string();
            let size = std::fs::symlink_metadata(&path).map(|m| m.len()).unwrap_or(u64::MAX);
            if size > MAX_IMPORT_FILE_BYTES {
                report.skipped.push((origin, format!("larger than {MAX_IMPORT_FILE_BYTES} bytes")));
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                report.skipped.push((origin, "not UTF-8 text".to_owned()));
                continue;
            };
            report.files += 1;
            let sha = super::sha(text.as_bytes());
            let known = manifest.get(&origin).cloned();
            if known.as_ref().is_some_and(|k| k.sha == sha) {
                report.unchanged += 1;
                continue;
            }
            // A changed origin: its proposals still waiting give way to the new ones.
            if let Some(k) = &known {
                report.replaced += self.drop_proposals(&files, &k.ids)?;
            }
            let relative = path.strip_prefix(&dir).unwrap_or(&path).display().to_string();
            let mut ids = Vec::new();
            for f in facts(&text) {
                let m = NewMemory {
                    text: f,
                    kind: MemoryKind::Fact,
                    subject: None,
                    valid_from: None,
                    valid_to: None,
                    confidence: None,
                    sources: vec![MemorySource::Import { path: relative.clone() }],
                    supersedes: Vec::new(),
                    sensitivity: Sensitivity::Normal,
                };
                let outcome = match accept {
                    Some(who) => self.memory_write_reviewed(who, &m),
                    None => self.memory_propose("import", &m),
                };
                match outcome {
                    Ok(ProposeOutcome::Proposed { id }) => {
                        report.added += 1;
                        ids.push(id);
                    }
                    // Not tracked as this file's: a proposal from another source (the mail
                    // promotion) must not go when this file changes.
                    Ok(
                        ProposeOutcome::AlreadyProposed { .. }
                        | ProposeOutcome::AlreadyKnown { .. },
                    ) => {
                        report.known += 1;
                    }
                    Ok(ProposeOutcome::Suppressed) => report.suppressed += 1,
                    Err(MemoryError::InboxFull) => {
                        report.stopped = Some(MemoryError::InboxFull.to_string());
                        break;
                    }
                    Err(MemoryError::BadNote(why)) => report.skipped.push((origin.clone(), why)),
                    Err(e) => return Err(e),
                }
            }
            if report.stopped.is_some() {
                // Not tracked: the next import reads the file again.
                break;
            }
            manifest.insert(origin, Origin { sha, ids });
        }
        let text = serde_json::to_string_pretty(&manifest)
            .map_err(|e| MemoryError::Io(format!("import manifest: {e}")))?;
        let lock = files.lock()?;
        files.write(&files.root, MANIFEST, &text)?;
        drop(lock);
        if accept.is_some() && report.added > 0 {
            self.embed_memory_quietly();
        }
        Ok(report)
    }

    /// Removes the waiting proposals among `ids`; returns how many.
    fn drop_proposals(&self, files: &Files, ids: &[String]) -> Result<usize, MemoryError> {
        let _lock = files.lock()?;
        let inbox = self.read_inbox(files)?;
        let mut n = 0;
        for id in ids {
            if let Some((name, _)) = inbox.get(id)
                && std::fs::remove_file(files.inbox().join(name)).is_ok()
            {
                n += 1;
            }
        }
        Ok(n)
    }
}
