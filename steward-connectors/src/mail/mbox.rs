//! mbox files: messages separated by `From ` lines (at the start of the file or after a blank
//! line). `>From ` quoting is undone per flavour: mboxrd removes one `>` from any `>+From ` line;
//! mboxo leaves bodies as written (its quoting is not reversible).

use std::{
    fs,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
};

use steward_core::mirror::{
    FileError, MailSource, MailboxRef, ParseLimits, ParsedMessage, SourceError, SourceFile,
};

use super::{
    maildir::mtime_ns,
    mime::{MessageContext, parse_message},
};

/// How `From ` lines inside bodies were quoted when the file was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MboxFlavor {
    /// `>From ` → `From `, `>>From ` → `>From ` (mutt, Thunderbird, Gmail takeout).
    #[default]
    Mboxrd,
    /// Bodies are kept as written (Python's `mailbox`, old Unix mail).
    Mboxo,
}

/// One mbox file, or a directory of them (each file a mailbox).
#[derive(Debug, Clone)]
pub struct MboxSource {
    root: PathBuf,
    flavor: MboxFlavor,
}

impl MboxSource {
    /// A source reading `path` (a file, or a directory of mbox files).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { root: path.into(), flavor: MboxFlavor::default() }
    }

    /// Sets the quoting flavour.
    #[must_use]
    pub fn flavor(mut self, flavor: MboxFlavor) -> Self {
        self.flavor = flavor;
        self
    }
}

/// One message cut out of an mbox stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MboxMessage {
    /// Byte offset of its `From ` line.
    pub offset: u64,
    /// The `From ` line, without the line end.
    pub from_line: String,
    /// The message bytes, unquoted per flavour.
    pub bytes: Vec<u8>,
}

fn unquote(line: &[u8], flavor: MboxFlavor) -> &[u8] {
    if flavor == MboxFlavor::Mboxrd && line.first() == Some(&b'>') {
        let gts = line.iter().take_while(|&&b| b == b'>').count();
        if line[gts..].starts_with(b"From ") {
            return &line[1..];
        }
    }
    line
}

/// Splits an mbox stream into messages, calling `each` for every one. A message larger than
/// `max_bytes` is passed with its bytes cut at the limit and `truncated` set.
pub fn split_mbox<R: BufRead>(
    mut reader: R,
    flavor: MboxFlavor,
    max_bytes: u64,
    mut each: impl FnMut(MboxMessage, bool),
) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(256);
    let mut offset = 0u64;
    let mut current: Option<(MboxMessage, bool)> = None;
    let mut prev_blank = true;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        let at = offset;
        offset += n as u64;
        if prev_blank && line.starts_with(b"From ") {
            if let Some((mut m, t)) = current.take() {
                trim_separator(&mut m.bytes);
                each(m, t);
            }
            let text = String::from_utf8_lossy(&line);
            current = Some((
                MboxMessage {
                    offset: at,
                    from_line: text.trim_end().to_owned(),
                    bytes: Vec::new(),
                },
                false,
            ));
            prev_blank = false;
            continue;
        }
        prev_blank = line.iter().all(|b| *b == b'\n' || *b == b'\r');
        if let Some((m, truncated)) = current.as_mut() {
            if *truncated {
                continue;
            }
            let piece = unquote(&line, flavor);
            if (m.bytes.len() + piece.len()) as u64 > max_bytes {
                *truncated = true;
                continue;
            }
            m.bytes.extend_from_slice(piece);
        }
    }
    if let Some((mut m, t)) = current.take() {
        trim_separator(&mut m.bytes);
        each(m, t);
    }
    Ok(())
}

/// Removes the blank line that separates a message from the next `From ` line.
fn trim_separator(bytes: &mut Vec<u8>) {
    if bytes.ends_with(b"\r\n\r\n") {
        bytes.truncate(bytes.len() - 2);
    } else if bytes.ends_with(b"\n\n") {
        bytes.truncate(bytes.len() - 1);
    }
}

fn looks_like_mbox(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 5];
    fs::File::open(path).and_then(|mut f| f.read_exact(&mut head)).is_ok_and(|()| &head == b"From ")
}

fn mailbox_of(path: &Path) -> MailboxRef {
    let stem =
        path.file_stem().map_or_else(|| "INBOX".to_owned(), |s| s.to_string_lossy().into_owned());
    if stem.eq_ignore_ascii_case("inbox") || stem.eq_ignore_ascii_case("mbox") {
        MailboxRef::named("INBOX")
    } else {
        MailboxRef::named(stem)
    }
}

