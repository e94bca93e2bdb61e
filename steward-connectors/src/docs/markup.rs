//! Plain text, Markdown, HTML and RTF.
//!
//! Text is decoded by its byte-order mark (UTF-8, UTF-16), else as UTF-8 when it is valid, else
//! in the encoding Firefox's detector (chardetng) finds most likely: Latin-1 / Windows-1252,
//! Cyrillic, Shift_JIS, GB18030, ISO-2022-JP and the rest of the WHATWG set. HTML may also
//! declare its charset in a `<meta>`. RTF is read by the small reader below: control words,
//! `\'hh` bytes in the document's code page (or its font's charset), `\uN` characters with their
//! fallbacks skipped, destinations that are not text (font tables, pictures, fields' codes,
//! `\*` ones) skipped.

use encoding_rs::Encoding;
use steward_core::docs::{DocKind, ExtractError, ExtractLimits, Extracted, Unit};

/// `bytes` as text, in `declared` when given and there is no byte-order mark.
pub(crate) fn decode_text(bytes: &[u8], declared: Option<&'static Encoding>) -> String {
    if let Some((enc, bom)) = Encoding::for_bom(bytes) {
        return enc.decode_without_bom_handling(&bytes[bom..]).0.into_owned();
    }
    if let Some(enc) = declared {
        return enc.decode_without_bom_handling(bytes).0.into_owned();
    }
    // ISO-2022-JP is 7-bit (valid UTF-8) and switches with escape sequences.
    if let Ok(s) = std::str::from_utf8(bytes)
        && !s.contains("\u{1b}$B")
        && !s.contains("\u{1b}$@")
    {
        return s.to_owned();
    }
    let mut det = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Allow);
    det.feed(bytes, true);
    let enc = det.guess(None, chardetng::Utf8Detection::Allow);
    enc.decode_without_bom_handling(bytes).0.into_owned()
}

fn cut(mut s: String, max: usize) -> (String, bool) {
    if s.len() <= max {
        return (s, false);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    (s, true)
}

/// Plain text or Markdown (kept as written: its marks are readable).
pub(crate) fn text(bytes: &[u8], kind: DocKind, limits: &ExtractLimits) -> Extracted {
    let (text, truncated) = cut(decode_text(bytes, None), limits.max_chars);
    let title = (kind == DocKind::Markdown)
        .then(|| {
            text.lines()
                .find_map(|l| l.strip_prefix("# ").map(|t| t.trim().to_owned()))
                .filter(|t| !t.is_empty())
        })
        .flatten();
    Extracted { kind, title, units: vec![Unit { name: None, text }], truncated }
}

/// The charset an HTML file's first 1024 bytes declare in a `<meta>`, if one is known.
fn meta_charset(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(1024)]).to_ascii_lowercase();
    let mut rest = head.as_str();
    while let Some(i) = rest.find("<meta") {
        let tag = &rest[i..];
        let tag = &tag[..tag.find('>').unwrap_or(tag.len())];
        if let Some(j) = tag.find("charset=") {
            let v = tag[j + 8..].trim_start_matches(['"', '\'', ' ']);
            let end = v.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'));
            let label = &v[..end.unwrap_or(v.len())];
            // A page that says UTF-16 in ASCII bytes is not UTF-16 (the HTML standard).
            return Encoding::for_label(label.as_bytes()).map(|e| {
                if e == encoding_rs::UTF_16LE || e == encoding_rs::UTF_16BE {
                    encoding_rs::UTF_8
                } else {
                    e
                }
            });
        }
        rest = &rest[i + 5..];
    }
    None
}

/// An HTML page: its title and its text, scripts and styles dropped, blocks on their lines.
pub(crate) fn html(bytes: &[u8], limits: &ExtractLimits) -> Extracted {
    let source = decode_text(bytes, meta_charset(bytes));
    let lower = source.to_ascii_lowercase();
    let title = lower.find("<title").and_then(|i| {
        let open = i + lower[i..].find('>')? + 1;
        let close = open + lower[open..].find("</title")?;
        let t = crate::mail::mime::html_text(&source[open..close]);
        let t = t.trim();
        (!t.is_empty()).then(|| t.to_owned())
    });
    // mail-parser's converter drops the space after an inline element that began a line
    // ("<p><a>Indexation</a> du" read "Indexationdu"); a space written as a reference survives.
    let mut spaced = String::with_capacity(source.len() + 64);
    let mut after_tag = false;
    for c in source.chars() {
        if after_tag && c.is_whitespace() {
            spaced.push_str("&#32;");
            after_tag = false;
            continue;
        }
        after_tag = c == '>';
        spaced.push(c);
    }
    let mut body = crate::mail::mime::html_text(&spaced);
    if let Some(t) = &title {
        body = format!("{t}\n\n{body}");
    }
    let (text, truncated) = cut(body, limits.max_chars);
    Extracted { kind: DocKind::Html, title, units: vec![Unit { name: None, text }], truncated }
}

