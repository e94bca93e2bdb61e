//! Word and PowerPoint (Office Open XML): the text of the body's paragraphs and tables, and of
//! footnotes, endnotes and comments after it (DOCX); each slide's shapes and tables, its
//! SmartArt text and its speaker notes, in presentation order (PPTX). Running headers and
//! footers are left out, as deleted tracked changes are (inserted ones are text). Of an
//! `mc:AlternateContent`, only the first choice is read (the fallback repeats it).

use std::collections::HashMap;

use steward_core::docs::{DocKind, ExtractError, ExtractLimits, Extracted, MAX_TITLE_CHARS, Unit};

use super::{
    archive::Archive,
    xml::{Flow, Node, Sink, attr, walk},
};

/// The text of one OOXML part, into `sink`: `t` elements are text, paragraphs end lines,
/// table cells end with a tab and rows with a line.
fn part_text(bytes: &[u8], kind: &str, sink: &mut Sink) -> Result<(), ExtractError> {
    let mut in_text = 0usize;
    // Depth inside a subtree that is skipped (a fallback, deleted text).
    let mut skip = 0usize;
    walk(bytes, kind, |n| {
        let ok = match n {
            Node::Start { name, empty, .. } => {
                // Every start, empty or not, is matched by an end (the walker sends one).
                if skip > 0 {
                    skip += 1;
                    return Flow::Go;
                }
                match name {
                    "Fallback" | "del" | "instrText" | "delText" if !empty => {
                        skip = 1;
                        true
                    }
                    "t" if !empty => {
                        in_text += 1;
                        true
                    }
                    "tab" => sink.push("\t"),
                    "br" | "cr" => sink.push("\n"),
                    _ => true,
                }
            }
            Node::End { name } => {
                if skip > 0 {
                    skip -= 1;
                    return Flow::Go;
                }
                match name {
                    "t" => {
                        in_text = in_text.saturating_sub(1);
                        true
                    }
                    "p" | "tr" => sink.push("\n"),
                    "tc" => sink.push("\t"),
                    _ => true,
                }
            }
            Node::Text(t) if in_text > 0 && skip == 0 => sink.push(t),
            Node::Text(_) => true,
        };
        if ok { Flow::Go } else { Flow::Stop }
    })
}

/// The `dc:title` of `docProps/core.xml` (or ODF's `meta.xml`), if any.
pub(crate) fn core_title(zip: &mut Archive<'_>, part: &str, kind: &str) -> Option<String> {
    let bytes = zip.read(part).ok()??;
    let mut inside = false;
    let mut title = String::new();
    walk(&bytes, kind, |n| {
        match n {
            Node::Start { name: "title", empty: false, .. } => inside = true,
            Node::End { name: "title" } => return Flow::Stop,
            Node::Text(t) if inside => {
                title.extend(t.chars().take(MAX_TITLE_CHARS.saturating_sub(title.chars().count())));
            }
            _ => {}
        }
        Flow::Go
    })
    .ok()?;
    let t = title.trim();
    (!t.is_empty()).then(|| t.to_owned())
}

/// A Word document.
pub(crate) fn docx(bytes: &[u8], limits: &ExtractLimits) -> Result<Extracted, ExtractError> {
    let mut zip = Archive::open(bytes, "docx", limits)?;
    let body = zip
        .read("word/document.xml")?
        .ok_or_else(|| ExtractError::damaged("docx", "no word/document.xml"))?;
    let mut sink = Sink::new(limits.max_chars);
    part_text(&body, "docx", &mut sink)?;
    for extra in ["word/footnotes.xml", "word/endnotes.xml", "word/comments.xml"] {
        if let Some(b) = zip.read(extra)? {
            sink.push("\n\n");
            part_text(&b, "docx", &mut sink)?;
        }
    }
    Ok(Extracted {
        kind: DocKind::Docx,
        title: core_title(&mut zip, "docProps/core.xml", "docx"),
        units: vec![Unit { name: None, text: sink.take() }],
        truncated: sink.truncated,
    })
}

