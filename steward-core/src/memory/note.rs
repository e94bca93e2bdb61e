//! The note file: YAML frontmatter between two `---` lines, then the fact in markdown. A
//! person can open one in any editor (Obsidian reads the frontmatter as properties); Steward
//! reads back what it wrote and what the person changed.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::MemoryError;

/// Longest fact (the note's body), characters.
/// Fixed (not a setting).
pub const MAX_NOTE_CHARS: usize = 4_000;
/// Longest subject (`person:anna@example.org`), characters.
/// Fixed (not a setting).
pub const MAX_SUBJECT_CHARS: usize = 200;
/// Longest quote of a source, characters.
/// Fixed (not a setting).
pub const MAX_QUOTE_CHARS: usize = 500;
/// Most sources one note names (more are dropped, oldest kept).
/// Fixed (not a setting).
pub const MAX_SOURCES: usize = 20;
/// Most notes one note supersedes.
/// Fixed (not a setting).
pub const MAX_SUPERSEDES: usize = 20;
/// Largest note file read, bytes (a larger file is reported, not read).
/// Fixed (not a setting).
pub const MAX_NOTE_FILE_BYTES: u64 = 64 * 1024;

/// What a note is about.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    /// Something true about the world or the person.
    Fact,
    /// How the person likes things done.
    Preference,
    /// Who someone is to the person.
    Person,
    /// Something someone promised to do.
    Commitment,
    /// A piece of work with its decisions.
    Project,
    /// A place that matters to the person.
    Place,
}

impl MemoryKind {
    /// Every kind, in order.
    pub const ALL: [Self; 6] =
        [Self::Fact, Self::Preference, Self::Person, Self::Commitment, Self::Project, Self::Place];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fact => "fact",
            Self::Preference => "preference",
            Self::Person => "person",
            Self::Commitment => "commitment",
            Self::Project => "project",
            Self::Place => "place",
        }
    }

    /// The kind of a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// How careful a model must be with a note.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Sensitivity {
    /// Public or trivial.
    Low,
    /// Personal.
    #[default]
    Normal,
    /// Private: mail, money, other people's details.
    High,
    /// Health, identity documents, secrets.
    Critical,
}

/// Where a note's fact came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum MemorySource {
    /// A mail, by its RFC Message-ID, with the words that say it.
    Mail {
        /// The Message-ID (without angle brackets).
        message_id: String,
        /// The words of the mail that say it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        quote: Option<String>,
    },
    /// A chat with the agent.
    Chat {
        /// The chat's id.
        chat: String,
    },
    /// A document, by the fingerprint `docs.info` gives, and its page.
    Document {
        /// The document's fingerprint.
        fingerprint: String,
        /// The page (1-based).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        page: Option<u32>,
    },
    /// The person said it (typed it, edited the file).
    Person,
    /// A markdown file imported with `steward memory import`.
    Import {
        /// The file imported.
        path: String,
    },
}

impl MemorySource {
    /// The key a forget follows to the proposals derived from the same source: a mail, a
    /// document's page. A chat or an imported file holds many unrelated facts, so forgetting
    /// one of them does not take the others.
    pub fn derived_key(&self) -> Option<String> {
        match self {
            Self::Mail { message_id, .. } => Some(format!("mail:{message_id}")),
            Self::Document { fingerprint, page } => {
                Some(format!("document:{fingerprint}:{}", page.unwrap_or(0)))
            }
            Self::Chat { .. } | Self::Person | Self::Import { .. } => None,
        }
    }
}

/// What a person decided about a note.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReviewDecision {
    /// Accepted as proposed.
    Accepted,
    /// Accepted with the person's changes.
    Edited,
    /// Written by the agent through `memory.write`, which the person approved.
    Approved,
    /// Written or changed by the person in the file itself.
    Written,
}

/// Who admitted a note into memory, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Review {
    /// The person.
    pub by: String,
    /// When.
    pub at: DateTime<Utc>,
    /// What they decided.
    pub decision: ReviewDecision,
}

/// A note's frontmatter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoteMeta {
    /// Stable id (`m` and 12 letters or digits).
    pub id: String,
    /// What it is about.
    pub kind: MemoryKind,
    /// Whom or what it is about (`person:anna@example.org`, `project:roof`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Since when it is true in the world.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<DateTime<Utc>>,
    /// Until when it is true in the world.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<DateTime<Utc>>,
    /// When Steward learned it (proposed it, or the person wrote it).
    pub created: DateTime<Utc>,
    /// When a newer note replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_at: Option<DateTime<Utc>>,
    /// The note that replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// From when the note that replaced it holds in the world (its `valid_from`, else the
    /// moment it was accepted): until then this note still answers. Its own `valid_to` stays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced_from: Option<DateTime<Utc>>,
    /// How sure the proposer was, 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f32>,
    /// Where it came from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<MemorySource>,
    /// Who proposed it (`agent:<name>`, `memory-promoter`, `import`, a person).
    pub proposed_by: String,
    /// Who admitted it; absent on a proposal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<Review>,
    /// The notes it replaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supersedes: Vec<String>,
    /// How careful a model must be with it.
    #[serde(default)]
    pub sensitivity: Sensitivity,
}