/// The encoding of a Windows code page number, as RTF's `\ansicpg` writes it.
fn code_page(n: i32) -> Option<&'static Encoding> {
    let label = match n {
        932 => "shift_jis".to_owned(),
        936 => "gbk".to_owned(),
        949 => "euc-kr".to_owned(),
        950 => "big5".to_owned(),
        874 => "windows-874".to_owned(),
        866 => "ibm866".to_owned(),
        10000 => "macintosh".to_owned(),
        1250..=1258 => format!("windows-{n}"),
        _ => return None,
    };
    Encoding::for_label(label.as_bytes())
}

/// The encoding of an RTF font charset (`\fcharsetN`).
fn font_charset(n: i32) -> Option<&'static Encoding> {
    code_page(match n {
        128 => 932,
        129 => 949,
        134 => 936,
        136 => 950,
        161 => 1253,
        162 => 1254,
        163 => 1258,
        177 => 1255,
        178 => 1256,
        186 => 1257,
        204 => 1251,
        222 => 874,
        238 => 1250,
        77 => 10000,
        _ => return None,
    })
}

/// Destinations whose content is not the document's text.
const SKIPPED: [&str; 22] = [
    "fonttbl",
    "colortbl",
    "stylesheet",
    "info",
    "pict",
    "object",
    "objdata",
    "fldinst",
    "datastore",
    "themedata",
    "xmlnstbl",
    "listtable",
    "listoverridetable",
    "rsidtbl",
    "generator",
    "latentstyles",
    "pgdsctbl",
    "header",
    "footer",
    "headerl",
    "headerr",
    "footerr",
];

/// One group's state.
#[derive(Clone)]
struct Group {
    skip: bool,
    /// Fallback characters after `\uN`.
    uc: usize,
    /// The font in use (for its charset).
    font: Option<i32>,
    /// Inside the font table (charsets are read there).
    fonttbl: bool,
}

