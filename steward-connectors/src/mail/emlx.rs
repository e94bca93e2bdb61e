//! Apple Mail `.emlx` / `.partial.emlx`: a decimal byte count on the first line (often
//! space-padded, sometimes wrong), the RFC 822 message, then an XML plist trailer with flags,
//! `date-received`, `remote-id` and `conversation-id`. Partial files keep attachment headers
//! only; the bytes live under `Attachments/<id>/<part>/<name>` beside `Messages/`.

use std::{
    fs,
    path::{Path, PathBuf},
};

use steward_core::mirror::{
    FileError, Flags, MailSource, MailboxRef, ParseLimits, ParsedMessage, SourceError, SourceFile,
};

use super::{
    maildir::mtime_ns,
    mime::{MessageContext, parse_message},
};

/// An Apple Mail store (`~/Library/Mail/V10/…`) or any directory tree holding `.emlx` files.
#[derive(Debug, Clone)]
pub struct EmlxSource {
    root: PathBuf,
}

impl EmlxSource {
    /// A source rooted at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }
}

/// The trailer fields Steward uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EmlxTrailer {
    /// The flags bitfield, decoded.
    pub flags: Flags,
    /// The raw bitfield.
    pub raw_flags: u64,
    /// `date-received`, Unix seconds.
    pub date_received: Option<i64>,
    /// `remote-id` (the IMAP UID).
    pub remote_id: Option<String>,
    /// `conversation-id` (Apple's own conversation number).
    pub conversation_id: Option<i64>,
    /// A Gmail thread id key, when Mail recorded one.
    pub gm_thread_id: Option<String>,
}

/// A framed `.emlx`: where the message is and what the trailer says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmlxFrame<'a> {
    /// The byte count on the first line.
    pub declared_len: usize,
    /// The RFC 822 message.
    pub message: &'a [u8],
    /// The parsed trailer, if there was a readable one.
    pub trailer: Option<EmlxTrailer>,
}

const PLIST_MARK: &[u8] = b"<?xml version";

/// Splits an `.emlx` file into message and trailer. The byte count is trusted only when the
/// trailer starts exactly there; otherwise the last `<?xml version` that opens a plist wins.
pub fn frame_emlx(bytes: &[u8]) -> Result<EmlxFrame<'_>, FileError> {
    let bad = |reason: &str| FileError::Framing { format: "emlx", reason: reason.to_owned() };
    if bytes.is_empty() {
        return Err(FileError::Empty);
    }
    let nl =
        bytes.iter().take(64).position(|&b| b == b'\n').ok_or_else(|| bad("no byte-count line"))?;
    let count_text =
        std::str::from_utf8(&bytes[..nl]).map_err(|_| bad("byte-count line is not text"))?;
    let declared_len: usize =
        count_text.trim().parse().map_err(|_| bad("first line is not a byte count"))?;
    let rest = &bytes[nl + 1..];
    let exact =
        rest.get(declared_len..).is_some_and(|t| t.trim_ascii_start().starts_with(PLIST_MARK));
    let (message, trailer_bytes) = if exact {
        (&rest[..declared_len], Some(&rest[declared_len..]))
    } else {
        match rfind(rest, PLIST_MARK).filter(|&p| rest[p..].windows(6).any(|w| w == b"<plist")) {
            Some(p) => (&rest[..p], Some(&rest[p..])),
            // No trailer at all: keep what the count covers.
            None => (&rest[..declared_len.min(rest.len())], None),
        }
    };
    if message.iter().all(u8::is_ascii_whitespace) {
        return Err(bad("no message between the byte count and the trailer"));
    }
    let trailer = trailer_bytes.and_then(parse_trailer);
    Ok(EmlxFrame { declared_len, message, trailer })
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.len() > hay.len() {
        return None;
    }
    (0..=hay.len() - needle.len()).rev().find(|&i| &hay[i..i + needle.len()] == needle)
}

