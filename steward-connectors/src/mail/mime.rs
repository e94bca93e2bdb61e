//! The MIME adapter: RFC 822 bytes → [`ParsedMessage`], through `mail-parser` (RFC 2047 encoded
//! words, RFC 2231 parameters, charsets, quoted-printable and base64, nested messages, digests).
//! Framing formats (Maildir, mbox, emlx) call [`parse_message`] with their own context.

use mail_parser::{
    Address as MpAddress, HeaderName, HeaderValue, MessageParser, MimeHeaders, PartType,
};
use sha2::{Digest, Sha256};
use steward_core::mirror::{
    Address, BodyState, FileError, Flags, ParseLimits, ParsedAttachment, ParsedMessage,
};

/// Readable text of an HTML body. mail-parser breaks lines only at `</p>` and `<br>`; block
/// elements such as headings, list items, table cells and divs would otherwise run into the next
/// word ("Consulting</h1><p>Payment" became "ConsultingPayment"), which breaks search terms.
pub(crate) fn html_text(html: &str) -> String {
    const BLOCKS: [&str; 13] =
        ["h1", "h2", "h3", "h4", "h5", "h6", "div", "li", "tr", "td", "th", "table", "blockquote"];
    let mut out = String::with_capacity(html.len() + 64);
    let mut rest = html;
    while let Some(i) = rest.find("</") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let name_len = after.bytes().take_while(u8::is_ascii_alphanumeric).count();
        let name = &after[..name_len];
        if BLOCKS.iter().any(|b| b.eq_ignore_ascii_case(name)) {
            out.push_str("<br>");
        }
        out.push_str("</");
        rest = after;
    }
    out.push_str(rest);
    mail_parser::decoders::html::html_to_text(&out)
}

/// What the framing knows about a message that its bytes do not say.
#[derive(Debug, Clone, Default)]
pub struct MessageContext {
    /// Position inside its file.
    pub ordinal: u32,
    /// Byte offset inside its file.
    pub offset: u64,
    /// See [`ParsedMessage::source_key`]; when empty, the content hash is used.
    pub source_key: String,
    /// Flags from the container (Maildir info, emlx trailer, mbox Status).
    pub flags: Option<Flags>,
    /// Delivery time recorded by the container.
    pub received_at: Option<i64>,
    /// Gmail thread id from the container, when the headers lack one.
    pub gm_thread_id: Option<String>,
    /// True for Apple Mail `.partial.emlx`: bodies of attachments were stripped.
    pub partial: bool,
}

/// Fetches the bytes of an attachment stripped from a partial message, by IMAP part number
/// (`2`, `1.2`) and file name.
pub type PartResolver<'a> = dyn Fn(&str, Option<&str>) -> Option<Vec<u8>> + 'a;

/// Finds the end of the header block; `None` when there is no blank line.
fn header_end(bytes: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(p) = memchr_nl(&bytes[i..]) {
        let at = i + p;
        let next = &bytes[at + 1..];
        if next.starts_with(b"\n") || next.starts_with(b"\r\n") {
            return Some(at + 1);
        }
        i = at + 1;
    }
    None
}

fn memchr_nl(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

/// Cheap checks that reject what is not an RFC 822 message before the parser sees it.
fn precheck(bytes: &[u8], limits: &ParseLimits) -> Result<(), FileError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(FileError::Empty);
    }
    let size = bytes.len() as u64;
    if size > limits.max_message_bytes {
        return Err(FileError::TooLarge { size, limit: limits.max_message_bytes });
    }
    let head_len = header_end(&bytes[..bytes.len().min(limits.max_header_bytes + 2)]);
    if head_len.is_none() && bytes.len() > limits.max_header_bytes {
        return Err(FileError::HeaderTooLarge { limit: limits.max_header_bytes });
    }
    let head = &bytes[..head_len.unwrap_or(bytes.len()).min(bytes.len())];
    if head.contains(&0) {
        return Err(FileError::NotMail { reason: "NUL bytes in the header block".to_owned() });
    }
    // Mail is text: allow 8-bit bytes (legacy charsets) but not control characters.
    let sample = &bytes[..bytes.len().min(4096)];
    let control = sample
        .iter()
        .filter(|&&b| b < 0x20 && !matches!(b, b'\t' | b'\r' | b'\n' | 0x0c | 0x1b))
        .count();
    if control * 10 > sample.len() {
        return Err(FileError::NotMail { reason: "binary content".to_owned() });
    }
    Ok(())
}

