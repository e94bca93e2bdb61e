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
    // The structure is loaded once (lopdf, which pdf-extract reads with): its form graph is
    // checked, its title read, its images emptied, then pdf-extract reads it page by page.
    let encrypted = |reason: &str| reason.contains("decrypt") || reason.contains("password");
    let mut doc = lopdf::Document::load_mem(bytes).map_err(|e| {
        let reason = e.to_string();
        if encrypted(&reason) {
            ExtractError::Encrypted("pdf".to_owned())
        } else {
            ExtractError::damaged("pdf", reason)
        }
    })?;
    // An empty user password is how most "protected" PDFs open (as pdf-extract does).
    if doc.is_encrypted() && doc.decrypt("").is_err() {
        return Err(ExtractError::Encrypted("pdf".to_owned()));
    }
    check_forms(&doc)?;
    let title = info_title(&doc);
    blank_images(&mut doc);
    let mut pages = Vec::new();
    // Pages in order until the first that cannot be read (as pdf-extract's own loop), one
    // past the bound at most (to know the document was cut).
    let count = u32::try_from(doc.get_pages().len().min(limits.max_units + 1)).unwrap_or(u32::MAX);
    for n in 1..=count {
        let mut text = String::new();
        let read = {
            let mut out = pdf_extract::PlainTextOutput::new(&mut text);
            pdf_extract::output_doc_page(&doc, &mut out, n)
        };
        if read.is_err() {
            break;
        }
        pages.push(text);
    }
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
    Ok(Extracted { kind: DocKind::Pdf, title, units, truncated })
}

/// Empties every image stream. pdf-extract 0.12 runs every XObject a page draws (`Do`) as a
/// content stream, images included: their pixels were parsed as drawing operators, which put
/// garbage into the text or panicked (6 of 400 generated PDFs with a photo, `scripts/gen-docs.py`).
fn blank_images(doc: &mut lopdf::Document) {
    for object in doc.objects.values_mut() {
        if let lopdf::Object::Stream(s) = object
            && matches!(s.dict.get(b"Subtype"), Ok(lopdf::Object::Name(n)) if n == b"Image")
        {
            s.dict.remove(b"Filter");
            s.dict.remove(b"DecodeParms");
            s.set_content(Vec::new());
        }
    }
}

/// The `/Title` of the document information dictionary, decoded (UTF-16BE with its BOM, else
/// PDFDocEncoding read as Latin-1), at most 300 characters; none when empty.
fn info_title(doc: &lopdf::Document) -> Option<String> {
    use lopdf::Object;
    let info = match doc.trailer.get(b"Info").ok()? {
        Object::Reference(id) => doc.get_dictionary(*id).ok()?,
        Object::Dictionary(d) => d,
        _ => return None,
    };
    let Object::String(bytes, _) = info.get(b"Title").ok()? else { return None };
    let text = match bytes.strip_prefix(&[0xFE, 0xFF]) {
        Some(be) => {
            let units: Vec<u16> =
                be.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
            String::from_utf16_lossy(&units)
        }
        None => bytes.iter().map(|&b| char::from(b)).collect(),
    };
    let t: String = text.chars().filter(|c| !c.is_control()).take(300).collect();
    let t = t.trim();
    (!t.is_empty()).then(|| t.to_owned())
}