/// A note: its frontmatter and its fact.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Note {
    /// The frontmatter.
    pub meta: NoteMeta,
    /// The fact, in markdown.
    pub body: String,
}

/// A text parsed into frontmatter and body.
pub(crate) enum Parsed {
    /// A note with frontmatter.
    Note(Box<Note>),
    /// Markdown without frontmatter (a person's own file): its body.
    Plain(String),
}

/// Splits `text` into frontmatter and body and reads the frontmatter.
pub(crate) fn parse(text: &str) -> Result<Parsed, MemoryError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n")) else {
        return Ok(Parsed::Plain(text.trim().to_owned()));
    };
    let mut yaml_end = None;
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            yaml_end = Some((at, at + line.len()));
            break;
        }
        at += line.len();
    }
    let (end, body_start) = yaml_end
        .ok_or_else(|| MemoryError::BadNote("the frontmatter has no closing ---".to_owned()))?;
    let meta: NoteMeta = serde_norway::from_str(&rest[..end])
        .map_err(|e| MemoryError::BadNote(format!("frontmatter: {e}")))?;
    let body = rest[body_start..].trim().to_owned();
    let note = Note { meta, body };
    check(&note)?;
    Ok(Parsed::Note(Box::new(note)))
}

/// The file text of `note`.
pub(crate) fn render(note: &Note) -> Result<String, MemoryError> {
    let yaml = serde_norway::to_string(&note.meta)
        .map_err(|e| MemoryError::BadNote(format!("frontmatter: {e}")))?;
    Ok(format!("---\n{yaml}---\n\n{}\n", note.body.trim()))
}

/// Checks a note's fields against the bounds and forms.
pub(crate) fn check(note: &Note) -> Result<(), MemoryError> {
    let m = &note.meta;
    if !valid_id(&m.id) {
        return Err(MemoryError::BadNote(format!("id {:?}: m and 12 letters or digits", m.id)));
    }
    let chars = note.body.chars().count();
    if note.body.trim().is_empty() {
        return Err(MemoryError::BadNote("the fact is empty".to_owned()));
    }
    if chars > MAX_NOTE_CHARS {
        return Err(MemoryError::BadNote(format!(
            "the fact has {chars} characters; at most {MAX_NOTE_CHARS}"
        )));
    }
    if let Some(s) = &m.subject {
        check_subject(s)?;
    }
    if let Some(c) = m.confidence
        && !(0.0..=1.0).contains(&c)
    {
        return Err(MemoryError::BadNote(format!("confidence {c}: 0 to 1")));
    }
    if let (Some(from), Some(to)) = (m.valid_from, m.valid_to)
        && to < from
    {
        return Err(MemoryError::BadNote("valid_to is before valid_from".to_owned()));
    }
    if m.sources.len() > MAX_SOURCES {
        return Err(MemoryError::BadNote(format!("more than {MAX_SOURCES} sources")));
    }
    for s in &m.sources {
        check_source(s)?;
    }
    if m.supersedes.len() > MAX_SUPERSEDES || m.supersedes.iter().any(|id| !valid_id(id)) {
        return Err(MemoryError::BadNote(format!("supersedes: at most {MAX_SUPERSEDES} note ids")));
    }
    if m.proposed_by.trim().is_empty() || m.proposed_by.chars().count() > 200 {
        return Err(MemoryError::BadNote("proposed_by: 1 to 200 characters".to_owned()));
    }
    Ok(())
}

/// A subject is `<type>:<value>`, lowercase type, no control characters.
pub(crate) fn check_subject(s: &str) -> Result<(), MemoryError> {
    let bad = || {
        MemoryError::BadNote(format!(
            "subject {s:?}: <type>:<value> such as person:anna@example.org, at most \
             {MAX_SUBJECT_CHARS} characters"
        ))
    };
    let (kind, value) = s.split_once(':').ok_or_else(bad)?;
    if kind.is_empty()
        || !kind.chars().all(|c| c.is_ascii_lowercase() || c == '-' || c == '_')
        || value.trim().is_empty()
        || s.chars().count() > MAX_SUBJECT_CHARS
        || s.chars().any(char::is_control)
    {
        return Err(bad());
    }
    Ok(())
}

fn check_source(s: &MemorySource) -> Result<(), MemoryError> {
    let short = |v: &str, what: &str| {
        if v.trim().is_empty() || v.chars().count() > 500 || v.chars().any(char::is_control) {
            Err(MemoryError::BadNote(format!("source {what}: 1 to 500 characters")))
        } else {
            Ok(())
        }
    };
    match s {
        MemorySource::Mail { message_id, quote } => {
            short(message_id, "message_id")?;
            if let Some(q) = quote
                && q.chars().count() > MAX_QUOTE_CHARS
            {
                return Err(MemoryError::BadNote(format!(
                    "a quote has at most {MAX_QUOTE_CHARS} characters"
                )));
            }
            Ok(())
        }
        MemorySource::Chat { chat } => short(chat, "chat"),
        MemorySource::Document { fingerprint, .. } => short(fingerprint, "fingerprint"),
        MemorySource::Import { path } => short(path, "path"),
        MemorySource::Person => Ok(()),
    }
}

