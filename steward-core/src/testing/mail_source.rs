//! The [`MailSource`] contract.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

use super::no_panic;
use crate::{
    ErrorKind, Limits, StewardError,
    mirror::{FileError, MailSource, ParseLimits, ParsedMessage, SourceFile},
};

/// What a fixture store holds, for [`mail_source_contract`].
#[derive(Debug, Clone)]
pub struct MailSourceExpectations {
    /// What [`MailSource::format`] says.
    pub format: &'static str,
    /// How many files `scan` lists.
    pub files: usize,
    /// How many messages the files that read cleanly hand over, in total.
    pub messages: usize,
    /// Files that `scan` must list although they are damaged (it does not parse), and the
    /// error code their read must fail with: the path relative to the root, `/`-separated
    /// (`""` when the root is the file itself).
    pub failing: Vec<(String, &'static str)>,
    /// A directory outside the root for the damaged copies the suite writes (created).
    pub scratch: PathBuf,
    /// How many listed files (besides the failing ones, in path order) get damaged copies:
    /// empty, truncated at several points, garbage, garbage after a real beginning.
    pub damaged_files: usize,
    /// The bounds reads run with.
    pub limits: ParseLimits,
}

impl MailSourceExpectations {
    /// `files` files holding `messages` readable messages, none failing, damaged copies of up
    /// to eight files written under `scratch`, default limits.
    pub fn new(
        format: &'static str,
        files: usize,
        messages: usize,
        scratch: impl Into<PathBuf>,
    ) -> Self {
        Self {
            format,
            files,
            messages,
            failing: Vec::new(),
            scratch: scratch.into(),
            damaged_files: 8,
            limits: ParseLimits::from(&Limits::default()),
        }
    }

    /// Adds a listed file whose read fails with `code`.
    #[must_use]
    pub fn failing(mut self, relative: &str, code: &'static str) -> Self {
        self.failing.push((relative.to_owned(), code));
        self
    }
}

/// `path` relative to `root`, `/`-separated (`""` for the root itself).
fn relative(root: &Path, path: &Path) -> String {
    match path.strip_prefix(root) {
        Ok(rel) => rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/"),
        Err(_) => path.display().to_string(),
    }
}

fn sorted(mut files: Vec<SourceFile>) -> Vec<SourceFile> {
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}

type ReadResult = Result<Vec<ParsedMessage>, FileError>;

/// Reads one file, collecting what it hands over; a panic fails the contract.
fn read(source: &dyn MailSource, file: &SourceFile, limits: &ParseLimits) -> ReadResult {
    let what = format!("read of {}", file.path.display());
    no_panic(&what, || {
        let mut out = Vec::new();
        source.read(file, limits, &mut |m| out.push(m)).map(|()| out)
    })
}

/// What every message a read hands over must satisfy, whatever the file held.
fn check_messages(file: &SourceFile, messages: &[ParsedMessage], limits: &ParseLimits) {
    let at = file.path.display();
    let mut last: Option<(u32, u64)> = None;
    for m in messages {
        assert!(!m.source_key.is_empty(), "{at}: a message without a source key");
        assert!(m.size > 0, "{at}: a message of 0 bytes");
        assert!(
            m.offset.saturating_add(m.size) <= file.size,
            "{at}: message at {} of {} bytes runs past the file's {} bytes",
            m.offset,
            m.size,
            file.size
        );
        if let Some((ordinal, offset)) = last {
            assert!(m.ordinal > ordinal, "{at}: ordinals must increase in hand-over order");
            assert!(m.offset >= offset, "{at}: offsets must not go back in hand-over order");
        }
        last = Some((m.ordinal, m.offset));
        assert!(
            m.body_text.chars().count() <= limits.max_body_chars,
            "{at}: body above max_body_chars"
        );
        for (field, list) in [("from", &m.from), ("to", &m.to), ("cc", &m.cc), ("bcc", &m.bcc)] {
            assert!(
                list.len() <= limits.max_addresses_per_field,
                "{at}: {field} holds {} addresses, above the limit",
                list.len()
            );
        }
        assert!(m.references.len() <= limits.max_references, "{at}: references above the limit");
        assert!(m.in_reply_to.len() <= limits.max_references, "{at}: in_reply_to above the limit");
        assert!(m.attachments.len() <= limits.max_attachments, "{at}: attachments above the limit");
        for a in &m.attachments {
            assert!(!a.mime_type.is_empty(), "{at}: an attachment without a MIME type");
            if let Some(bytes) = &a.bytes {
                assert_eq!(bytes.len() as u64, a.size, "{at}: an attachment's size is its bytes'");
            }
        }
    }
}

/// Deterministic bytes that are no mail in any format: a NUL first, control characters,
/// never a `From ` line or a byte count.
fn garbage(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x9E37_79B9;
    let mut out = Vec::with_capacity(len);
    out.push(0);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let high: u8 = if out.len().is_multiple_of(3) { 0x80 } else { 0 };
        out.push(((x >> 24) as u8 & 0x1F) | high);
    }
    out
}