fn parse_trailer(bytes: &[u8]) -> Option<EmlxTrailer> {
    let value = plist::Value::from_reader_xml(std::io::Cursor::new(bytes)).ok()?;
    let dict = value.as_dictionary()?;
    let int = |k: &str| -> Option<i64> {
        let v = dict.get(k)?;
        v.as_signed_integer()
            .or_else(|| v.as_unsigned_integer().and_then(|u| i64::try_from(u).ok()))
            .or_else(|| v.as_real().map(|r| r as i64))
    };
    let raw_flags = dict
        .get("flags")
        .and_then(|v| {
            v.as_unsigned_integer()
                .or_else(|| v.as_signed_integer().and_then(|i| u64::try_from(i).ok()))
        })
        .unwrap_or(0);
    let flags = Flags {
        seen: raw_flags & 1 != 0,
        deleted: raw_flags & (1 << 1) != 0,
        answered: raw_flags & (1 << 2) != 0,
        flagged: raw_flags & (1 << 4) != 0,
        draft: raw_flags & (1 << 6) != 0,
    };
    let gm_thread_id = ["gm-thread-id", "gm-thrid", "X-GM-THRID"].iter().find_map(|k| {
        let v = dict.get(k)?;
        v.as_string()
            .map(str::to_owned)
            .or_else(|| v.as_unsigned_integer().map(|u| u.to_string()))
            .or_else(|| v.as_signed_integer().map(|i| i.to_string()))
    });
    Some(EmlxTrailer {
        flags,
        raw_flags,
        date_received: int("date-received"),
        remote_id: dict.get("remote-id").and_then(|v| v.as_string()).map(str::to_owned),
        conversation_id: int("conversation-id"),
        gm_thread_id,
    })
}

/// The mailbox of an emlx path: its `*.mbox` ancestors below the root, joined with `/`.
fn mailbox_of(root: &Path, path: &Path) -> MailboxRef {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let parts: Vec<String> = rel
        .components()
        .filter_map(|c| {
            let s = c.as_os_str().to_string_lossy();
            s.strip_suffix(".mbox").map(str::to_owned)
        })
        .collect();
    if parts.is_empty() { MailboxRef::named("INBOX") } else { MailboxRef::named(parts.join("/")) }
}

fn walk(
    dir: &Path,
    root: &Path,
    out: &mut Vec<SourceFile>,
    depth: usize,
) -> Result<(), SourceError> {
    if depth > 32 {
        return Ok(());
    }
    let entries = fs::read_dir(dir).map_err(|e| SourceError::io(dir, &e))?;
    for entry in entries {
        let entry = entry.map_err(|e| SourceError::io(dir, &e))?;
        let Ok(ft) = entry.file_type() else { continue };
        let path = entry.path();
        if ft.is_dir() {
            if entry.file_name() != "Attachments" {
                walk(&path, root, out, depth + 1)?;
            }
        } else if ft.is_file() && path.to_string_lossy().ends_with(".emlx") {
            let Ok(meta) = entry.metadata() else { continue };
            out.push(SourceFile {
                mailbox: mailbox_of(root, &path),
                mtime_ns: mtime_ns(&meta),
                size: meta.len(),
                path,
            });
        }
    }
    Ok(())
}

/// The Apple Mail message number of an emlx path (`12345` for `12345.partial.emlx`).
fn message_number(path: &Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    name.split('.').next().unwrap_or_default().to_owned()
}

fn attachment_bytes(
    msg_path: &Path,
    number: &str,
    part: &str,
    name: Option<&str>,
) -> Option<Vec<u8>> {
    let dir = msg_path.parent()?.parent()?.join("Attachments").join(number).join(part);
    if let Some(n) = name {
        // Mail stores names in NFD on HFS+/APFS; try the name as given, then the only file.
        if let Ok(b) = fs::read(dir.join(n)) {
            return Some(b);
        }
    }
    let mut files = fs::read_dir(&dir).ok()?.filter_map(Result::ok).filter(|e| e.path().is_file());
    let only = files.next()?;
    if files.next().is_some() {
        let wanted = name?;
        let norm = |s: &str| s.chars().filter(|c| c.is_ascii_alphanumeric()).collect::<String>();
        let found = fs::read_dir(&dir)
            .ok()?
            .filter_map(Result::ok)
            .find(|e| norm(&e.file_name().to_string_lossy()) == norm(wanted))?;
        return fs::read(found.path()).ok();
    }
    fs::read(only.path()).ok()
}