/// Where RFC 5322 says the header block ends: at the first line that is neither a field
/// (`name:`), a continuation, nor (first) an mbox envelope. Such a line starts the body, as in
/// Python's `email` (MissingHeaderBodySeparatorDefect); a blank line is inserted before it so
/// that the parser sees the same split instead of guessing headers out of body text.
fn repair_header_block(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let mut pos = 0;
    let mut first = true;
    while pos < bytes.len() {
        let end =
            bytes[pos..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |i| pos + i + 1);
        let line = &bytes[pos..end];
        let content = line.strip_suffix(b"\n").unwrap_or(line);
        let content = content.strip_suffix(b"\r").unwrap_or(content);
        if content.is_empty() {
            return std::borrow::Cow::Borrowed(bytes);
        }
        let is_field = {
            let n =
                content.iter().take_while(|&&b| (0x21..=0x7e).contains(&b) && b != b':').count();
            content.get(n) == Some(&b':')
        };
        let is_continuation = !first && matches!(content[0], b' ' | b'\t');
        let is_envelope = first && content.starts_with(b"From ");
        if !(is_field || is_continuation || is_envelope) {
            let mut fixed = Vec::with_capacity(bytes.len() + 2);
            fixed.extend_from_slice(&bytes[..pos]);
            fixed.extend_from_slice(if line.ends_with(b"\r\n") { b"\r\n" } else { b"\n" });
            fixed.extend_from_slice(&bytes[pos..]);
            return std::borrow::Cow::Owned(fixed);
        }
        first = false;
        pos = end;
    }
    std::borrow::Cow::Borrowed(bytes)
}

/// Addresses of every instance of a header (a message may repeat To or Cc). Display names come
/// from the phrase only: an RFC 5322 comment (`bob@x (Bob)`) is not a name. A bare word without
/// `@` (`To: undisclosed`) is kept as the address, as written.
fn addresses<'a>(
    values: impl Iterator<Item = &'a MpAddress<'a>>,
    raw: &str,
    max: usize,
) -> Vec<Address> {
    values
        .flat_map(|a| a.iter())
        .filter_map(|a| {
            let mut name = a.name().map(str::trim).filter(|n| !n.is_empty()).map(str::to_owned);
            let email = match a.address().map(str::trim).filter(|e| !e.is_empty()) {
                Some(e) => e.to_owned(),
                None => name.take().filter(|n| !n.contains(char::is_whitespace))?,
            };
            if let Some(n) = &name
                && raw.contains('(')
                && raw.contains(&format!("({n})"))
                && !raw.contains(&format!("{n} <"))
                && !raw.contains(&format!("{n}\" <"))
            {
                name = None;
            }
            Some(Address { name, addr: email })
        })
        .take(max)
        .collect()
}

fn id_list(v: &HeaderValue<'_>, max: usize) -> Vec<String> {
    let clean = |s: &str| {
        let s = s.trim().trim_start_matches('<').trim_end_matches('>').trim();
        (!s.is_empty()).then(|| s.to_owned())
    };
    match v {
        HeaderValue::Text(t) => clean(t).into_iter().collect(),
        HeaderValue::TextList(l) => l.iter().filter_map(|t| clean(t)).take(max).collect(),
        _ => Vec::new(),
    }
}

