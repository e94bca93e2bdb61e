//! `files.find`: the files under the folders the person shares (`[files] roots`), found in
//! `files.db`, newest first. `docs.info`, `docs.read`, `docs.search`: a document's text, read
//! in windows or searched (see [`crate::docs`]). File names and documents' text are data (a
//! download can be named anything and say anything).

use std::sync::Arc;

use serde_json::json;

use super::{ExecError, SourceRef, ToolExecutor, ToolOutput, ToolRun, Typed, cursor, fitting};
use crate::{
    files::FileQuery,
    policy::catalog::{
        DocsInfoInput, DocsReadInput, DocsSearchAllInput, DocsSearchInput, FilesFindInput,
        FilesSaveAttachmentInput,
    },
};

pub(super) fn tools() -> Vec<(&'static str, Arc<dyn ToolExecutor>)> {
    vec![
        (
            "files.find",
            Arc::new(Typed::new(
                |_: &FilesFindInput| "Find files in the shared folders".to_owned(),
                find,
            )),
        ),
        (
            "files.save_attachment",
            Arc::new(
                Typed::new(
                    |i: &FilesSaveAttachmentInput| {
                        format!(
                            "Save attachment {} of message {} as {} in {} ({}, sha256 {})",
                            i.position,
                            i.message_id,
                            i.name.as_deref().unwrap_or("?"),
                            i.folder.as_deref().unwrap_or("?"),
                            i.size.map_or_else(|| "?".to_owned(), size),
                            i.sha256
                                .as_deref()
                                .map_or_else(|| "?".to_owned(), |h| h.chars().take(16).collect())
                        )
                    },
                    save_attachment,
                )
                .check(plan_save),
            ),
        ),
        (
            "docs.info",
            Arc::new(Typed::new(|i: &DocsInfoInput| format!("Look at {}", i.path), info)),
        ),
        ("docs.read", Arc::new(Typed::new(|i: &DocsReadInput| format!("Read {}", i.path), read))),
        (
            "docs.search_all",
            Arc::new(Typed::new(
                |i: &DocsSearchAllInput| format!("Search the documents for {:?}", i.query),
                search_all,
            )),
        ),
        (
            "docs.search",
            Arc::new(Typed::new(
                |i: &DocsSearchInput| format!("Search {} for {:?}", i.path, i.query),
                search,
            )),
        ),
    ]
}

fn doc_line(i: &crate::docs::DocInfo) -> String {
    let units = match i.unit {
        crate::docs::UnitKind::Part => String::new(),
        u => format!(", {} {}{}", i.units, u.as_str(), if i.units == 1 { "" } else { "s" }),
    };
    let title = i.title.as_deref().map(|t| format!(" \"{t}\"")).unwrap_or_default();
    format!(
        "{}{title}: {}{units}, {}, {} characters of text{}",
        i.path.display(),
        i.kind.as_str(),
        size(i.size),
        i.chars,
        if i.truncated { " (cut at a bound)" } else { "" }
    )
}

fn info(run: &ToolRun<'_>, i: DocsInfoInput) -> Result<ToolOutput, ExecError> {
    let d = run.steward.doc_info(std::path::Path::new(&i.path))?;
    let text = if d.has_text {
        doc_line(&d)
    } else {
        format!("{} (it has no text: a scan needs OCR)", doc_line(&d))
    };
    Ok(ToolOutput {
        text,
        data: serde_json::to_value(&d).unwrap_or_default(),
        sources: vec![SourceRef::File { path: d.path.to_string_lossy().into_owned() }],
        ..ToolOutput::default()
    })
}

fn read(run: &ToolRun<'_>, i: DocsReadInput) -> Result<ToolOutput, ExecError> {
    // The window fits the tool's result budget, with room for the lines around it (the
    // header names the path and a title of at most 300 characters).
    let header = i.path.chars().count() + crate::docs::MAX_TITLE_CHARS + 200;
    let room = run.budget_chars.saturating_sub(header).max(crate::docs::MIN_READ_CHARS);
    let chars = i.chars.map_or(crate::docs::DEFAULT_READ_CHARS, |c| c as usize).min(room);
    let w = run.steward.read_doc(
        std::path::Path::new(&i.path),
        i.cursor.as_deref(),
        i.page.map(|p| p as usize),
        Some(chars),
    )?;
    let more = match &w.next_cursor {
        Some(c) => format!("\n(more: cursor \"{c}\")"),
        None => "\n(end of the document)".to_owned(),
    };
    Ok(ToolOutput {
        text: format!("{}\n\n{}{more}", doc_line(&w.info), w.text),
        data: json!({
            "path": w.info.path,
            "fingerprint": w.info.fingerprint,
            "first_unit": w.first_unit,
            "last_unit": w.last_unit,
            "next_cursor": w.next_cursor,
        }),
        sources: vec![SourceRef::File { path: w.info.path.to_string_lossy().into_owned() }],
        ..ToolOutput::default()
    })
}

