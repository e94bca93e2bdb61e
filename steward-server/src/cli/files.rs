//! `steward index files` and `steward files find`: the paths under the folders shared with
//! Steward (`[files] roots`), walked into `files.db`, then found. `steward files info|read|search`:
//! a document's text (see `steward_core::docs`).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use steward_core::files::{DEFAULT_FIND_RESULTS, FileQuery, MAX_FIND_RESULTS};

use super::{Failure, json_line, open, usage};

#[derive(Debug, Subcommand)]
pub(super) enum FilesCmd {
    /// The files under the shared folders that fit every condition given, newest first.
    Find(FindArgs),
    /// What a document is: type, pages, size, title, fingerprint, whether it has text.
    Info {
        /// The document (absolute, or relative to a shared folder).
        path: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// A window of a document's text; `--cursor` reads on where the last one stopped.
    Read {
        /// The document (absolute, or relative to a shared folder).
        path: PathBuf,
        /// Where the last window stopped.
        #[arg(long, conflicts_with = "page")]
        cursor: Option<String>,
        /// The page (slide, sheet) to start at, from 1.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        page: Option<u32>,
        /// Characters to read.
        #[arg(long, default_value_t = steward_core::docs::DEFAULT_READ_CHARS as u32,
              value_parser = clap::value_parser!(u32).range(
                  steward_core::docs::MIN_READ_CHARS as i64..=steward_core::docs::MAX_READ_CHARS as i64))]
        chars: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The passages of a document that hold the words, best first.
    Search {
        /// The words.
        text: String,
        /// Only this document (absolute, or relative to a shared folder); without it, every
        /// indexed document (`steward index files` indexes them).
        #[arg(long)]
        path: Option<PathBuf>,
        /// How many passages.
        #[arg(long, default_value_t = steward_core::docs::DEFAULT_DOC_HITS as u16,
              value_parser = clap::value_parser!(u16).range(1..=steward_core::docs::index::MAX_ALL_HITS as i64))]
        limit: u16,
        /// Print JSON lines: one per passage.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub(super) struct FindArgs {
    /// Words the file name holds (case and width ignored).
    #[arg(long)]
    name: Option<String>,
    /// A glob on the path below its root (`*`, `?`, `**`); without `/`, on the name.
    #[arg(long)]
    glob: Option<String>,
    /// The extension (pdf, docx…).
    #[arg(long = "ext")]
    extension: Option<String>,
    /// Only under this shared folder.
    #[arg(long)]
    root: Option<PathBuf>,
    /// Modified on or after (YYYY-MM-DD or RFC 3339).
    #[arg(long)]
    after: Option<String>,
    /// Modified before (YYYY-MM-DD or RFC 3339).
    #[arg(long)]
    before: Option<String>,
    /// At least this many bytes.
    #[arg(long)]
    min_size: Option<u64>,
    /// At most this many bytes.
    #[arg(long)]
    max_size: Option<u64>,
    /// How many.
    #[arg(long, default_value_t = DEFAULT_FIND_RESULTS as u16,
          value_parser = clap::value_parser!(u16).range(1..=MAX_FIND_RESULTS as i64))]
    limit: u16,
    /// Where the last page stopped.
    #[arg(long)]
    cursor: Option<String>,
    /// Print JSON lines: one per file, then the page's `next_cursor` and `total`.
    #[arg(long)]
    json: bool,
}

pub(super) fn index_files(home: Option<PathBuf>, json: bool) -> Result<(), Failure> {
    let steward = open(home)?;
    // The walk, then the documents' passages, with a bar on a terminal.
    let bar = super::progress_bar();
    let report = steward
        .index_shared_folders(None, &mut |p| {
            bar.set_length(p.total as u64);
            bar.set_position(p.done as u64);
        })
        .map_err(Failure::from)?;
    bar.finish_and_clear();
    let r = &report.files;
    if json {
        json_line(&report);
        return Ok(());
    }
    out!(
        "{} files under {} folder(s): {} new, {} changed, {} gone{}",
        r.files,
        r.roots,
        r.added,
        r.changed,
        r.removed,
        if r.truncated { " (stopped at the bound: nothing removed)" } else { "" }
    );
    for u in &r.unreadable {
        eprintln!("unreadable: {u}");
    }
    if let Some(d) = &report.documents {
        out!(
            "{} documents: {} indexed, {} unchanged, {} gone, {} without text; {} passages",
            d.documents,
            d.indexed,
            d.unchanged,
            d.removed,
            d.failed_total,
            d.chunks
        );
        if let Some(v) = &d.vectors {
            out!(
                "passage vectors: {} added, {} waiting for the next run{}",
                v.embedded,
                v.pending,
                if v.failed { " (the embedder failed: words-only search until then)" } else { "" }
            );
        }
    }
    Ok(())
}