fn cap_chars(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// IMAP-style part numbers (`1`, `2.1`) for every part index of a parsed message.
fn part_numbers(msg: &mail_parser::Message<'_>) -> Vec<Option<String>> {
    let mut out = vec![None; msg.parts.len()];
    fn walk(
        msg: &mail_parser::Message<'_>,
        idx: usize,
        prefix: &str,
        out: &mut Vec<Option<String>>,
    ) {
        let Some(part) = msg.parts.get(idx) else { return };
        if let PartType::Multipart(children) = &part.body {
            for (n, &child) in children.iter().enumerate() {
                let num = if prefix.is_empty() {
                    format!("{}", n + 1)
                } else {
                    format!("{prefix}.{}", n + 1)
                };
                if let Some(slot) = out.get_mut(child as usize)
                    && slot.is_none()
                {
                    *slot = Some(num.clone());
                    walk(msg, child as usize, &num, out);
                }
            }
        }
    }
    if let Some(first) = msg.parts.first() {
        if matches!(first.body, PartType::Multipart(_)) {
            walk(msg, 0, "", &mut out);
        } else {
            out[0] = Some("1".to_owned());
        }
    }
    out
}

/// Parses one RFC 822 message.
pub fn parse_message(
    bytes: &[u8],
    ctx: &MessageContext,
    limits: &ParseLimits,
    resolve_part: Option<&PartResolver<'_>>,
) -> Result<ParsedMessage, FileError> {
    precheck(bytes, limits)?;
    // An mbox-style envelope line ("From sender date") is not a header; drop it.
    let bytes = match bytes.strip_prefix(b"From ") {
        Some(rest) => rest.iter().position(|&b| b == b'\n').map_or(bytes, |nl| &rest[nl + 1..]),
        None => bytes,
    };
    let content_hash: [u8; 32] = Sha256::digest(bytes).into();
    let repaired = repair_header_block(bytes);
    // mail-parser 0.11 hits a `debug_assert!` ("Invalid part ID") on some malformed
    // multipart/digest structures (found by the mime_adapter fuzz target); in a build with
    // debug assertions that is a panic. A parser bug must not take an ingest down: the message
    // becomes a per-file error instead.
    let parsed = std::panic::catch_unwind(|| MessageParser::default().parse(repaired.as_ref()))
        .map_err(|_| FileError::NotMail {
            reason: "the MIME parser failed on this message's structure".to_owned(),
        })?;
    let msg = parsed.ok_or_else(|| FileError::NotMail {
        reason: "the MIME parser found no message".to_owned(),
    })?;

    let header_text = |name: &str| {
        msg.header_raw(name).map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned)
    };
    let message_id = msg.message_id().map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned);
    let date = msg.date().filter(|d| d.is_valid()).map(mail_parser::DateTime::to_timestamp);

    // Body: the first text/plain body part, else readable text from the first HTML part
    // (mail-parser drops <head>, <style> and <script> content).
    let plain = msg.text_body.iter().find_map(|&i| match &msg.parts.get(i as usize)?.body {
        PartType::Text(t) => Some(t.as_ref().to_owned()),
        _ => None,
    });
    // `Content-Type: text` without a subtype is text/plain (RFC 2045 §5.2 spirit; Python agrees).
    let bare_text = || {
        msg.parts.iter().find_map(|p| {
            let ct = p.content_type()?;
            (ct.ctype().eq_ignore_ascii_case("text")
                && ct.subtype().is_none()
                && !p.is_content_type("text", "html"))
            .then(|| String::from_utf8_lossy(p.contents()).into_owned())
        })
    };
    let html = || {
        let part = msg.parts.get(*msg.text_body.first()? as usize)?;
        match &part.body {
            PartType::Html(h) => Some(html_text(h)),
            PartType::Text(t) => Some(t.as_ref().to_owned()),
            _ => None,
        }
    };
    let body = plain.or_else(html).filter(|b| !b.is_empty()).or_else(bare_text).unwrap_or_default();
    let body = cap_chars(body.replace("\r\n", "\n"), limits.max_body_chars);

    let numbers = part_numbers(&msg);
    let mut attachments = Vec::new();
    // Named inline text parts after the first body part are files too (Python lists them).
    let chosen = msg.text_body.first().copied();
    let named_inline = msg.text_body.iter().copied().filter(|&i| {
        Some(i) != chosen
            && !msg.attachments.contains(&i)
            && msg.parts.get(i as usize).is_some_and(|p| p.attachment_name().is_some())
    });
    let candidates: Vec<u32> = msg.attachments.iter().copied().chain(named_inline).collect();
    for &idx in candidates.iter().take(limits.max_attachments) {
        let Some(part) = msg.parts.get(idx as usize) else { continue };
        let mime_type = part
            .content_type()
            .map(|ct| match ct.subtype() {
                Some(sub) => format!("{}/{}", ct.ctype(), sub),
                None => ct.ctype().to_owned(),
            })
            .unwrap_or_else(|| {
                if matches!(part.body, PartType::Message(_)) {
                    "message/rfc822".to_owned()
                } else {
                    "application/octet-stream".to_owned()
                }
            })
            .to_ascii_lowercase();
        let name = part.attachment_name().map(str::to_owned);
        let contents = part.contents();
        let declared: Option<u64> = part
            .headers
            .iter()
            .find(|h| h.name().eq_ignore_ascii_case("X-Apple-Content-Length"))
            .and_then(|h| h.value().as_text())
            .and_then(|t| t.trim().parse().ok());
        let (size, bytes) = if ctx.partial && contents.is_empty() && declared.is_some() {
            let fetched = match (resolve_part, numbers.get(idx as usize).cloned().flatten()) {
                (Some(r), Some(num)) => r(&num, name.as_deref()),
                _ => None,
            };
            match fetched {
                Some(b) => (b.len() as u64, Some(b)),
                None => (declared.unwrap_or(0), None),
            }
        } else {
            (contents.len() as u64, Some(contents.to_vec()))
        };
        attachments.push(ParsedAttachment { name, mime_type, size, bytes });
    }

    let flags = ctx.flags.unwrap_or_else(|| mbox_status_flags(&msg));
    let body_state = if !ctx.partial {
        BodyState::Full
    } else if body.trim().is_empty() {
        BodyState::None
    } else {
        BodyState::Partial
    };
    let source_key = if ctx.source_key.is_empty() {
        steward_core::mirror::hex(&content_hash)
    } else {
        ctx.source_key.clone()
    };
    Ok(ParsedMessage {
        ordinal: ctx.ordinal,
        offset: ctx.offset,
        size: bytes.len() as u64,
        source_key,
        content_hash,
        message_id,
        subject: msg.subject().map(|s| s.trim().to_owned()),
        from: field_addresses(&msg, HeaderName::From, limits.max_addresses_per_field),
        to: field_addresses(&msg, HeaderName::To, limits.max_addresses_per_field),
        cc: field_addresses(&msg, HeaderName::Cc, limits.max_addresses_per_field),
        bcc: field_addresses(&msg, HeaderName::Bcc, limits.max_addresses_per_field),
        date,
        received_at: ctx.received_at,
        in_reply_to: id_list(msg.in_reply_to(), limits.max_references),
        references: id_list(msg.references(), limits.max_references),
        gm_thread_id: header_text("X-GM-THRID").or_else(|| ctx.gm_thread_id.clone()),
        flags,
        body_text: body,
        body_state,
        attachments,
        bulk: bulk_marker(&header_text),
    })
}

