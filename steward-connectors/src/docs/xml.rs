//! XML as the document readers see it: elements by local name, text with the predefined and
//! numeric character references resolved, and nothing else. No DTD is processed: an entity a
//! document defines (an entity bomb) or points outside it with (XXE) is never expanded or
//! fetched; its reference is dropped.

use std::borrow::Cow;

use quick_xml::events::{BytesStart, Event};
use steward_core::docs::ExtractError;

/// One thing the walk meets.
pub(crate) enum Node<'a> {
    /// An element opens (`empty`: and closes at once).
    Start { name: &'a str, el: &'a BytesStart<'a>, empty: bool },
    /// An element closes.
    End { name: &'a str },
    /// Text.
    Text(&'a str),
}

/// What the walker does next.
#[derive(PartialEq, Eq)]
pub(crate) enum Flow {
    Go,
    Stop,
}

/// `bytes` as text: UTF-16 by its byte-order mark, else UTF-8 (damaged sequences replaced).
pub(crate) fn decode(bytes: &[u8]) -> Cow<'_, str> {
    if let Some((enc, bom)) = encoding_rs::Encoding::for_bom(bytes) {
        let (text, _) = enc.decode_without_bom_handling(&bytes[bom..]);
        return text;
    }
    String::from_utf8_lossy(bytes)
}

/// The value of attribute `name` (by local name) of `el`.
pub(crate) fn attr(el: &BytesStart<'_>, name: &str) -> Option<String> {
    el.attributes().with_checks(false).flatten().find_map(|a| {
        let key = a.key.as_ref();
        let local = key.rsplit(':').next().unwrap_or(key);
        (local == name)
            .then(|| {
                a.normalized_value(quick_xml::XmlVersion::Implicit1_0).map(Cow::into_owned).ok()
            })
            .flatten()
    })
}

/// Walks `bytes` (an XML part of a `kind` document), calling `f` for each node.
pub(crate) fn walk(
    bytes: &[u8],
    kind: &str,
    mut f: impl FnMut(Node<'_>) -> Flow,
) -> Result<(), ExtractError> {
    let text = decode(bytes);
    let mut reader = quick_xml::Reader::from_str(&text);
    reader.config_mut().check_end_names = false;
    loop {
        let ev =
            reader.read_event().map_err(|e| ExtractError::damaged(kind, format!("XML: {e}")))?;
        let flow = match &ev {
            Event::Start(el) => {
                let name = el.local_name();
                f(Node::Start { name: name.as_ref(), el, empty: false })
            }
            Event::Empty(el) => {
                let name = el.local_name();
                if f(Node::Start { name: name.as_ref(), el, empty: true }) == Flow::Stop {
                    Flow::Stop
                } else {
                    f(Node::End { name: name.as_ref() })
                }
            }
            Event::End(el) => {
                let name = el.local_name();
                f(Node::End { name: name.as_ref() })
            }
            Event::Text(t) => f(Node::Text(&t.xml10_content())),
            Event::CData(t) => f(Node::Text(&t.xml10_content())),
            Event::GeneralRef(r) => {
                if let Ok(Some(c)) = r.resolve_char_ref() {
                    f(Node::Text(c.encode_utf8(&mut [0; 4])))
                } else if let Some(s) = quick_xml::escape::resolve_predefined_entity(r) {
                    f(Node::Text(s))
                } else {
                    // A document-defined entity: never expanded.
                    Flow::Go
                }
            }
            Event::Eof => return Ok(()),
            _ => Flow::Go,
        };
        if flow == Flow::Stop {
            return Ok(());
        }
    }
}

/// Text gathered up to a bound.
pub(crate) struct Sink {
    pub(crate) out: String,
    left: usize,
    pub(crate) truncated: bool,
}

impl Sink {
    /// A sink for at most `max` bytes.
    pub(crate) fn new(max: usize) -> Self {
        Self { out: String::new(), left: max, truncated: false }
    }

    /// Adds `s`; false once the bound is reached (then cut at a character boundary).
    pub(crate) fn push(&mut self, s: &str) -> bool {
        if self.truncated {
            return false;
        }
        if s.len() <= self.left {
            self.out.push_str(s);
            self.left -= s.len();
            return true;
        }
        let mut end = self.left;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.out.push_str(&s[..end]);
        self.left = 0;
        self.truncated = true;
        false
    }

    /// Bytes still allowed.
    pub(crate) fn left(&self) -> usize {
        self.left
    }

    /// Takes the text gathered so far, keeping the bound's remainder.
    pub(crate) fn take(&mut self) -> String {
        std::mem::take(&mut self.out)
    }
}
