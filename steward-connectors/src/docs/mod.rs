//! The document readers: PDF, DOCX, PPTX, XLSX, ODT / ODP / ODS, HTML, Markdown, RTF, plain
//! text in any encoding and saved mail, behind [`steward_core::docs::Extractor`]. The kind is
//! told from the bytes first (a PDF named `.txt` is a PDF) and the name second. Every reader
//! keeps to [`ExtractLimits`]; the core runs it on a worker with a time limit, contains its
//! panics, normalizes and caches what it returns.

mod archive;
pub mod demo;
mod eml;
mod markup;
mod odf;
mod ooxml;
mod pdf;
mod sheets;
mod xml;

use std::path::Path;

use steward_core::docs::{DocKind, ExtractError, ExtractLimits, Extracted, Extractor};

/// Every reader of this crate, as one [`Extractor`].
#[derive(Debug, Default, Clone, Copy)]
pub struct Readers;

/// Header names a saved message may begin with.
const MAIL_HEADERS: [&str; 12] = [
    "received",
    "return-path",
    "from",
    "to",
    "subject",
    "date",
    "message-id",
    "mime-version",
    "delivered-to",
    "reply-to",
    "sender",
    "content-type",
];

/// Whether `bytes` begin like a saved mail message.
fn looks_like_mail(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(4096)];
    let Some(line) = head.split(|&b| b == b'\n').next() else { return false };
    let line = String::from_utf8_lossy(line).to_ascii_lowercase();
    let name = line.split(':').next().unwrap_or("");
    line.contains(':')
        && (MAIL_HEADERS.contains(&name) || name.starts_with("x-"))
        && head.windows(2).any(|w| w == b"\n\n") | head.windows(4).any(|w| w == b"\r\n\r\n")
}

/// What `bytes` (named `path`) are.
pub fn detect(path: &Path, bytes: &[u8]) -> Result<DocKind, ExtractError> {
    let ext =
        path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    let head = &bytes[..bytes.len().min(1024)];
    // A PDF begins with its header; some writers put bytes before it, which only a file
    // named .pdf is forgiven (a text that mentions "%PDF-" is text).
    if bytes.starts_with(b"%PDF-") || (ext == "pdf" && head.windows(5).any(|w| w == b"%PDF-")) {
        return Ok(DocKind::Pdf);
    }
    if bytes.starts_with(b"{\\rtf") {
        return Ok(DocKind::Rtf);
    }
    if bytes.starts_with(&archive::OLE_MAGIC) {
        return match ext.as_str() {
            // A password-protected OOXML file is an encrypted package inside an OLE file.
            "docx" | "xlsx" | "pptx" => Err(ExtractError::Encrypted(ext)),
            _ => Err(ExtractError::Unsupported(
                "a legacy Office binary file (.doc, .xls, .ppt): save it as .docx, .xlsx or .pptx"
                    .to_owned(),
            )),
        };
    }
    if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        let by_ext = match ext.as_str() {
            "docx" | "docm" | "dotx" => Some(DocKind::Docx),
            "pptx" | "pptm" | "ppsx" => Some(DocKind::Pptx),
            "xlsx" | "xlsm" => Some(DocKind::Xlsx),
            "odt" | "ott" => Some(DocKind::Odt),
            "ods" | "ots" => Some(DocKind::Ods),
            "odp" | "otp" => Some(DocKind::Odp),
            _ => None,
        };
        if let Some(k) = by_ext {
            return Ok(k);
        }
        // By the parts it names (the local headers, without opening the archive).
        let has = |name: &[u8]| bytes.windows(name.len()).take(1 << 20).any(|w| w == name);
        return if has(b"word/document.xml") {
            Ok(DocKind::Docx)
        } else if has(b"ppt/presentation.xml") {
            Ok(DocKind::Pptx)
        } else if has(b"xl/workbook.xml") {
            Ok(DocKind::Xlsx)
        } else if has(b"application/vnd.oasis.opendocument.spreadsheet") {
            Ok(DocKind::Ods)
        } else if has(b"application/vnd.oasis.opendocument.presentation") {
            Ok(DocKind::Odp)
        } else if has(b"application/vnd.oasis.opendocument.text") {
            Ok(DocKind::Odt)
        } else {
            Err(ExtractError::Unsupported("a ZIP archive (archives are not opened)".to_owned()))
        };
    }
    if bytes.starts_with(&[0x1f, 0x8b]) {
        return Err(ExtractError::Unsupported("a gzip archive (archives are not opened)".into()));
    }
    match ext.as_str() {
        "docx" | "pptx" | "xlsx" | "odt" | "ods" | "odp" | "pdf" => {
            return Err(ExtractError::damaged(ext.clone(), "its bytes are not of that kind"));
        }
        "html" | "htm" | "xhtml" => return Ok(DocKind::Html),
        "md" | "markdown" | "mdown" => return Ok(DocKind::Markdown),
        "eml" => return Ok(DocKind::Eml),
        "rtf" => return Err(ExtractError::damaged("rtf", "it does not begin with {\\rtf")),
        _ => {}
    }
    let sample = &bytes[..bytes.len().min(8192)];
    let utf16 = encoding_rs::Encoding::for_bom(bytes)
        .is_some_and(|(e, _)| e == encoding_rs::UTF_16LE || e == encoding_rs::UTF_16BE);
    if !utf16 && sample.contains(&0) {
        return Err(ExtractError::Unsupported(format!(
            "a binary file{}",
            if ext.is_empty() { String::new() } else { format!(" (.{ext})") }
        )));
    }
    let lower = String::from_utf8_lossy(&sample[..sample.len().min(512)]).to_ascii_lowercase();
    let lower = lower.trim_start_matches('\u{feff}').trim_start();
    if lower.starts_with("<!doctype html") || lower.starts_with("<html") {
        return Ok(DocKind::Html);
    }
    if looks_like_mail(bytes) {
        return Ok(DocKind::Eml);
    }
    Ok(DocKind::Text)
}

impl Extractor for Readers {
    fn extract(
        &self,
        path: &Path,
        bytes: &[u8],
        limits: &ExtractLimits,
    ) -> Result<Extracted, ExtractError> {
        match detect(path, bytes)? {
            DocKind::Pdf => pdf::pdf(bytes, limits),
            DocKind::Docx => ooxml::docx(bytes, limits),
            DocKind::Pptx => ooxml::pptx(bytes, limits),
            DocKind::Xlsx => sheets::xlsx(bytes, limits),
            k @ (DocKind::Odt | DocKind::Ods | DocKind::Odp) => odf::odf(bytes, k, limits),
            DocKind::Html => Ok(markup::html(bytes, limits)),
            DocKind::Rtf => markup::rtf(bytes, limits),
            DocKind::Eml => eml::eml(bytes, limits),
            k @ (DocKind::Markdown | DocKind::Text) => Ok(markup::text(bytes, k, limits)),
        }
    }
}
