//! Contacts: people as their sources describe them — names, addresses lowercased and trimmed,
//! phones in E.164 where they can be read — merged email-first across sources (every source
//! kept), people harvested from mail headers with how often and how recently you wrote to
//! them, search, and recipient resolution that never guesses ([`resolve`]).

pub mod resolve;
pub mod store;

pub use store::{AccountRead, ContactStore, ContactStoreError, ContactsReport};

pub use resolve::{
    Candidate, DEFAULT_SEARCH_LIMIT, Evidence, MAX_CANDIDATES, MAX_QUERY_CHARS, People,
    PersonWords, Resolution, Status, resolve_recipient, resolve_recipient_among, search_contacts,
    search_people,
};

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{ErrorKind, StewardError};

/// Longest name, nickname, organization or title kept, characters.
/// Fixed (not a setting).
pub const MAX_NAME_CHARS: usize = 200;
/// Most addresses, phones or nicknames kept per contact, each.
/// Fixed (not a setting).
pub const MAX_CONTACT_VALUES: usize = 50;
/// Most sources one merged contact keeps.
/// Fixed (not a setting).
pub const MAX_CONTACT_SOURCES: usize = 100;

/// Why a contacts question could not be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContactsError {
    /// The question is empty or says nothing that can be matched.
    #[error("say who: a name, an address, a nickname or an organization")]
    EmptyQuery,
    /// The question is longer than [`MAX_QUERY_CHARS`].
    #[error("the question is longer than {MAX_QUERY_CHARS} characters")]
    QueryTooLong,
}

impl StewardError for ContactsError {
    fn code(&self) -> &'static str {
        match self {
            Self::EmptyQuery => "CONTACTS_EMPTY_QUERY",
            Self::QueryTooLong => "CONTACTS_QUERY_TOO_LONG",
        }
    }

    fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}

/// Where a contact's data came from.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
pub struct ContactSource {
    /// The source (an address book's id, a file).
    pub source: String,
    /// The card's UID there.
    pub uid: String,
}

/// A person.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Contact {
    /// Steward's id for the person: stable across re-reads (from the lowest address, else the
    /// first source's UID), distinct from any source's own id.
    pub id: String,
    /// The name to show (FN, else the structured name, else the first address).
    pub name: String,
    /// Given name.
    pub given: Option<String>,
    /// Family name.
    pub family: Option<String>,
    /// Nicknames.
    pub nicknames: Vec<String>,
    /// Addresses, normalized ([`normalize_email`]), the preferred one first.
    pub emails: Vec<String>,
    /// The address the card marks as preferred (PREF=1, TYPE=pref), when one is.
    pub preferred_email: Option<String>,
    /// Phones: E.164 (`+390612345678`) where the number can be read, else as written.
    pub phones: Vec<String>,
    /// Organization.
    pub org: Option<String>,
    /// Title or role.
    pub title: Option<String>,
    /// Where it came from.
    pub sources: Vec<ContactSource>,
}

/// Someone seen in mail headers: how often and how recently you wrote to them and they to you.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Correspondent {
    /// Their address, normalized.
    pub email: String,
    /// The name most often shown with it.
    pub name: Option<String>,
    /// Messages you sent them (To, Cc, Bcc).
    pub sent: u32,
    /// Messages they sent you.
    pub received: u32,
    /// When you last wrote to them (RFC 3339).
    pub last_sent: Option<String>,
    /// When they last wrote (RFC 3339).
    pub last_received: Option<String>,
}

/// An address trimmed, without `mailto:` and angle brackets, lowercased — or `None` when it is
/// not an address (no `@`, whitespace inside, an empty side, over 254 bytes).
pub fn normalize_email(raw: &str) -> Option<String> {
    let s = raw.trim().trim_start_matches('<').trim_end_matches('>').trim();
    let s = match s.get(..7) {
        Some(p) if p.eq_ignore_ascii_case("mailto:") => &s[7..],
        _ => s,
    };
    let s = s.trim().to_lowercase();
    let (local, domain) = s.rsplit_once('@')?;
    let ok = !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && s.len() <= 254
        && !s.chars().any(|c| c.is_whitespace() || c.is_control() || c == ',' || c == ';');
    ok.then_some(s)
}

/// A text cut to [`MAX_NAME_CHARS`], trimmed, `None` when empty.
pub fn clean_name(raw: &str) -> Option<String> {
    let t: String = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    let t: String = t.chars().take(MAX_NAME_CHARS).collect();
    (!t.is_empty()).then_some(t)
}

fn digest_id(seed: &str) -> String {
    use sha2::Digest as _;
    let d = sha2::Sha256::digest(seed.as_bytes());
    let hex: String = d.iter().take(10).map(|b| format!("{b:02x}")).collect();
    format!("contact-{hex}")
}

fn push_unique(into: &mut Vec<String>, from: &[String]) {
    for v in from {
        if into.len() >= MAX_CONTACT_VALUES {
            break;
        }
        if !into.contains(v) {
            into.push(v.clone());
        }
    }
}