impl MailSource for MboxSource {
    fn format(&self) -> &'static str {
        "mbox"
    }

    fn root(&self) -> &Path {
        &self.root
    }

    fn default_account(&self) -> String {
        self.root
            .file_stem()
            .map_or_else(|| "mbox".to_owned(), |n| n.to_string_lossy().into_owned())
    }

    fn scan(&self) -> Result<Vec<SourceFile>, SourceError> {
        let meta = fs::metadata(&self.root).map_err(|e| SourceError::io(&self.root, &e))?;
        let mut files = Vec::new();
        if meta.is_file() {
            files.push((self.root.clone(), meta));
        } else {
            let entries = fs::read_dir(&self.root).map_err(|e| SourceError::io(&self.root, &e))?;
            for entry in entries {
                let entry = entry.map_err(|e| SourceError::io(&self.root, &e))?;
                let path = entry.path();
                if let Ok(m) = entry.metadata()
                    && m.is_file()
                    && looks_like_mbox(&path)
                {
                    files.push((path, m));
                }
            }
            files.sort_by(|a, b| a.0.cmp(&b.0));
        }
        Ok(files
            .into_iter()
            .map(|(path, m)| SourceFile {
                mailbox: mailbox_of(&path),
                mtime_ns: mtime_ns(&m),
                size: m.len(),
                path,
            })
            .collect())
    }

    fn read(
        &self,
        file: &SourceFile,
        limits: &ParseLimits,
        each: &mut dyn FnMut(ParsedMessage),
    ) -> Result<(), FileError> {
        if file.size == 0 {
            return Err(FileError::Empty);
        }
        let f = fs::File::open(&file.path).map_err(|e| FileError::Io { reason: e.to_string() })?;
        let mut reader = BufReader::with_capacity(1 << 16, f);
        {
            let head = reader.fill_buf().map_err(|e| FileError::Io { reason: e.to_string() })?;
            if !head.starts_with(b"From ") {
                return Err(FileError::Framing {
                    format: "mbox",
                    reason: "the file does not start with a From_ line".to_owned(),
                });
            }
        }
        let mut ordinal = 0u32;
        let path = file.path.to_string_lossy().into_owned();
        split_mbox(reader, self.flavor, limits.max_message_bytes, |m, truncated| {
            let this = ordinal;
            ordinal = ordinal.saturating_add(1);
            if truncated {
                tracing::warn!(path, offset = m.offset, "mbox message above the size limit skipped");
                return;
            }
            // An empty key makes the adapter use the content hash it computes anyway.
            let ctx = MessageContext { ordinal: this, offset: m.offset, ..MessageContext::default() };
            match parse_message(&m.bytes, &ctx, limits, None) {
                Ok(p) => each(p),
                // One bad message inside an mbox does not hide the others.
                Err(e) => tracing::warn!(path, offset = m.offset, code = %steward_core::StewardError::code(&e), "mbox message skipped: {e}"),
            }
        })
        .map_err(|e| FileError::Io { reason: e.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str, flavor: MboxFlavor) -> Vec<MboxMessage> {
        let mut out = Vec::new();
        split_mbox(text.as_bytes(), flavor, u64::MAX, |m, _| out.push(m)).expect("in memory");
        out
    }

    #[test]
    fn splits_on_from_lines_after_blank_lines_only() {
        let text = "From a Mon Jan 1 00:00:00 2024\nSubject: one\n\nbody\nFrom here, not a separator\n\nFrom b Tue Jan 2 00:00:00 2024\nSubject: two\n\nx\n";
        let m = split(text, MboxFlavor::Mboxrd);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].bytes, b"Subject: one\n\nbody\nFrom here, not a separator\n");
        assert_eq!(m[1].offset, text.find("From b").unwrap() as u64);
        assert_eq!(m[1].bytes, b"Subject: two\n\nx\n");
    }

    #[test]
    fn flavours_unquote_differently() {
        let text =
            "From a Mon Jan 1 00:00:00 2024\nSubject: q\n\n>From one\n>>From two\n>Fromage\n";
        let rd = split(text, MboxFlavor::Mboxrd);
        assert_eq!(rd[0].bytes, b"Subject: q\n\nFrom one\n>From two\n>Fromage\n");
        let o = split(text, MboxFlavor::Mboxo);
        assert_eq!(o[0].bytes, b"Subject: q\n\n>From one\n>>From two\n>Fromage\n");
    }

    proptest::proptest! {
        #[test]
        fn splitting_never_panics_and_keeps_offsets_ordered(text in "(From x\n|\n|>From y\n|Subject: s\n|body\n){0,40}") {
            for flavor in [MboxFlavor::Mboxrd, MboxFlavor::Mboxo] {
                let mut last = None;
                split_mbox(text.as_bytes(), flavor, 64, |m, _| {
                    assert!((m.offset as usize) < text.len().max(1));
                    assert!(last.is_none_or(|l| m.offset > l));
                    last = Some(m.offset);
                }).expect("in memory");
            }
        }
    }
}
