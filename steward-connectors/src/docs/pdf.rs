//! PDF text layers through `pdf-extract` (on `lopdf`), page by page. `pdf-extract` panics on
//! some files by design; the caller runs every extraction on a worker that contains panics
//! ([`steward_core::docs::extract_bounded`]). Images are never decoded. A PDF whose pages hold
//! no text is returned as such (the reader then says `no_text`).

use steward_core::docs::{DocKind, ExtractError, ExtractLimits, Extracted, Unit};

/// A PDF.
pub(crate) fn pdf(bytes: &[u8], limits: &ExtractLimits) -> Result<Extracted, ExtractError> {
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
