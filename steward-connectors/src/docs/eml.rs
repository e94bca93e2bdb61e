//! A saved mail message (`.eml`), read through the mail mirror's MIME adapter: its subject,
//! sender, recipients and date, its body text (plain, else HTML made text), and the list of its
//! attachments (their content is not read).

use steward_core::{
    Limits,
    docs::{DocKind, ExtractError, ExtractLimits, Extracted, Unit},
    mirror::{Address, ParseLimits},
};

use crate::mail::mime::{MessageContext, parse_message};

fn addresses(list: &[Address]) -> String {
    list.iter()
        .map(|a| match &a.name {
            Some(n) if !n.is_empty() => format!("{n} <{}>", a.addr),
            _ => a.addr.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A mail message.
pub(crate) fn eml(bytes: &[u8], limits: &ExtractLimits) -> Result<Extracted, ExtractError> {
    let mut parse = ParseLimits::from(&Limits::default());
    parse.max_message_bytes = limits.max_bytes;
    parse.max_body_chars = limits.max_chars;
    let m = parse_message(bytes, &MessageContext::default(), &parse, None)
        .map_err(|e| ExtractError::damaged("eml", e))?;
    // The Date header as written (its zone kept), else the parsed time in UTC.
    let header_end = bytes.windows(2).position(|w| w == b"\n\n").unwrap_or(bytes.len().min(65_536));
    let written = String::from_utf8_lossy(&bytes[..header_end])
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("date").then(|| value.trim().to_owned())
        })
        .filter(|d| !d.is_empty());
    let date = written
        .or_else(|| {
            m.date.and_then(|d| chrono::DateTime::from_timestamp(d, 0)).map(|d| d.to_rfc2822())
        })
        .unwrap_or_default();
    let mut text = format!(
        "Subject: {}\nFrom: {}\nTo: {}\n",
        m.subject.clone().unwrap_or_default(),
        addresses(&m.from),
        addresses(&m.to)
    );
    if !m.cc.is_empty() {
        text.push_str(&format!("Cc: {}\n", addresses(&m.cc)));
    }
    text.push_str(&format!("Date: {date}\n\n{}\n", m.body_text));
    if !m.attachments.is_empty() {
        text.push_str("\n--- attachments ---\n");
        for a in &m.attachments {
            text.push_str(&format!(
                "{}\t{}\t{}\n",
                a.name.as_deref().unwrap_or("(unnamed)"),
                a.mime_type,
                a.size
            ));
        }
    }
    let truncated = text.len() > limits.max_chars;
    if truncated {
        let mut end = limits.max_chars;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    Ok(Extracted {
        kind: DocKind::Eml,
        title: m.subject,
        units: vec![Unit { name: None, text }],
        truncated,
    })
}