/// Whether `id` is a note id: `m` and 12 lowercase letters or digits.
pub fn valid_id(id: &str) -> bool {
    id.len() == 13
        && id.starts_with('m')
        && id[1..].chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// A new note id.
pub(crate) fn new_id() -> Result<String, MemoryError> {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut raw = [0u8; 12];
    getrandom::fill(&mut raw).map_err(|e| MemoryError::Io(format!("random id: {e}")))?;
    let tail: String = raw.iter().map(|b| char::from(ALPHABET[usize::from(b & 31)])).collect();
    Ok(format!("m{tail}"))
}

/// The words of `text` as a tombstone compares them: compatibility form, lowercase, every run
/// of other characters one space (punctuation, markdown and spacing do not make a new fact).
pub(crate) fn normalized(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization as _;
    let folded: String = text.nfkc().flat_map(char::to_lowercase).collect();
    folded
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The hash a tombstone keeps of a fact: SHA-256 of its subject and its normalized words. The
/// kind is left out: the same words filed as another kind are the same fact.
pub fn content_hash(subject: Option<&str>, body: &str) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(normalized(subject.unwrap_or("")).as_bytes());
    h.update(b"\n");
    h.update(normalized(body).as_bytes());
    hex(&h.finalize())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// A file name for a note: the first words of its fact (ASCII letters and digits), then its id.
pub(crate) fn file_name(id: &str, body: &str) -> String {
    let mut slug = String::new();
    for w in normalized(body).split(' ') {
        let w: String = w.chars().filter(char::is_ascii_alphanumeric).collect();
        if w.is_empty() {
            continue;
        }
        if slug.len() + w.len() + 1 > 40 {
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(&w);
    }
    if slug.is_empty() { format!("{id}.md") } else { format!("{slug}-{id}.md") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note() -> Note {
        Note {
            meta: NoteMeta {
                id: "mabcdefghij23".to_owned(),
                kind: MemoryKind::Person,
                subject: Some("person:anna@example.org".to_owned()),
                valid_from: None,
                valid_to: None,
                created: DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default(),
                superseded_at: None,
                superseded_by: None,
                replaced_from: None,
                confidence: Some(0.75),
                sources: vec![MemorySource::Mail {
                    message_id: "a@b".to_owned(),
                    quote: Some("Anna: \"my birthday\"\n---\nis 3 May".to_owned()),
                }],
                proposed_by: "agent:assistant".to_owned(),
                review: None,
                supersedes: vec![],
                sensitivity: Sensitivity::Normal,
            },
            body: "Anna's birthday is on 3 May.\n\n---\nnot frontmatter".to_owned(),
        }
    }

    #[test]
    fn a_note_reads_back_as_written_even_with_rulers_in_its_text() {
        let n = note();
        let text = render(&n).unwrap();
        let Parsed::Note(back) = parse(&text).unwrap() else { panic!("no frontmatter read") };
        assert_eq!(*back, n);
    }

    #[test]
    fn markdown_without_frontmatter_is_plain_and_bad_frontmatter_is_an_error() {
        assert!(
            matches!(parse("# Groceries\nmilk").unwrap(), Parsed::Plain(b) if b.starts_with("# Groceries"))
        );
        assert!(parse("---\nid: x\n").is_err(), "no closing ruler");
        assert!(parse("---\nid: mabcdefghij23\nkind: rumour\n---\nx").is_err(), "unknown kind");
        assert!(parse("---\nid: ../../etc\nkind: fact\ncreated: 2026-01-01T00:00:00Z\nproposed_by: me\n---\nx").is_err());
    }

    #[test]
    fn the_same_words_hash_the_same_whatever_the_punctuation_or_case() {
        let a = content_hash(Some("person:anna@example.org"), "Anna's birthday is on 3 May.");
        let b = content_hash(Some("person:Anna@example.org"), "  anna’s **birthday** is on 3 may ");
        assert_eq!(a, b);
        assert_ne!(
            a,
            content_hash(Some("person:anna@example.org"), "Anna's birthday is on 4 May.")
        );
        assert_ne!(a, content_hash(None, "Anna's birthday is on 3 May."));
    }

    #[test]
    fn file_names_hold_only_ascii_words_and_the_id() {
        assert_eq!(
            file_name("mabcdefghij23", "Anna's birthday: 3 May (../../etc)"),
            "anna-s-birthday-3-may-etc-mabcdefghij23.md"
        );
        assert_eq!(file_name("mabcdefghij23", "日本"), "mabcdefghij23.md");
    }
}
