//! `files.find`: the files under the folders the person shares (`[files] roots`), found in
//! `files.db`, newest first. File names are data (a download can be named anything).

use std::sync::Arc;

use serde_json::json;

use super::{ExecError, SourceRef, ToolExecutor, ToolOutput, ToolRun, Typed, cursor, fitting};
use crate::{files::FileQuery, policy::catalog::FilesFindInput};

pub(super) fn tools() -> Vec<(&'static str, Arc<dyn ToolExecutor>)> {
    vec![(
        "files.find",
        Arc::new(Typed::new(
            |_: &FilesFindInput| "Find files in the shared folders".to_owned(),
            find,
        )),
    )]
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1024 * 1024 => format!("{} KB", b / 1024),
        b => format!("{:.1} MB", b as f64 / (1024.0 * 1024.0)),
    }
}

fn find(run: &ToolRun<'_>, i: FilesFindInput) -> Result<ToolOutput, ExecError> {
    let date = |what: &str, d: &Option<String>| {
        d.as_deref()
            .map(|t| {
                crate::time::parse_date(t)
                    .map_err(|e| ExecError::invalid(format!("{what} {t:?}: {e}")))
            })
            .transpose()
    };
    let offset = cursor(i.cursor.as_deref())?;
    let q = FileQuery {
        name: i.name.clone(),
        glob: i.glob.clone(),
        extension: i.extension.clone(),
        modified_after: date("modified_after", &i.modified_after)?,
        modified_before: date("modified_before", &i.modified_before)?,
        min_size: i.min_size,
        max_size: i.max_size,
        root: i.root.as_ref().map(std::path::PathBuf::from),
        cursor: (offset > 0).then(|| offset.to_string()),
        limit: Some(i.limit.map_or(crate::files::DEFAULT_FIND_RESULTS, |l| l as usize)),
    };
    let page = run.steward.find_files(&q)?;
    if page.files.is_empty() {
        return Ok(ToolOutput {
            text: if offset == 0 {
                "No file fits.".to_owned()
            } else {
                "No more files.".to_owned()
            },
            data: json!({ "paths": [], "total": page.total }),
            ..ToolOutput::default()
        });
    }
    let header = format!(
        "Files {}-{} of {}, newest first:",
        offset + 1,
        offset + page.files.len(),
        page.total
    );
    let lines: Vec<String> = page
        .files
        .iter()
        .map(|f| {
            let when = crate::time::CivilTime::from_unix(f.modified).rfc3339();
            format!("- {}  {}  {}", &when[..10.min(when.len())], size(f.size), f.path.display())
        })
        .collect();
    // Room for the continuation line.
    let keep = fitting(&lines, header.chars().count() + 40, run.budget_chars);
    let next = offset + keep;
    let more =
        if next < page.total { format!("\n(more: cursor \"{next}\")") } else { String::new() };
    let kept = &page.files[..keep];
    Ok(ToolOutput {
        text: format!("{header}\n{}{more}", lines[..keep].join("\n")),
        data: json!({
            "paths": kept.iter().map(|f| f.path.to_string_lossy()).collect::<Vec<_>>(),
            "total": page.total,
            "next_cursor": (next < page.total).then(|| next.to_string()),
        }),
        sources: kept
            .iter()
            .map(|f| SourceRef::File { path: f.path.to_string_lossy().into_owned() })
            .collect(),
        ..ToolOutput::default()
    })
}