/// Writes `bytes` as a copy of `file` (same name, same mailbox) under `dir`.
fn damaged_copy(file: &SourceFile, dir: &Path, bytes: &[u8]) -> SourceFile {
    std::fs::create_dir_all(dir)
        .unwrap_or_else(|e| panic!("cannot create the scratch dir {}: {e}", dir.display()));
    let name = file.path.file_name().map_or_else(|| "copy".into(), |n| n.to_os_string());
    let path = dir.join(name);
    std::fs::write(&path, bytes)
        .unwrap_or_else(|e| panic!("cannot write the damaged copy {}: {e}", path.display()));
    SourceFile {
        path,
        mailbox: file.mailbox.clone(),
        mtime_ns: file.mtime_ns,
        size: bytes.len() as u64,
    }
}

/// Checks `source` against the [`MailSource`] contract over a fixture store:
///
/// - `format()` is the expected one, `default_account()` is not empty;
/// - `scan` lists exactly the expected files, with absolute paths under `root()`, the sizes on
///   disk and a mailbox each, no path twice; two scans of an unchanged store list the same
///   files with the same mtimes and sizes (stable keys), and so does a scan after every read
///   (reads change nothing); damaged files are listed all the same (a scan does not parse);
/// - each listed file reads into messages (at least one), or into the expected typed per-file
///   error; the clean files hold the expected number of messages; every message has a source
///   key, lies inside its file, comes in ordinal order and respects the parse limits;
/// - reading again, and reading from two threads at once in opposite orders, hands over the
///   same messages (the sync engine reads from several threads);
/// - damaged copies of the files never panic: an empty file is `MAIL_FILE_EMPTY`, garbage is an
///   error, a truncated file is messages or a typed error.
///
/// # Panics
/// Naming the clause the source breaks.
pub fn mail_source_contract(source: &dyn MailSource, expect: &MailSourceExpectations) {
    let limits = &expect.limits;
    assert_eq!(source.format(), expect.format, "format()");
    assert!(!source.default_account().trim().is_empty(), "default_account() must not be empty");
    let root = source.root().to_path_buf();
    assert!(
        !expect.scratch.starts_with(&root),
        "the scratch dir must be outside the store's root (the suite writes there)"
    );

    let scan = || -> Vec<SourceFile> {
        let files = no_panic("scan", || source.scan())
            .unwrap_or_else(|e| panic!("scan of {} failed: {e} ({})", root.display(), e.code()));
        sorted(files)
    };
    let files = scan();
    assert_eq!(scan(), files, "two scans of an unchanged store must list the same files");
    assert_eq!(files.len(), expect.files, "files listed by scan: {files:#?}");
    let mut seen = BTreeSet::new();
    for f in &files {
        let at = f.path.display();
        assert!(seen.insert(f.path.clone()), "{at} listed twice");
        assert!(f.path.is_absolute(), "{at}: listed paths must be absolute");
        assert!(f.path.starts_with(&root), "{at}: listed outside the root {}", root.display());
        let meta = std::fs::metadata(&f.path).unwrap_or_else(|e| panic!("{at}: listed but {e}"));
        assert!(meta.is_file(), "{at}: listed but not a file");
        assert_eq!(f.size, meta.len(), "{at}: the listed size is the size on disk");
        assert!(!f.mailbox.name.is_empty(), "{at}: listed without a mailbox name");
    }
    let relatives: Vec<String> = files.iter().map(|f| relative(&root, &f.path)).collect();
    for (rel, _) in &expect.failing {
        assert!(
            relatives.contains(rel),
            "scan must list the damaged file {rel:?} (it lists without parsing; the read \
             reports the damage): listed {relatives:?}"
        );
    }

    // Every listed file: messages, or the expected typed error.
    let mut results: Vec<ReadResult> = Vec::with_capacity(files.len());
    let mut total = 0;
    for (f, rel) in files.iter().zip(&relatives) {
        let got = read(source, f, limits);
        let want = expect.failing.iter().find(|(r, _)| r == rel).map(|(_, code)| *code);
        match (&got, want) {
            (Ok(messages), None) => {
                assert!(!messages.is_empty(), "{rel}: a clean file read into no message");
                check_messages(f, messages, limits);
                total += messages.len();
            }
            (Err(e), Some(code)) => {
                assert_eq!(e.code(), code, "{rel}: the read's error ({e})");
                assert!(
                    matches!(e.kind(), ErrorKind::InvalidInput | ErrorKind::Unavailable),
                    "{rel}: a per-file error is invalid input or unavailable"
                );
            }
            (Ok(m), Some(code)) => {
                panic!("{rel}: must fail with {code}, read into {} message(s)", m.len())
            }
            (Err(e), None) => panic!("{rel}: must read, failed with {} ({e})", e.code()),
        }
        results.push(got);
    }
    assert_eq!(total, expect.messages, "messages read from the clean files");

    // The same again, and from two threads at once.
    for (f, first) in files.iter().zip(&results) {
        assert_eq!(&read(source, f, limits), first, "{}: a second read differs", f.path.display());
    }
    let (forward, backward) = std::thread::scope(|s| {
        let forward = s.spawn(|| files.iter().map(|f| read(source, f, limits)).collect::<Vec<_>>());
        let backward =
            s.spawn(|| files.iter().rev().map(|f| read(source, f, limits)).collect::<Vec<_>>());
        (
            forward.join().unwrap_or_else(|_| panic!("a concurrent read panicked")),
            backward.join().unwrap_or_else(|_| panic!("a concurrent read panicked")),
        )
    });
    assert!(forward == results, "reads from two threads at once differ from one thread's");
    assert!(
        backward.into_iter().rev().eq(results.iter().cloned()),
        "reads in reverse order from another thread differ"
    );
    assert_eq!(scan(), files, "reading must not change what scan lists");

    // Damaged copies of the failing files and of the first `damaged_files` others.
    let mut victims: Vec<&SourceFile> = files
        .iter()
        .zip(&relatives)
        .filter(|(_, rel)| expect.failing.iter().any(|(r, _)| r == *rel))
        .map(|(f, _)| f)
        .collect();
    victims.extend(
        files
            .iter()
            .zip(&relatives)
            .filter(|(_, rel)| !expect.failing.iter().any(|(r, _)| r == *rel))
            .map(|(f, _)| f)
            .take(expect.damaged_files),
    );
    for (i, f) in victims.into_iter().enumerate() {
        let bytes = std::fs::read(&f.path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", f.path.display()));
        let dir = expect.scratch.join(format!("damaged-{i}"));
        let empty = damaged_copy(f, &dir.join("empty"), b"");
        match read(source, &empty, limits) {
            Err(e) => {
                assert_eq!(e.code(), "MAIL_FILE_EMPTY", "an empty copy of {}", f.path.display())
            }
            Ok(m) => {
                panic!("an empty copy of {} read into {} message(s)", f.path.display(), m.len())
            }
        }
        let junk = damaged_copy(f, &dir.join("garbage"), &garbage(4_096));
        if let Ok(m) = read(source, &junk, limits) {
            panic!("garbage named like {} read into {} message(s)", f.path.display(), m.len());
        }
        let len = bytes.len();
        let cuts: BTreeSet<usize> =
            [len / 2, len / 8, len.min(16), len.saturating_sub(1)].into_iter().collect();
        for (k, cut) in cuts.into_iter().enumerate() {
            let copy = damaged_copy(f, &dir.join(format!("cut-{k}")), &bytes[..cut]);
            if let Ok(messages) = read(source, &copy, limits) {
                check_messages(&copy, &messages, limits);
            }
        }
        let mut spliced = bytes[..len.min(64)].to_vec();
        spliced.extend_from_slice(&garbage(4_096));
        let copy = damaged_copy(f, &dir.join("spliced"), &spliced);
        if let Ok(messages) = read(source, &copy, limits) {
            check_messages(&copy, &messages, limits);
        }
    }
}

/// Checks that a source whose root does not exist says so: `scan` is `MAIL_SOURCE_NOT_FOUND`
/// (kind `not_found`), not a panic and not an empty list.
///
/// # Panics
/// When it does not.
pub fn missing_root_contract(source: &dyn MailSource) {
    assert!(!source.root().exists(), "give a source over a root that does not exist");
    match no_panic("scan of a missing root", || source.scan()) {
        Err(e) => {
            assert_eq!(e.code(), "MAIL_SOURCE_NOT_FOUND", "{e}");
            assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
        }
        Ok(files) => panic!("a missing root scanned into {} file(s)", files.len()),
    }
}
