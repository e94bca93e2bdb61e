//! PDF text layers through `pdf-extract` (on `lopdf`), page by page. `pdf-extract` panics on
//! some files by design; the caller runs every extraction on a worker that contains panics
//! ([`steward_core::docs::extract_bounded`]). Images are never decoded. A PDF whose pages hold
//! no text is returned as such (the reader then says `no_text`).

use steward_core::docs::{DocKind, ExtractError, ExtractLimits, Extracted, Unit};

/// Deepest nesting of form XObjects (a form that draws a form…) read.
/// Fixed (not a setting).
const MAX_FORM_DEPTH: usize = 16;
/// Most form XObjects visited while checking one PDF's pages.
/// Fixed (not a setting).
const MAX_FORM_VISITS: usize = 20_000;

/// The form XObjects named by `resources` (a dictionary or a reference to one).
fn forms_of(doc: &lopdf::Document, resources: &lopdf::Object) -> Vec<lopdf::ObjectId> {
    let Ok((_, res)) = doc.dereference(resources) else { return Vec::new() };
    let Ok(res) = res.as_dict() else { return Vec::new() };
    let Ok(x) = res.get(b"XObject") else { return Vec::new() };
    let Ok((_, x)) = doc.dereference(x) else { return Vec::new() };
    let Ok(x) = x.as_dict() else { return Vec::new() };
    x.iter().filter_map(|(_, v)| v.as_reference().ok()).collect()
}

/// Refuses a form XObject that draws itself (through any chain), nests past
/// [`MAX_FORM_DEPTH`] or makes the walk pass [`MAX_FORM_VISITS`]: pdf-extract follows `Do`
/// recursively without a guard, and a stack overflow cannot be contained (it ends the process).
fn check_forms(doc: &lopdf::Document) -> Result<(), ExtractError> {
    fn walk(
        doc: &lopdf::Document,
        id: lopdf::ObjectId,
        path: &mut Vec<lopdf::ObjectId>,
        visits: &mut usize,
    ) -> Result<(), ExtractError> {
        *visits += 1;
        if *visits > MAX_FORM_VISITS {
            return Err(ExtractError::Hostile(format!(
                "the PDF's forms draw more than {MAX_FORM_VISITS} forms"
            )));
        }
        if path.contains(&id) {
            return Err(ExtractError::Hostile("a form of the PDF draws itself".to_owned()));
        }
        if path.len() >= MAX_FORM_DEPTH {
            return Err(ExtractError::Hostile(format!(
                "the PDF nests forms deeper than {MAX_FORM_DEPTH}"
            )));
        }
        let Ok(stream) = doc.get_object(id).and_then(lopdf::Object::as_stream) else {
            return Ok(());
        };
        let is_form = stream
            .dict
            .get(b"Subtype")
            .and_then(lopdf::Object::as_name)
            .is_ok_and(|n| n == b"Form");
        if !is_form {
            return Ok(());
        }
        let Ok(res) = stream.dict.get(b"Resources") else { return Ok(()) };
        path.push(id);
        for f in forms_of(doc, res) {
            walk(doc, f, path, visits)?;
        }
        path.pop();
        Ok(())
    }
    let mut visits = 0;
    for (_, page) in doc.get_pages() {
        let Ok((own, inherited)) = doc.get_page_resources(page) else { continue };
        let mut forms: Vec<lopdf::ObjectId> = Vec::new();
        if let Some(d) = own {
            forms.extend(forms_of(doc, &lopdf::Object::Dictionary(d.clone())));
        }
        for r in inherited {
            forms.extend(forms_of(doc, &lopdf::Object::Reference(r)));
        }
        for f in forms {
            walk(doc, f, &mut Vec::new(), &mut visits)?;
        }
    }
    Ok(())
}

/// A PDF.
pub(crate) fn pdf(bytes: &[u8], limits: &ExtractLimits) -> Result<Extracted, ExtractError> {
    // The structure first (lopdf, which pdf-extract reads with too): a file lopdf cannot load
    // is left to pdf-extract's own error.
    if let Ok(doc) = lopdf::Document::load_mem(bytes) {
        check_forms(&doc)?;
    }
    let pages = pdf_extract::extract_text_from_mem_by_pages(bytes).map_err(|e| {
        let reason = e.to_string();
        if reason.contains("decrypt") || reason.contains("password") {
            ExtractError::Encrypted("pdf".to_owned())
        } else {
            ExtractError::damaged("pdf", reason)
        }
    })?;
    let mut left = limits.max_chars;
    let mut truncated = pages.len() > limits.max_units;
    let mut units = Vec::with_capacity(pages.len().min(limits.max_units));
    for mut text in pages.into_iter().take(limits.max_units) {
        if text.len() > left {
            let mut end = left;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            truncated = true;
        }
        left -= text.len();
        units.push(Unit { name: None, text });
    }
    Ok(Extracted { kind: DocKind::Pdf, title: None, units, truncated })
}