impl MailSource for EmlxSource {
    fn format(&self) -> &'static str {
        "emlx"
    }

    fn root(&self) -> &Path {
        &self.root
    }

    fn default_account(&self) -> String {
        self.root
            .file_name()
            .map_or_else(|| "apple-mail".to_owned(), |n| n.to_string_lossy().into_owned())
    }

    fn scan(&self) -> Result<Vec<SourceFile>, SourceError> {
        let meta = fs::metadata(&self.root).map_err(|e| SourceError::io(&self.root, &e))?;
        if !meta.is_dir() {
            return Err(SourceError::WrongFormat {
                path: self.root.clone(),
                expected: "directory of .emlx files",
            });
        }
        let mut out = Vec::new();
        walk(&self.root, &self.root, &mut out, 0)?;
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    fn read(
        &self,
        file: &SourceFile,
        limits: &ParseLimits,
        each: &mut dyn FnMut(ParsedMessage),
    ) -> Result<(), FileError> {
        if file.size > limits.max_message_bytes.saturating_add(1 << 20) {
            return Err(FileError::TooLarge { size: file.size, limit: limits.max_message_bytes });
        }
        let bytes = fs::read(&file.path).map_err(|e| FileError::Io { reason: e.to_string() })?;
        let frame = frame_emlx(&bytes)?;
        let partial = file.path.to_string_lossy().ends_with(".partial.emlx");
        let number = message_number(&file.path);
        let trailer = frame.trailer.clone().unwrap_or_default();
        let ctx = MessageContext {
            source_key: format!("{}/{}", file.mailbox.name, number),
            flags: Some(trailer.flags),
            received_at: trailer.date_received,
            gm_thread_id: trailer.gm_thread_id,
            partial,
            ..MessageContext::default()
        };
        let path = file.path.clone();
        let resolve =
            move |part: &str, name: Option<&str>| attachment_bytes(&path, &number, part, name);
        each(parse_message(frame.message, &ctx, limits, Some(&resolve))?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRAILER: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n<plist version=\"1.0\">\n<dict>\n<key>date-received</key>\n<real>1581000000.5</real>\n<key>flags</key>\n<integer>8623489089</integer>\n</dict>\n</plist>\n";

    #[test]
    fn exact_padded_and_wrong_counts() {
        let msg = "Subject: x\n\nhello\n";
        let exact = format!("{}     \n{msg}{TRAILER}", msg.len());
        let f = frame_emlx(exact.as_bytes()).expect("frames");
        assert_eq!(f.message, msg.as_bytes());
        let t = f.trailer.expect("trailer");
        assert!(t.flags.seen && t.flags.draft && !t.flags.flagged);
        assert_eq!(t.date_received, Some(1_581_000_000));

        let over = format!("{}\n{msg}{TRAILER}", msg.len() + 500);
        assert_eq!(frame_emlx(over.as_bytes()).expect("frames").message, msg.as_bytes());
        let under = format!("{}\n{msg}{TRAILER}", msg.len() - 3);
        assert_eq!(frame_emlx(under.as_bytes()).expect("frames").message, msg.as_bytes());
        let none = format!("{}\n{msg}", msg.len());
        let f = frame_emlx(none.as_bytes()).expect("frames");
        assert!(f.trailer.is_none());
    }

    #[test]
    fn broken_framing_is_a_typed_error() {
        assert!(matches!(frame_emlx(b"Subject: no count\n\nx"), Err(FileError::Framing { .. })));
        assert!(matches!(frame_emlx(b""), Err(FileError::Empty)));
        assert!(matches!(frame_emlx(b"12\n"), Err(FileError::Framing { .. })));
    }

    proptest::proptest! {
        #[test]
        fn framing_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..1024), count in 0usize..2000) {
            let mut framed = format!("{count}   \n").into_bytes();
            framed.extend_from_slice(&bytes);
            framed.extend_from_slice(TRAILER.as_bytes());
            if let Ok(f) = frame_emlx(&framed) {
                proptest::prop_assert!(f.message.len() <= framed.len());
            }
            let _ = frame_emlx(&bytes);
        }
    }
}
