//! Files and documents under the shared folders (`[files] roots`): walk and index them, find
//! files, a document's info, windows of its text, search inside one or across all. Paths cross
//! as text; the core guards them as it does for the agent's tools.

use std::path::Path;

use steward_core::files::FileQuery;

use crate::{FfiError, Steward};

/// A file found.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct FoundFileRecord {
    /// Its path.
    pub path: String,
    /// The shared folder it lies under.
    pub root: String,
    /// Bytes.
    pub size: u64,
    /// Last modified (Unix seconds).
    pub modified: i64,
}

/// One page of files, newest first.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct FilePageRecord {
    /// The files.
    pub files: Vec<FoundFileRecord>,
    /// How many match in all.
    pub total: u64,
    /// The next page's cursor.
    pub next_cursor: Option<String>,
}

/// What indexing the shared folders did.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct FilesIndexRecord {
    /// Files listed.
    pub files: u64,
    /// Documents among them.
    pub documents: u64,
    /// Documents read and indexed now.
    pub indexed: u64,
    /// Documents unchanged (skipped).
    pub unchanged: u64,
    /// Documents gone.
    pub removed: u64,
    /// Documents without text (a code each in `failed`).
    pub failed: Vec<String>,
    /// Passages in the index.
    pub chunks: u64,
}

/// What a document is.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct DocInfoRecord {
    /// Its path.
    pub path: String,
    /// Its kind (`pdf`, `docx`…).
    pub kind: String,
    /// What a reader moves through (`page`, `slide`, `sheet`, `part`).
    pub unit: String,
    /// How many.
    pub units: u64,
    /// Bytes.
    pub size: u64,
    /// Its title.
    pub title: Option<String>,
    /// SHA-256 of its bytes.
    pub fingerprint: String,
    /// Characters of text.
    pub chars: u64,
    /// Whether it has text.
    pub has_text: bool,
}

/// A window of a document's text.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct DocWindowRecord {
    /// The text, with page markers.
    pub text: String,
    /// The first and last unit it covers (from 1).
    pub first_unit: u64,
    /// The last.
    pub last_unit: u64,
    /// Where the next window starts.
    pub next_cursor: Option<String>,
}

/// A passage found.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct DocHitRecord {
    /// The document.
    pub path: String,
    /// Its page, slide, sheet or part (from 1).
    pub unit: u64,
    /// Score (higher is better).
    pub score: f32,
    /// Words around the match.
    pub snippet: String,
    /// Reads on from the passage.
    pub cursor: String,
}

fn info(i: steward_core::docs::DocInfo) -> DocInfoRecord {
    DocInfoRecord {
        path: i.path.to_string_lossy().into_owned(),
        kind: i.kind.as_str().to_owned(),
        unit: i.unit.as_str().to_owned(),
        units: i.units as u64,
        size: i.size,
        title: i.title,
        fingerprint: i.fingerprint,
        chars: i.chars as u64,
        has_text: i.has_text,
    }
}

#[uniffi::export]
impl Steward {
    /// Walks the shared folders into `files.db`, then indexes the documents' text.
    pub fn index_files(&self) -> Result<FilesIndexRecord, FfiError> {
        let r = self
            .inner()
            .index_shared_folders(None, &mut |_| {})
            .map_err(|e| FfiError::from_core(&e))?;
        let (f, d) = (r.files, r.documents.unwrap_or_default());
        Ok(FilesIndexRecord {
            files: f.files as u64,
            documents: d.documents as u64,
            indexed: d.indexed as u64,
            unchanged: d.unchanged as u64,
            removed: d.removed as u64,
            failed: d.failed.iter().map(|(p, c)| format!("{}: {c}", p.display())).collect(),
            chunks: d.chunks as u64,
        })
    }

    /// Files whose name holds `name`'s words (and extension `ext`), newest first.
    pub fn find_files(
        &self,
        name: Option<String>,
        ext: Option<String>,
        limit: u32,
        cursor: Option<String>,
    ) -> Result<FilePageRecord, FfiError> {
        let q = FileQuery {
            name,
            extension: ext,
            limit: Some(limit as usize),
            cursor,
            ..FileQuery::default()
        };
        let p = self.inner().find_files(&q).map_err(|e| FfiError::from_core(&e))?;
        Ok(FilePageRecord {
            files: p
                .files
                .into_iter()
                .map(|f| FoundFileRecord {
                    path: f.path.to_string_lossy().into_owned(),
                    root: f.root.to_string_lossy().into_owned(),
                    size: f.size,
                    modified: f.modified,
                })
                .collect(),
            total: p.total as u64,
            next_cursor: p.next_cursor,
        })
    }

    /// What the document at `path` is.
    pub fn doc_info(&self, path: String) -> Result<DocInfoRecord, FfiError> {
        self.inner().doc_info(Path::new(&path)).map(info).map_err(|e| FfiError::from_core(&e))
    }

    /// A window of at most `chars` characters of the document at `path`, from `cursor`, else
    /// `page` (from 1), else its start.
    pub fn read_doc(
        &self,
        path: String,
        cursor: Option<String>,
        page: Option<u32>,
        chars: Option<u32>,
    ) -> Result<DocWindowRecord, FfiError> {
        let w = self
            .inner()
            .read_doc(
                Path::new(&path),
                cursor.as_deref(),
                page.map(|p| p as usize),
                chars.map(|c| c as usize),
            )
            .map_err(|e| FfiError::from_core(&e))?;
        Ok(DocWindowRecord {
            text: w.text,
            first_unit: w.first_unit as u64,
            last_unit: w.last_unit as u64,
            next_cursor: w.next_cursor,
        })
    }

    /// The passages of the document at `path` (else of every indexed document) holding the
    /// words of `query`, best first.
    pub fn search_docs(
        &self,
        query: String,
        path: Option<String>,
        limit: u32,
    ) -> Result<Vec<DocHitRecord>, FfiError> {
        let s = self.inner();
        let limit = Some(limit as usize);
        match path {
            Some(p) => {
                let h = s
                    .search_doc(Path::new(&p), &query, limit)
                    .map_err(|e| FfiError::from_core(&e))?;
                let doc = h.info.path.to_string_lossy().into_owned();
                Ok(h.hits
                    .into_iter()
                    .map(|x| DocHitRecord {
                        path: doc.clone(),
                        unit: x.unit as u64,
                        score: x.score,
                        snippet: x.snippet,
                        cursor: x.cursor,
                    })
                    .collect())
            }
            None => {
                let h = s.search_docs(&query, limit).map_err(|e| FfiError::from_core(&e))?;
                Ok(h.hits
                    .into_iter()
                    .map(|x| DocHitRecord {
                        path: x.path.to_string_lossy().into_owned(),
                        unit: x.unit as u64,
                        score: x.score,
                        snippet: x.snippet,
                        cursor: x.cursor,
                    })
                    .collect())
            }
        }
    }
}