/// `cards` merged email-first: cards sharing an address (directly or through another card)
/// become one contact that keeps every source, every address and phone, the first card's name
/// fields where it has them; cards without an address stay as they are. Each contact gets its
/// stable [`Contact::id`]. Order: by name, then id.
pub fn merge(cards: Vec<Contact>) -> Vec<Contact> {
    // Union-find over cards, joined by shared addresses.
    let mut parent: Vec<usize> = (0..cards.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut owner: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, c) in cards.iter().enumerate() {
        for e in &c.emails {
            match owner.get(e.as_str()) {
                Some(&j) => {
                    let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                    if a != b {
                        parent[a.max(b)] = a.min(b);
                    }
                }
                None => {
                    owner.insert(e, i);
                }
            }
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..cards.len() {
        let r = root(&mut parent, i);
        groups.entry(r).or_default().push(i);
    }
    let mut out = Vec::with_capacity(groups.len());
    for members in groups.values() {
        let mut m = Contact::default();
        for &i in members {
            let c = &cards[i];
            if m.name.is_empty() {
                m.name.clone_from(&c.name);
            }
            m.given = m.given.take().or_else(|| c.given.clone());
            m.family = m.family.take().or_else(|| c.family.clone());
            m.org = m.org.take().or_else(|| c.org.clone());
            m.title = m.title.take().or_else(|| c.title.clone());
            push_unique(&mut m.nicknames, &c.nicknames);
            push_unique(&mut m.emails, &c.emails);
            push_unique(&mut m.phones, &c.phones);
            for s in &c.sources {
                if m.sources.len() < MAX_CONTACT_SOURCES && !m.sources.contains(s) {
                    m.sources.push(s.clone());
                }
            }
        }
        // A preferred address counts only when every card that names one names the same:
        // one card of a shared book cannot redirect a person's mail by marking its own.
        let prefs: std::collections::BTreeSet<&String> =
            members.iter().filter_map(|&i| cards[i].preferred_email.as_ref()).collect();
        m.preferred_email = match prefs.len() {
            1 => prefs.into_iter().next().cloned(),
            _ => None,
        };
        if let Some(at) =
            m.preferred_email.as_ref().and_then(|p| m.emails.iter().position(|e| e == p))
        {
            let e = m.emails.remove(at);
            m.emails.insert(0, e);
        }
        if m.name.is_empty() {
            m.name = m.emails.first().cloned().unwrap_or_default();
        }
        m.sources.sort();
        let seed = match m.emails.iter().min() {
            Some(e) => format!("email:{e}"),
            None => m.sources.first().map_or_else(
                || format!("name:{}", m.name),
                |s| format!("uid:{}\u{0}{}", s.source, s.uid),
            ),
        };
        m.id = digest_id(&seed);
        out.push(m);
    }
    out.sort_by(|a, b| {
        a.name.to_lowercase().cmp(&b.name.to_lowercase()).then_with(|| a.id.cmp(&b.id))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(source: &str, uid: &str, name: &str, emails: &[&str]) -> Contact {
        Contact {
            name: name.into(),
            emails: emails.iter().filter_map(|e| normalize_email(e)).collect(),
            sources: vec![ContactSource { source: source.into(), uid: uid.into() }],
            ..Contact::default()
        }
    }

    #[test]
    fn addresses_are_normalized_or_refused() {
        assert_eq!(
            normalize_email("  <MAILTO:Anna.Rossi@Polimi.IT> ").as_deref(),
            Some("anna.rossi@polimi.it")
        );
        for bad in
            ["anna", "anna@", "@polimi.it", "anna rossi@polimi.it", "a@b", "a@.it", "a@b.it,c@d.it"]
        {
            assert_eq!(normalize_email(bad), None, "{bad}");
        }
    }

    #[test]
    fn cards_sharing_an_address_merge_across_sources_and_keep_every_source() {
        let a = card("icloud", "1", "Anna Rossi", &["anna@polimi.it"]);
        let mut b = card("google", "x", "", &["ANNA@polimi.it", "anna.rossi@gmail.com"]);
        b.phones = vec!["+393331234567".into()];
        // Joined through b's second address.
        let c = card("local", "z", "A. Rossi", &["anna.rossi@gmail.com"]);
        let d = card("icloud", "2", "Anna Bianchi", &["anna.b@example.org"]);
        let e = card("icloud", "3", "No Mail", &[]);
        let merged = merge(vec![a, b, c, d, e]);
        let names: Vec<&str> = merged.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["Anna Bianchi", "Anna Rossi", "No Mail"]);
        let anna = &merged[1];
        assert_eq!(anna.emails, ["anna@polimi.it", "anna.rossi@gmail.com"]);
        assert_eq!(anna.phones, ["+393331234567"]);
        assert_eq!(anna.sources.len(), 3);
        // The id does not depend on the order the cards came in.
        let again = merge(vec![
            card("local", "z", "A. Rossi", &["anna.rossi@gmail.com"]),
            card("icloud", "1", "Anna Rossi", &["anna@polimi.it"]),
            card("google", "x", "", &["anna@polimi.it", "anna.rossi@gmail.com"]),
        ]);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].id, anna.id);
        assert_ne!(merged[0].id, merged[2].id);
        // Cards that disagree on the preferred address: none is preferred.
        let mut x = card("a", "1", "Boss", &["boss@corp.example"]);
        x.preferred_email = Some("boss@corp.example".into());
        let mut y = card("b", "2", "Boss", &["x@evil.example", "boss@corp.example"]);
        y.preferred_email = Some("x@evil.example".into());
        let m = merge(vec![y, x]);
        assert_eq!((m.len(), m[0].preferred_email.as_deref()), (1, None));
    }
}