/// Why the headers mark a message as bulk or automated (RFC 2369 list headers, RFC 3834
/// `Auto-Submitted`, the de facto `Precedence`), or `None`.
fn bulk_marker(header: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if let Some(p) = header("Precedence") {
        let p = p.to_ascii_lowercase();
        if ["bulk", "list", "junk"].contains(&p.as_str()) {
            return Some(format!("precedence: {p}"));
        }
    }
    if let Some(a) = header("Auto-Submitted") {
        let a = a.to_ascii_lowercase();
        let value = a.split(';').next().unwrap_or("").trim().to_owned();
        if !value.is_empty() && value != "no" {
            return Some(format!("auto-submitted: {value}"));
        }
    }
    if header("List-Unsubscribe").is_some() {
        return Some("list-unsubscribe".to_owned());
    }
    if header("List-Id").is_some() {
        return Some("list-id".to_owned());
    }
    None
}

fn field_addresses(
    msg: &mail_parser::Message<'_>,
    name: HeaderName<'static>,
    max: usize,
) -> Vec<Address> {
    let raw: String = msg
        .headers()
        .iter()
        .filter(|h| h.name == name)
        .filter_map(|h| msg.raw_message().get(h.offset_start() as usize..h.offset_end() as usize))
        .map(String::from_utf8_lossy)
        .collect::<Vec<_>>()
        .join("\n");
    addresses(msg.header_values(name).filter_map(HeaderValue::as_address), &raw, max)
}