fn search(run: &ToolRun<'_>, i: DocsSearchInput) -> Result<ToolOutput, ExecError> {
    let h = run.steward.search_doc(
        std::path::Path::new(&i.path),
        &i.query,
        i.limit.map(|l| l as usize),
    )?;
    let how = semantic_line(&h.semantic, h.chunks);
    if h.hits.is_empty() {
        return Ok(ToolOutput {
            text: format!("No passage of {} matches ({how}).", h.info.path.display()),
            data: json!({ "hits": [], "chunks": h.chunks, "semantic": h.semantic }),
            ..ToolOutput::default()
        });
    }
    let unit = h.info.unit.as_str();
    let lines: Vec<String> = h
        .hits
        .iter()
        .map(|x| format!("- {unit} {}: {} (cursor \"{}\")", x.unit, x.snippet, x.cursor))
        .collect();
    let header = format!(
        "The best {} passages of {} ({} hold words of the question; {how}):",
        h.hits.len(),
        h.info.path.display(),
        h.matched,
    );
    let keep = fitting(&lines, header.chars().count(), run.budget_chars);
    Ok(ToolOutput {
        text: format!("{header}\n{}", lines[..keep].join("\n")),
        data: json!({
            "hits": &h.hits[..keep],
            "matched": h.matched,
            "chunks": h.chunks,
            "semantic": h.semantic,
        }),
        sources: vec![SourceRef::File { path: h.info.path.to_string_lossy().into_owned() }],
        ..ToolOutput::default()
    })
}

/// How the meaning side of a document search went, in words.
fn semantic_line(r: &crate::docs::SemanticReport, chunks: usize) -> String {
    use crate::docs::SemanticStatus as S;
    match r.status {
        S::Disabled => "by words only: no embedder is configured".to_owned(),
        S::Unavailable => "by words only: the embedder failed".to_owned(),
        S::Full => "by words and meaning".to_owned(),
        S::Sampled => format!(
            "by words over all {chunks} passages, by meaning over a sample of {}",
            r.embedded
        ),
        S::Partial => format!(
            "by words, and by meaning over {} of {} passages (the rest later)",
            r.embedded, r.selected
        ),
    }
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

fn search_all(run: &ToolRun<'_>, i: DocsSearchAllInput) -> Result<ToolOutput, ExecError> {
    let h = run.steward.search_docs(&i.query, i.limit.map(|l| l as usize))?;
    let how = match h.semantic.status {
        crate::docs::SemanticStatus::Partial => format!(
            "by words, and by meaning over the {} of {} passages with a vector so far",
            h.semantic.embedded, h.semantic.selected
        ),
        crate::docs::SemanticStatus::Unavailable => {
            "by words only: no passage vectors, or the embedder failed".to_owned()
        }
        _ => semantic_line(&h.semantic, h.semantic.selected),
    };
    if h.hits.is_empty() {
        return Ok(ToolOutput {
            text: format!("No passage of the indexed documents matches ({how})."),
            data: json!({ "hits": [], "semantic": h.semantic }),
            ..ToolOutput::default()
        });
    }
    let lines: Vec<String> = h
        .hits
        .iter()
        .map(|x| {
            format!(
                "- {} ({} {}): {} (cursor \"{}\")",
                x.path.display(),
                x.unit_kind,
                x.unit,
                x.snippet,
                x.cursor
            )
        })
        .collect();
    let header = format!(
        "The best {} passages ({} hold words of the question; {how}):",
        h.hits.len(),
        h.matched
    );
    let keep = fitting(&lines, header.chars().count(), run.budget_chars);
    Ok(ToolOutput {
        text: format!("{header}\n{}", lines[..keep].join("\n")),
        data: json!({ "hits": &h.hits[..keep], "matched": h.matched, "semantic": h.semantic }),
        sources: h.hits[..keep]
            .iter()
            .map(|x| SourceRef::File { path: x.path.to_string_lossy().into_owned() })
            .collect(),
        ..ToolOutput::default()
    })
}

/// Fills the folder, the name, the size and the hash the person approves.
fn plan_save(
    steward: &crate::Steward,
    mut i: FilesSaveAttachmentInput,
) -> Result<FilesSaveAttachmentInput, String> {
    use crate::StewardError as _;
    let p = steward
        .plan_attachment_save(
            i.message_id,
            i.position,
            i.folder.as_deref().map(std::path::Path::new),
            i.name.as_deref(),
        )
        .map_err(|e| format!("{}: {e}", e.code()))?;
    i.folder = Some(p.folder.to_string_lossy().into_owned());
    i.name = Some(p.name);
    i.sha256 = Some(p.sha256);
    i.size = Some(p.size);
    Ok(i)
}

fn save_attachment(
    run: &ToolRun<'_>,
    i: FilesSaveAttachmentInput,
) -> Result<ToolOutput, ExecError> {
    let (Some(folder), Some(name), Some(sha256), Some(bytes)) =
        (i.folder, i.name, i.sha256, i.size)
    else {
        return Err(ExecError::invalid("the approved call names no folder, name, size or hash"));
    };
    let plan = crate::files::SavePlan {
        message_id: i.message_id,
        position: i.position,
        folder: std::path::PathBuf::from(folder),
        name,
        sha256,
        size: bytes,
        mime_type: String::new(),
    };
    let saved = run.steward.save_attachment(&plan)?;
    let path = saved.path.display();
    let text = match (saved.outcome, saved.renamed) {
        (crate::files::SaveOutcome::AlreadyThere, _) => {
            format!("{path} already holds these bytes: nothing was written.")
        }
        (crate::files::SaveOutcome::Written, false) => {
            format!("Saved {} as {path}.", size(saved.size))
        }
        (crate::files::SaveOutcome::Written, true) => format!(
            "{} holds other bytes: saved {} as {path} instead.",
            plan.folder.join(&plan.name).display(),
            size(saved.size)
        ),
    };
    Ok(ToolOutput {
        text,
        data: serde_json::to_value(&saved).unwrap_or_default(),
        sources: vec![
            SourceRef::Attachment {
                message_id: plan.message_id,
                position: plan.position,
                name: Some(plan.name),
            },
            SourceRef::File { path: saved.path.to_string_lossy().into_owned() },
        ],
        ..ToolOutput::default()
    })
}
