//! `steward index files` and `steward files find`: the paths under the folders shared with
//! Steward (`[files] roots`), walked into `files.db`, then found.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use steward_core::files::{DEFAULT_FIND_RESULTS, FileQuery, MAX_FIND_RESULTS};

use super::{Failure, json_line, open, usage};

#[derive(Debug, Subcommand)]
pub(super) enum FilesCmd {
    /// The files under the shared folders that fit every condition given, newest first.
    Find(FindArgs),
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
    let r = steward.index_files().map_err(Failure::from)?;
    if json {
        json_line(&r);
    } else {
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
    }
    Ok(())
}

pub(super) fn files(home: Option<PathBuf>, cmd: FilesCmd) -> Result<(), Failure> {
    let FilesCmd::Find(a) = cmd;
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