/// An RTF document.
pub(crate) fn rtf(bytes: &[u8], limits: &ExtractLimits) -> Result<Extracted, ExtractError> {
    if !bytes.starts_with(b"{\\rtf") {
        return Err(ExtractError::damaged("rtf", "it does not begin with {\\rtf"));
    }
    let mut out = String::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut doc_enc: &'static Encoding = encoding_rs::WINDOWS_1252;
    let mut fonts: std::collections::HashMap<i32, &'static Encoding> = Default::default();
    let mut stack: Vec<Group> = Vec::new();
    let mut g = Group { skip: false, uc: 1, font: None, fonttbl: false };
    // Fallback characters still to skip after a `\uN`.
    let mut skip_chars = 0usize;
    // The first half of a character written as a UTF-16 pair of `\uN`.
    let mut high: Option<u32> = None;
    let mut i = 0usize;
    let n = bytes.len();
    let enc_of = |g: &Group, fonts: &std::collections::HashMap<i32, &'static Encoding>| {
        g.font.and_then(|f| fonts.get(&f).copied())
    };
    macro_rules! flush {
        () => {
            if !pending.is_empty() {
                let enc = enc_of(&g, &fonts).unwrap_or(doc_enc);
                out.push_str(&enc.decode_without_bom_handling(&pending).0);
                pending.clear();
            }
        };
    }
    let mut truncated = false;
    while i < n {
        if out.len() + pending.len() > limits.max_chars {
            truncated = true;
            break;
        }
        let b = bytes[i];
        match b {
            b'{' => {
                flush!();
                if stack.len() >= 1_000 {
                    return Err(ExtractError::Hostile(
                        "RTF groups nested more than 1000 deep".into(),
                    ));
                }
                stack.push(g.clone());
                i += 1;
            }
            b'}' => {
                flush!();
                g = stack.pop().unwrap_or_else(|| g.clone());
                i += 1;
            }
            b'\\' => {
                i += 1;
                let Some(&c) = bytes.get(i) else { break };
                if c.is_ascii_alphabetic() {
                    let start = i;
                    while i < n && bytes[i].is_ascii_alphabetic() && i - start < 32 {
                        i += 1;
                    }
                    let word = std::str::from_utf8(&bytes[start..i]).unwrap_or("");
                    let pstart = i;
                    if i < n && bytes[i] == b'-' {
                        i += 1;
                    }
                    while i < n && bytes[i].is_ascii_digit() && i - pstart < 10 {
                        i += 1;
                    }
                    let param: Option<i32> =
                        std::str::from_utf8(&bytes[pstart..i]).ok().and_then(|s| s.parse().ok());
                    if i < n && bytes[i] == b' ' {
                        i += 1;
                    }
                    if g.skip && !matches!(word, "f" | "fcharset" | "bin") {
                        continue;
                    }
                    match word {
                        "par" | "line" | "row" | "sect" | "page" => {
                            flush!();
                            out.push('\n');
                        }
                        "tab" | "cell" => {
                            flush!();
                            out.push('\t');
                        }
                        "emdash" => {
                            flush!();
                            out.push('—');
                        }
                        "endash" => {
                            flush!();
                            out.push('–');
                        }
                        "lquote" => {
                            flush!();
                            out.push('‘');
                        }
                        "rquote" => {
                            flush!();
                            out.push('’');
                        }
                        "ldblquote" => {
                            flush!();
                            out.push('“');
                        }
                        "rdblquote" => {
                            flush!();
                            out.push('”');
                        }
                        "bullet" => {
                            flush!();
                            out.push('•');
                        }
                        "ansicpg" => {
                            if let Some(e) = param.and_then(code_page) {
                                doc_enc = e;
                            }
                        }
                        "uc" => g.uc = param.unwrap_or(1).clamp(0, 10) as usize,
                        "u" => {
                            flush!();
                            if let Some(p) = param {
                                let unit = if p < 0 { p + 65_536 } else { p } as u32;
                                // Characters beyond the BMP come as two UTF-16 halves.
                                match (high.take(), unit) {
                                    (_, 0xD800..=0xDBFF) => high = Some(unit),
                                    (Some(h), 0xDC00..=0xDFFF) => out.push(
                                        char::from_u32(
                                            0x10000 + ((h - 0xD800) << 10) + (unit - 0xDC00),
                                        )
                                        .unwrap_or('\u{fffd}'),
                                    ),
                                    (_, u) => out.push(char::from_u32(u).unwrap_or('\u{fffd}')),
                                }
                                skip_chars = g.uc;
                            }
                        }
                        "f" => {
                            flush!();
                            g.font = param;
                        }
                        "fcharset" if g.fonttbl => {
                            if let (Some(f), Some(e)) = (g.font, param.and_then(font_charset)) {
                                fonts.insert(f, e);
                            }
                        }
                        "fonttbl" => {
                            g.skip = true;
                            g.fonttbl = true;
                        }
                        "bin" => i = i.saturating_add(param.unwrap_or(0).max(0) as usize),
                        w if SKIPPED.contains(&w) => g.skip = true,
                        _ => {}
                    }
                    continue;
                }
                i += 1;
                match c {
                    b'\'' => {
                        let hex = bytes.get(i..i + 2).and_then(|h| std::str::from_utf8(h).ok());
                        if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                            i += 2;
                            if skip_chars > 0 {
                                skip_chars -= 1;
                            } else if !g.skip {
                                pending.push(v);
                            }
                        }
                    }
                    b'*' => g.skip = true,
                    b'~' if !g.skip => {
                        flush!();
                        out.push('\u{a0}');
                    }
                    b'_' if !g.skip => {
                        flush!();
                        out.push('-');
                    }
                    b'\n' | b'\r' if !g.skip => {
                        flush!();
                        out.push('\n');
                    }
                    b'\\' | b'{' | b'}' if !g.skip => {
                        flush!();
                        if skip_chars > 0 {
                            skip_chars -= 1;
                        } else {
                            out.push(c as char);
                        }
                    }
                    _ => {}
                }
            }
            b'\r' | b'\n' => i += 1,
            _ => {
                i += 1;
                if skip_chars > 0 {
                    skip_chars -= 1;
                    continue;
                }
                if !g.skip {
                    pending.push(b);
                }
            }
        }
    }
    flush!();
    let (text, cut_now) = cut(out, limits.max_chars);
    Ok(Extracted {
        kind: DocKind::Rtf,
        title: None,
        units: vec![Unit { name: None, text }],
        truncated: truncated || cut_now,
    })
}
