//! vCard (2.1, 3.0, 4.0) texts read into [`Contact`]s with calcard: FN, N, NICKNAME, EMAIL
//! (with PREF / TYPE=pref), TEL, ORG, TITLE, UID. A card that cannot be read is a per-card
//! error with a stable code; the rest of the file is read.

use calcard::vcard::{VCard, VCardParameterName, VCardParameterValue, VCardProperty, VCardValue};
use serde::Serialize;
use steward_core::contacts::{
    Contact, ContactSource, MAX_CONTACT_VALUES, clean_name, normalize_email,
};

use super::phone::{Region, e164};

/// Largest vCard text read, bytes.
/// Fixed (not a setting).
pub const MAX_VCF_BYTES: usize = 32 * 1024 * 1024;
/// Most cards read from one file (the rest are one error).
/// Fixed (not a setting).
pub const MAX_FILE_CARDS: usize = 50_000;
/// Most per-card errors kept from one file.
/// Fixed (not a setting).
pub const MAX_FILE_ERRORS: usize = 100;

/// A card that could not be read, or a value of one that was left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CardError {
    /// Its UID, when it had one.
    pub uid: Option<String>,
    /// A stable code: `VCF_BAD_LINE` (a line the parser skipped), `VCF_NO_NAME` (a card with
    /// no name, address or phone: not read), `VCF_BAD_EMAIL` (an address left out),
    /// `VCF_TOO_MANY_CARDS`.
    pub code: &'static str,
    /// What was wrong.
    pub message: String,
}

/// What one vCard text held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VcfRead {
    /// Its cards, in file order, not merged.
    pub contacts: Vec<Contact>,
    /// What could not be read.
    pub errors: Vec<CardError>,
}

/// Why a whole text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VcfError {
    /// Larger than [`MAX_VCF_BYTES`].
    #[error("larger than {MAX_VCF_BYTES} bytes")]
    TooLarge,
    /// No card in it.
    #[error("not a vCard text: {0}")]
    Invalid(String),
}

impl steward_core::StewardError for VcfError {
    fn code(&self) -> &'static str {
        match self {
            Self::TooLarge => "VCF_TOO_LARGE",
            Self::Invalid(_) => "VCF_INVALID",
        }
    }

    fn kind(&self) -> steward_core::ErrorKind {
        steward_core::ErrorKind::InvalidInput
    }
}

fn texts(card: &VCard, p: &VCardProperty) -> Vec<String> {
    card.properties(p)
        .flat_map(|e| e.values.iter().filter_map(value_text))
        .filter_map(|t| clean_name(&t))
        .take(MAX_CONTACT_VALUES)
        .collect()
}

fn value_text(v: &VCardValue) -> Option<String> {
    match v {
        VCardValue::Text(t) => Some(t.clone()),
        VCardValue::Component(parts) => Some(parts.join(" ")),
        _ => None,
    }
}

fn preferred(e: &calcard::vcard::VCardEntry) -> bool {
    e.params.iter().any(|p| match (&p.name, &p.value) {
        (VCardParameterName::Pref, VCardParameterValue::Integer(1)) => true,
        (VCardParameterName::Pref, VCardParameterValue::Text(t)) => t.trim() == "1",
        (VCardParameterName::Type, VCardParameterValue::Text(t)) => t.eq_ignore_ascii_case("pref"),
        _ => false,
    })
}