pub(super) fn files(home: Option<PathBuf>, cmd: FilesCmd) -> Result<(), Failure> {
    let a = match cmd {
        FilesCmd::Find(a) => a,
        FilesCmd::Info { path, json } => {
            let d = open(home)?.doc_info(&path).map_err(Failure::from)?;
            if json {
                json_line(&d);
            } else {
                out!("{}", d.path.display());
                out!("  kind: {} ({} {}s)", d.kind.as_str(), d.units, d.unit.as_str());
                if let Some(t) = &d.title {
                    out!("  title: {t}");
                }
                out!(
                    "  size: {} bytes; {} characters of text{}",
                    d.size,
                    d.chars,
                    if d.truncated { " (cut at a bound)" } else { "" }
                );
                if !d.has_text {
                    out!("  no text (a scan needs OCR)");
                }
                out!("  sha256: {}", d.fingerprint);
            }
            return Ok(());
        }
        FilesCmd::Read { path, cursor, page, chars, json } => {
            let w = open(home)?
                .read_doc(&path, cursor.as_deref(), page.map(|p| p as usize), Some(chars as usize))
                .map_err(Failure::from)?;
            if json {
                json_line(&w);
            } else {
                out!("{}", w.text);
                match &w.next_cursor {
                    Some(c) => out!("\n(more: --cursor {c})"),
                    None => out!("\n(end)"),
                }
            }
            return Ok(());
        }
        FilesCmd::Search { text, path: None, limit, json } => {
            let h =
                open(home)?.search_docs(&text, Some(usize::from(limit))).map_err(Failure::from)?;
            for x in &h.hits {
                if json {
                    json_line(x);
                } else {
                    out!(
                        "{} ({} {})  {}\n    (--cursor {})",
                        x.path.display(),
                        x.unit_kind,
                        x.unit,
                        x.snippet,
                        x.cursor
                    );
                }
            }
            if !json && h.hits.is_empty() {
                out!("no passage of the indexed documents holds those words");
            }
            return Ok(());
        }
        FilesCmd::Search { text, path: Some(path), limit, json } => {
            let h = open(home)?
                .search_doc(&path, &text, Some(usize::from(limit)))
                .map_err(Failure::from)?;
            for x in &h.hits {
                if json {
                    json_line(x);
                } else {
                    out!(
                        "{} {}  {}\n    (--cursor {})",
                        h.info.unit.as_str(),
                        x.unit,
                        x.snippet,
                        x.cursor
                    );
                }
            }
            if !json && h.hits.is_empty() {
                out!("no passage holds those words");
            }
            return Ok(());
        }
    };
    let date = |what: &str, t: &Option<String>| {
        t.as_deref()
            .map(|t| {
                steward_core::time::parse_date(t).map_err(|e| usage(format!("--{what} {t:?}: {e}")))
            })
            .transpose()
    };
    let q = FileQuery {
        name: a.name,
        glob: a.glob,
        extension: a.extension,
        modified_after: date("after", &a.after)?,
        modified_before: date("before", &a.before)?,
        min_size: a.min_size,
        max_size: a.max_size,
        root: a.root,
        cursor: a.cursor,
        limit: Some(usize::from(a.limit)),
    };
    let steward = open(home)?;
    let page = steward.find_files(&q).map_err(Failure::from)?;
    for f in &page.files {
        if a.json {
            json_line(f);
        } else {
            let when = steward_core::time::CivilTime::from_unix(f.modified).rfc3339();
            out!("{when}  {:>10}  {}", f.size, f.path.display());
        }
    }
    if a.json {
        json_line(&serde_json::json!({ "total": page.total, "next_cursor": page.next_cursor }));
    } else if let Some(c) = &page.next_cursor {
        out!("({} in all; more: --cursor {c})", page.total);
    } else if page.files.is_empty() {
        out!("no file fits");
    }
    Ok(())
}