/// The relationships of `part` (`Id` → target path inside the package, and `Type`).
fn rels(zip: &mut Archive<'_>, part: &str) -> Result<Vec<(String, String, String)>, ExtractError> {
    let (dir, file) = part.rsplit_once('/').unwrap_or(("", part));
    let path = format!("{dir}/_rels/{file}.rels");
    let Some(bytes) = zip.read(&path)? else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    walk(&bytes, "pptx", |n| {
        if let Node::Start { name: "Relationship", el, .. } = n
            && let (Some(id), Some(target)) = (attr(el, "Id"), attr(el, "Target"))
            && attr(el, "TargetMode").as_deref() != Some("External")
            && out.len() < 100_000
        {
            out.push((id, join(dir, &target), attr(el, "Type").unwrap_or_default()));
        }
        Flow::Go
    })?;
    Ok(out)
}

/// `target` (relative to the folder `dir`, or absolute in the package) as a package path.
fn join(dir: &str, target: &str) -> String {
    let mut parts: Vec<&str> =
        if target.starts_with('/') { Vec::new() } else { dir.split('/').collect() };
    for seg in target.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    parts.retain(|p| !p.is_empty());
    parts.join("/")
}

/// A PowerPoint presentation.
pub(crate) fn pptx(bytes: &[u8], limits: &ExtractLimits) -> Result<Extracted, ExtractError> {
    let mut zip = Archive::open(bytes, "pptx", limits)?;
    let pres = zip
        .read("ppt/presentation.xml")?
        .ok_or_else(|| ExtractError::damaged("pptx", "no ppt/presentation.xml"))?;
    let by_id: HashMap<String, String> =
        rels(&mut zip, "ppt/presentation.xml")?.into_iter().map(|(id, t, _)| (id, t)).collect();
    let mut order = Vec::new();
    walk(&pres, "pptx", |n| {
        if let Node::Start { name: "sldId", el, .. } = n {
            // The relationship id (`r:id`), not the slide's number (`id`).
            let rid = el
                .attributes()
                .with_checks(false)
                .flatten()
                .find(|a| a.key.as_ref().ends_with(":id"))
                .and_then(|a| {
                    a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .ok()
                        .map(std::borrow::Cow::into_owned)
                });
            if let Some(t) = rid.and_then(|r| by_id.get(&r)) {
                order.push(t.clone());
            }
        }
        Flow::Go
    })?;
    let mut sink = Sink::new(limits.max_chars);
    let mut units = Vec::new();
    // Each slide and each part once: a list may name one slide a thousand times.
    let mut seen_slides = std::collections::HashSet::new();
    let mut seen_parts = std::collections::HashSet::new();
    order.retain(|s| seen_slides.insert(s.clone()));
    for slide in order.into_iter().take(limits.max_units) {
        let Some(b) = zip.read(&slide)? else { continue };
        part_text(&b, "pptx", &mut sink)?;
        for (_, target, ty) in rels(&mut zip, &slide)? {
            if !seen_parts.insert(target.clone()) {
                continue;
            }
            if ty.ends_with("/diagramData") {
                if let Some(d) = zip.read(&target)? {
                    sink.push("\n");
                    part_text(&d, "pptx", &mut sink)?;
                }
            } else if ty.ends_with("/notesSlide")
                && let Some(notes) = zip.read(&target)?
            {
                let mut n = Sink::new(sink.left());
                part_text(&notes, "pptx", &mut n)?;
                let text = n.take();
                if !text.trim().is_empty() {
                    sink.push("\n--- notes ---\n");
                    sink.push(&text);
                }
            }
        }
        units.push(Unit { name: None, text: sink.take() });
        if sink.truncated {
            break;
        }
    }
    Ok(Extracted {
        kind: DocKind::Pptx,
        title: core_title(&mut zip, "docProps/core.xml", "pptx"),
        units,
        truncated: sink.truncated,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn package_paths_join() {
        assert_eq!(
            super::join("ppt/slides", "../notesSlides/notesSlide1.xml"),
            "ppt/notesSlides/notesSlide1.xml"
        );
        assert_eq!(super::join("ppt", "slides/slide1.xml"), "ppt/slides/slide1.xml");
        assert_eq!(super::join("ppt/slides", "/ppt/x.xml"), "ppt/x.xml");
    }
}