fn contact(
    card: &VCard,
    source: &str,
    region: Option<Region>,
    errors: &mut Vec<CardError>,
) -> Option<Contact> {
    let uid = card
        .uid()
        .map(|u| u.trim().chars().take(500).collect::<String>())
        .filter(|u| !u.is_empty());
    // N: family; given; additional; prefixes; suffixes (RFC 6350 §6.2.2).
    let n: Vec<Vec<String>> = card
        .property(&VCardProperty::N)
        .map(|e| {
            e.values
                .iter()
                .map(|v| match v {
                    VCardValue::Component(parts) => parts.clone(),
                    VCardValue::Text(t) => vec![t.clone()],
                    _ => Vec::new(),
                })
                .collect()
        })
        .unwrap_or_default();
    let part = |i: usize| n.get(i).and_then(|p| clean_name(&p.join(" ")));
    let (family, given) = (part(0), part(1));
    let mut emails = Vec::new();
    let mut preferred_email = None;
    for e in card.properties(&VCardProperty::Email) {
        for t in e.values.iter().filter_map(value_text) {
            match normalize_email(&t) {
                Some(a) if emails.len() < MAX_CONTACT_VALUES => {
                    if preferred(e) && preferred_email.is_none() {
                        preferred_email = Some(a.clone());
                    }
                    if !emails.contains(&a) {
                        emails.push(a);
                    }
                }
                Some(_) => {}
                None if !t.trim().is_empty() => errors.push(CardError {
                    uid: uid.clone(),
                    code: "VCF_BAD_EMAIL",
                    message: format!(
                        "{:?} is not an address: left out",
                        t.chars().take(100).collect::<String>()
                    ),
                }),
                None => {}
            }
        }
    }
    let mut phones = Vec::new();
    for t in
        card.properties(&VCardProperty::Tel).flat_map(|e| e.values.iter().filter_map(value_text))
    {
        let fresh = e164(&t, region).filter(|p| !phones.contains(p));
        if let Some(p) = fresh.filter(|_| phones.len() < MAX_CONTACT_VALUES) {
            phones.push(p);
        }
    }
    let full = texts(card, &VCardProperty::Fn).into_iter().next();
    let structured = clean_name(
        &[given.clone(), family.clone()].into_iter().flatten().collect::<Vec<_>>().join(" "),
    );
    let name =
        full.or(structured).or_else(|| emails.first().cloned()).or_else(|| phones.first().cloned());
    let Some(name) = name else {
        errors.push(CardError {
            uid,
            code: "VCF_NO_NAME",
            message: "a card with no name, address or phone".to_owned(),
        });
        return None;
    };
    let nicknames = texts(card, &VCardProperty::Nickname)
        .iter()
        .flat_map(|n| n.split(',').filter_map(clean_name).collect::<Vec<_>>())
        .take(MAX_CONTACT_VALUES)
        .collect();
    let org = card.property(&VCardProperty::Org).and_then(|e| {
        clean_name(
            &e.values
                .iter()
                .filter_map(value_text)
                .filter(|s| !s.trim().is_empty())
                .collect::<Vec<_>>()
                .join(", "),
        )
    });
    let title = texts(card, &VCardProperty::Title).into_iter().next();
    let uid_for_source = uid.unwrap_or_else(|| format!("{name}\u{0}{}", emails.join(",")));
    Some(Contact {
        id: String::new(),
        name,
        given,
        family,
        nicknames,
        emails,
        preferred_email,
        phones,
        org,
        title,
        sources: vec![ContactSource { source: source.to_owned(), uid: uid_for_source }],
    })
}

/// Reads `text`, each card's source named `source`; `region` reads phones without a country
/// code.
pub fn read_vcf(text: &str, source: &str, region: Option<Region>) -> Result<VcfRead, VcfError> {
    if text.len() > MAX_VCF_BYTES {
        return Err(VcfError::TooLarge);
    }
    let mut parser = calcard::Parser::new(text);
    let mut out = VcfRead::default();
    let mut errors = Vec::new();
    let mut cards = 0usize;
    let mut first_bad = None;
    // Each entry moves the parser on; the bound keeps a hostile text from looping long.
    for _ in 0..=(MAX_FILE_CARDS + 10 * MAX_FILE_ERRORS) {
        match parser.entry() {
            calcard::Entry::VCard(card) => {
                cards += 1;
                if cards > MAX_FILE_CARDS {
                    errors.push(CardError {
                        uid: None,
                        code: "VCF_TOO_MANY_CARDS",
                        message: format!("only the first {MAX_FILE_CARDS} cards are read"),
                    });
                    break;
                }
                if let Some(c) = contact(&card, source, region, &mut errors) {
                    out.contacts.push(c);
                }
            }
            calcard::Entry::Eof => break,
            calcard::Entry::TooManyComponents => {
                errors.push(CardError {
                    uid: None,
                    code: "VCF_BAD_LINE",
                    message: "too many components".to_owned(),
                });
                break;
            }
            // An iCalendar object in an address book is not a card.
            other => {
                let why: String = format!("{other:?}").chars().take(200).collect();
                first_bad.get_or_insert_with(|| why.clone());
                errors.push(CardError { uid: None, code: "VCF_BAD_LINE", message: why });
            }
        }
    }
    if cards == 0 {
        return Err(VcfError::Invalid(first_bad.unwrap_or_else(|| "no BEGIN:VCARD".to_owned())));
    }
    errors.truncate(MAX_FILE_ERRORS);
    out.errors = errors;
    Ok(out)
}