/// Flags from the mbox `Status:` / `X-Status:` convention (mutt, pine, Thunderbird).
fn mbox_status_flags(msg: &mail_parser::Message<'_>) -> Flags {
    let status = msg.header_raw("Status").unwrap_or_default();
    let x = msg.header_raw("X-Status").unwrap_or_default();
    Flags {
        seen: status.contains('R'),
        answered: x.contains('A'),
        flagged: x.contains('F'),
        draft: x.contains('T'),
        deleted: x.contains('D'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ParseLimits {
        ParseLimits::from(&steward_core::Limits::default())
    }

    fn parse(bytes: &[u8]) -> Result<ParsedMessage, FileError> {
        parse_message(bytes, &MessageContext::default(), &limits(), None)
    }

    #[test]
    fn decodes_encoded_words_charsets_and_prefers_plain() {
        let raw = b"From: =?iso-8859-1?q?Andr=E9?= <andre@example.it>\r\nTo: a@b.c, \"Bee\" <b@b.c>\r\n\
Subject: =?utf-8?b?R2nDoCBmYXR0bw==?=\r\nMessage-ID: <x1@example.it>\r\nIn-Reply-To: <p@example.it>\r\n\
References: <r@example.it> <p@example.it>\r\nDate: Tue, 1 Jul 2025 10:00:00 +0200\r\n\
MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\n\
Content-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n\
Perch=E9 no?\r\n--b\r\nContent-Type: text/html\r\n\r\n<p>HTML</p>\r\n--b--\r\n";
        let m = parse(raw).expect("parses");
        assert_eq!(m.subject.as_deref(), Some("Già fatto"));
        assert_eq!(m.from[0].name.as_deref(), Some("André"));
        assert_eq!(m.to.len(), 2);
        assert_eq!(m.message_id.as_deref(), Some("x1@example.it"));
        assert_eq!(m.in_reply_to, vec!["p@example.it"]);
        assert_eq!(m.references, vec!["r@example.it", "p@example.it"]);
        assert_eq!(m.date, Some(1_751_356_800));
        assert_eq!(m.body_text.trim(), "Perché no?");
        assert_eq!(m.body_state, BodyState::Full);
    }

    #[test]
    fn html_blocks_keep_words_apart() {
        let raw = b"From: a@b.c\nSubject: h\nContent-Type: text/html\n\n<body><h1>Invoice #4821</h1>\
<p>Payment due</p><ul><li>one</li><li>two</li></ul><table><tr><td>a</td><td>b</td></tr></table></body>\n";
        let m = parse(raw).expect("parses");
        for w in ["Invoice #4821", "Payment due", "one", "two"] {
            assert!(m.body_text.contains(w), "{:?}", m.body_text);
        }
        assert!(!m.body_text.contains("4821Payment") && !m.body_text.contains("onetwo"));
    }

    #[test]
    fn html_only_drops_scripts_and_styles() {
        let raw = b"From: a@b.c\nSubject: h\nContent-Type: text/html\n\n<html><head><style>p{}</style></head>\
<body><script>alert(1)</script><p>Hello <b>there</b></p></body></html>\n";
        let m = parse(raw).expect("parses");
        assert!(m.body_text.contains("Hello"), "{}", m.body_text);
        assert!(!m.body_text.contains("alert"));
        assert!(!m.body_text.contains("p{}"));
    }

    #[test]
    fn rejects_non_mail_with_typed_errors() {
        assert_eq!(parse(b""), Err(FileError::Empty));
        assert_eq!(parse(b"   \n\n"), Err(FileError::Empty));
        assert!(matches!(parse(b"\x89PNG\r\n\x1a\n\0\0\0"), Err(FileError::NotMail { .. })));
        assert!(matches!(
            parse(b"\x01\x02\x03\x04 binary\x05\x06\x07\n\n"),
            Err(FileError::NotMail { .. })
        ));
        // Text without a header block is still a (headerless) message, as Python's email reads it.
        let m = parse(b"just some words\n\nbody").expect("text parses");
        assert_eq!(m.subject, None);
        let mut bomb = b"From: a@b.c\n".to_vec();
        while bomb.len() < 2 * 1024 * 1024 {
            bomb.extend_from_slice(
                b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
            );
        }
        assert!(matches!(parse(&bomb), Err(FileError::HeaderTooLarge { .. })));
    }

    #[test]
    fn a_parser_panic_is_a_typed_error() {
        let bytes = include_bytes!("testdata/mail-parser-digest-panic.eml");
        // Silence the default hook's message for this expected, contained panic.
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let result = parse(bytes);
        std::panic::set_hook(hook);
        // With debug assertions mail-parser panics and the adapter reports it; without them
        // (release builds) the same input parses. Either way: no panic reaches the caller.
        if cfg!(debug_assertions) {
            let Err(FileError::NotMail { reason }) = result else {
                panic!("expected a typed error, got {:?}", result.map(|m| m.subject));
            };
            assert!(reason.contains("MIME parser"), "{reason}");
        }
    }

    #[test]
    fn attachments_carry_names_types_and_bytes() {
        let raw = b"From: a@b.c\nSubject: att\nContent-Type: multipart/mixed; boundary=z\n\n--z\n\
Content-Type: text/plain\n\nsee attached\n--z\nContent-Type: application/pdf\n\
Content-Disposition: attachment; filename*=utf-8''T%C3%BCbingen.pdf\nContent-Transfer-Encoding: base64\n\n\
JVBERi0xLjQK\n--z--\n";
        let m = parse(raw).expect("parses");
        assert_eq!(m.attachments.len(), 1);
        let a = &m.attachments[0];
        assert_eq!(a.name.as_deref(), Some("Tübingen.pdf"));
        assert_eq!(a.mime_type, "application/pdf");
        assert_eq!(a.bytes.as_deref(), Some(&b"%PDF-1.4\n"[..]));
        assert_eq!(a.size, 9);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]
        #[test]
        fn never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2048)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn never_panics_on_mangled_mail(
            cut in 0usize..400,
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        ) {
            let base = b"From: =?utf-8?q?Jos=C3=A9?= <j@x.es>\r\nTo: a@b.c\r\nSubject: =?iso-8859-1?b?SOls?=\r\nContent-Type: multipart/mixed; boundary=\"q\"\r\n\r\n--q\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\nQ2lhbw==\r\n--q\r\nContent-Type: application/pdf; name*=utf-8''a%20b.pdf\r\n\r\nxx\r\n--q--\r\n";
            let mut bytes = base[..cut.min(base.len())].to_vec();
            bytes.extend_from_slice(&junk);
            bytes.extend_from_slice(&base[cut.min(base.len())..]);
            let _ = parse(&bytes);
        }
    }
}
