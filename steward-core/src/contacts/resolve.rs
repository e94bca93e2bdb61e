//! Recipient resolution and contact search.
//!
//! `resolve_recipient("Anna from Polimi")` answers `resolved` only when exactly one address
//! fits everything the question says: an address written out, or one person whose name,
//! nickname, organization or address covers every word of the question and who has one
//! address to write to (the preferred one, or the only one). Two people who fit, one person
//! with two addresses and none preferred, or people who fit only part of the question are
//! `ambiguous`: the candidates are ranked (how much of the question they cover, then how
//! often and how recently you wrote to them) with the evidence for each, and the choice is the
//! person's. How often you wrote to someone is evidence, never the decision.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Contact, ContactsError, Correspondent, normalize_email};
use crate::index::fold::fold;

/// Longest question read, characters.
/// Fixed (not a setting).
pub const MAX_QUERY_CHARS: usize = 200;
/// People a contact search returns when the question does not say.
/// Fixed (not a setting).
pub const DEFAULT_SEARCH_LIMIT: usize = 10;
/// Most candidates returned.
/// Fixed (not a setting).
pub const MAX_CANDIDATES: usize = 10;
/// Most addresses of one person offered as candidates.
/// Fixed (not a setting).
const MAX_ADDRESSES_PER_PERSON: usize = 5;

/// Words that say nothing about who (English and Italian).
const STOPWORDS: &[&str] = &[
    "a", "an", "the", "of", "from", "at", "in", "to", "for", "with", "and", "my", "our", "mail",
    "email", "write", "send", "da", "di", "del", "della", "dello", "dei", "delle", "dal", "dalla",
    "il", "lo", "la", "le", "gli", "i", "un", "una", "uno", "mio", "mia", "miei", "mie", "e",
    "con", "per", "al", "alla", "scrivi", "manda",
];

/// The outcome of a resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// One address fits; it is the first candidate.
    Resolved,
    /// More than one address fits, or none fits all of the question: the person chooses.
    Ambiguous,
    /// Nobody fits.
    NotFound,
}

/// Why a candidate is offered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Evidence {
    /// The question is this address.
    ExactEmail,
    /// A word of the question is the person's given or family name, or a word of it.
    Name {
        /// The word.
        word: String,
    },
    /// A word of the question is one of their nicknames.
    Nickname {
        /// The word.
        word: String,
    },
    /// A word of the question is in their organization or title.
    Organization {
        /// The word.
        word: String,
    },
    /// A word of the question is a part of the address (`polimi` of `anna@polimi.it`).
    Address {
        /// The word.
        word: String,
    },
    /// You wrote to this address.
    YouWrote {
        /// How many messages.
        count: u32,
        /// When last (RFC 3339).
        last: Option<String>,
    },
    /// This address wrote to you.
    TheyWrote {
        /// How many messages.
        count: u32,
        /// When last (RFC 3339).
        last: Option<String>,
    },
    /// The address is not in the address book (seen in mail, or written out).
    NotInContacts,
}

/// One address that may be meant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Candidate {
    /// The person's name.
    pub name: String,
    /// The address.
    pub email: String,
    /// The contact's id, when the person is in the address book.
    pub contact_id: Option<String>,
    /// How many of the question's words they fit.
    pub covers: usize,
    /// Of how many.
    pub of: usize,
    /// Why.
    pub evidence: Vec<Evidence>,
}

/// A resolution's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Resolution {
    /// Resolved, ambiguous or not found.
    pub status: Status,
    /// The candidates, best first (at most [`MAX_CANDIDATES`]); when resolved, the first is the
    /// answer.
    pub candidates: Vec<Candidate>,
}

/// The question's words, folded, without stopwords.
fn words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = fold(text)
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && !STOPWORDS.contains(w))
        .map(str::to_owned)
        .collect();
    out.dedup();
    out
}

fn field_words(text: &str) -> Vec<String> {
    fold(text)
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A person's words, folded, by what they say of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PersonWords {
    names: Vec<String>,
    nicks: Vec<String>,
    orgs: Vec<String>,
    /// Local parts of the addresses (they say who).
    local: Vec<String>,
    /// Domains of the addresses (they say only where, like an organization).
    domain: Vec<String>,
    /// The name, folded (for prefix search).
    name: String,
}

impl PersonWords {
    /// The words of `c`.
    pub fn of(c: &Contact) -> Self {
        let mut names: Vec<String> = field_words(&c.name);
        for n in c.given.iter().chain(c.family.iter()) {
            names.extend(field_words(n));
        }
        Self {
            names,
            nicks: c.nicknames.iter().flat_map(|n| field_words(n)).collect(),
            orgs: c.org.iter().chain(c.title.iter()).flat_map(|o| field_words(o)).collect(),
            local: c
                .emails
                .iter()
                .flat_map(|e| field_words(e.rsplit_once('@').map_or(e, |(l, _)| l)))
                .collect(),
            domain: c
                .emails
                .iter()
                .filter_map(|e| e.rsplit_once('@'))
                .flat_map(|(_, d)| field_words(d))
                .collect(),
            name: fold(&c.name),
        }
    }
}

/// The people of the address book with their words worked out once (a store keeps this while
/// the book does not change), for [`resolve_recipient_among`] and [`search_people`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct People {
    /// Every person, by name.
    pub contacts: Vec<Contact>,
    words: Vec<PersonWords>,
}

impl People {
    /// `contacts` with their words.
    pub fn new(contacts: Vec<Contact>) -> Self {
        let words = contacts.iter().map(PersonWords::of).collect();
        Self { contacts, words }
    }

    fn iter(&self) -> impl Iterator<Item = (&Contact, &PersonWords)> {
        self.contacts.iter().zip(self.words.iter())
    }
}

/// What of `person` each query word matches: the evidence, and whether it says who (a name,
/// nickname or address word — an organization alone does not).
fn matches(p: &PersonWords, query: &[String]) -> (Vec<Evidence>, usize, bool) {
    let PersonWords { names, nicks, orgs, local, domain, .. } = p;
    let (mut ev, mut covered, mut who) = (Vec::new(), 0, false);
    for w in query {
        let word = w.clone();
        if names.contains(w) {
            ev.push(Evidence::Name { word });
            who = true;
        } else if nicks.contains(w) {
            ev.push(Evidence::Nickname { word });
            who = true;
        } else if orgs.contains(w) {
            ev.push(Evidence::Organization { word });
        } else if local.contains(w) {
            ev.push(Evidence::Address { word });
            who = true;
        } else if domain.contains(w) {
            ev.push(Evidence::Address { word });
        } else {
            continue;
        }
        covered += 1;
    }
    (ev, covered, who)
}

fn mail_evidence(
    email: &str,
    mail: &BTreeMap<&str, &Correspondent>,
) -> (Vec<Evidence>, u32, String) {
    let Some(k) = mail.get(email) else { return (Vec::new(), 0, String::new()) };
    let mut ev = Vec::new();
    if k.sent > 0 {
        ev.push(Evidence::YouWrote { count: k.sent, last: k.last_sent.clone() });
    }
    if k.received > 0 {
        ev.push(Evidence::TheyWrote { count: k.received, last: k.last_received.clone() });
    }
    (ev, k.sent, k.last_sent.clone().unwrap_or_default())
}

/// Resolves `text` to one address, or says it cannot: see the module's rules. `contacts` are
/// the merged address book, `mail` the people harvested from mail headers (people there but
/// not in the address book are candidates too, marked [`Evidence::NotInContacts`]).
pub fn resolve_recipient(
    text: &str,
    contacts: &[Contact],
    mail: &[Correspondent],
) -> Result<Resolution, ContactsError> {
    resolve_recipient_among(text, &People::new(contacts.to_vec()), mail)
}

/// [`resolve_recipient`] over people whose words are worked out already.
pub fn resolve_recipient_among(
    text: &str,
    people: &People,
    mail: &[Correspondent],
) -> Result<Resolution, ContactsError> {
    let contacts = people.contacts.as_slice();
    if text.chars().count() > MAX_QUERY_CHARS {
        return Err(ContactsError::QueryTooLong);
    }
    let by_email: BTreeMap<&str, &Correspondent> =
        mail.iter().map(|k| (k.email.as_str(), k)).collect();
    // An address written out is the answer, whoever it belongs to.
    if let Some(email) = normalize_email(text) {
        let person = contacts.iter().find(|c| c.emails.contains(&email));
        let (mut evidence, _, _) = mail_evidence(&email, &by_email);
        evidence.insert(0, Evidence::ExactEmail);
        if person.is_none() {
            evidence.push(Evidence::NotInContacts);
        }
        let name = person
            .map(|c| c.name.clone())
            .or_else(|| by_email.get(email.as_str()).and_then(|k| k.name.clone()))
            .unwrap_or_else(|| email.clone());
        return Ok(Resolution {
            status: Status::Resolved,
            candidates: vec![Candidate {
                name,
                email,
                contact_id: person.map(|c| c.id.clone()),
                covers: 1,
                of: 1,
                evidence,
            }],
        });
    }
    let query = words(text);
    if query.is_empty() {
        return Err(ContactsError::EmptyQuery);
    }
    // People: the address book, then correspondents it does not hold.
    let known: std::collections::HashSet<&str> = if mail.is_empty() {
        std::collections::HashSet::new()
    } else {
        contacts.iter().flat_map(|c| c.emails.iter().map(String::as_str)).collect()
    };
    let harvested: Vec<Contact> = mail
        .iter()
        .filter(|k| !known.contains(k.email.as_str()))
        .map(|k| Contact {
            name: k.name.clone().unwrap_or_else(|| k.email.clone()),
            emails: vec![k.email.clone()],
            ..Contact::default()
        })
        .collect();
    // Each address that may be meant, light (for ranking); the evidence is written out for the
    // candidates returned only.
    struct Fit<'a> {
        covers: usize,
        sent: u32,
        last: &'a str,
        email: &'a str,
        person: &'a Contact,
        words: &'a PersonWords,
        in_book: bool,
    }
    let mut found: Vec<Fit<'_>> = Vec::new();
    let mut fitting_people = 0usize;
    // Whether the one person who fits is someone the person knows: in the address book, or
    // written to. Someone who only wrote in (a stranger, a spammer naming himself after a
    // colleague) is never the answer on their own say-so.
    let mut fitting_known = false;
    let harvested_words: Vec<PersonWords> = harvested.iter().map(PersonWords::of).collect();
    for ((c, w), in_book) in people
        .iter()
        .map(|p| (p, true))
        .chain(harvested.iter().zip(harvested_words.iter()).map(|p| (p, false)))
    {
        let (_, covers, who) = matches(w, &query);
        if !who || c.emails.is_empty() {
            continue;
        }
        if covers == query.len() {
            fitting_people += 1;
            fitting_known = in_book
                || c.emails.iter().any(|e| by_email.get(e.as_str()).is_some_and(|k| k.sent > 0));
        }
        let addresses: Vec<&String> = match &c.preferred_email {
            Some(p) => vec![p],
            None => c.emails.iter().take(MAX_ADDRESSES_PER_PERSON).collect(),
        };
        for email in addresses {
            let k = by_email.get(email.as_str());
            found.push(Fit {
                covers,
                sent: k.map_or(0, |k| k.sent),
                last: k.and_then(|k| k.last_sent.as_deref()).unwrap_or_default(),
                email,
                person: c,
                words: w,
                in_book,
            });
        }
    }
    found.sort_by(|a, b| {
        b.covers
            .cmp(&a.covers)
            .then(b.sent.cmp(&a.sent))
            .then(b.last.cmp(a.last))
            .then(a.email.cmp(b.email))
    });
    let full = found.iter().filter(|f| f.covers == query.len()).count();
    let status = match (found.is_empty(), full, fitting_people) {
        (true, _, _) => Status::NotFound,
        (false, 1, 1) if fitting_known => Status::Resolved,
        _ => Status::Ambiguous,
    };
    let candidates = found
        .into_iter()
        .take(MAX_CANDIDATES)
        .map(|f| {
            let (mut evidence, _, _) = mail_evidence(f.email, &by_email);
            evidence.splice(0..0, matches(f.words, &query).0);
            if !f.in_book {
                evidence.push(Evidence::NotInContacts);
            }
            Candidate {
                name: f.person.name.clone(),
                email: f.email.to_owned(),
                contact_id: f.in_book.then(|| f.person.id.clone()),
                covers: f.covers,
                of: query.len(),
                evidence,
            }
        })
        .collect();
    Ok(Resolution { status, candidates })
}

/// The contacts that fit `text` best (names, nicknames, organization, title, addresses, and
/// phones by their digits), at most `limit` (≤ [`MAX_CANDIDATES`] × 5).
pub fn search_contacts(
    text: &str,
    contacts: &[Contact],
    limit: usize,
) -> Result<Vec<Contact>, ContactsError> {
    search_people(text, &People::new(contacts.to_vec()), limit)
}

/// [`search_contacts`] over people whose words are worked out already.
pub fn search_people(
    text: &str,
    people: &People,
    limit: usize,
) -> Result<Vec<Contact>, ContactsError> {
    if text.chars().count() > MAX_QUERY_CHARS {
        return Err(ContactsError::QueryTooLong);
    }
    let limit = limit.clamp(1, MAX_CANDIDATES * 5);
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    let query = words(text);
    if query.is_empty() && digits.len() < 5 {
        return Err(ContactsError::EmptyQuery);
    }
    let folded = fold(text.trim());
    let mut scored: Vec<(usize, &Contact)> = people
        .iter()
        .filter_map(|(c, w)| {
            let (_, covers, _) = matches(w, &query);
            let phone = digits.len() >= 5
                && c.phones.iter().any(|p| {
                    p.chars().filter(char::is_ascii_digit).collect::<String>().ends_with(&digits)
                });
            let prefix = folded.chars().count() >= 3
                && (w.name.starts_with(&folded) || c.emails.iter().any(|e| e.starts_with(&folded)));
            let score = covers * 2 + usize::from(phone) * 3 + usize::from(prefix);
            (score > 0).then_some((score, c))
        })
        .collect();
    scored.sort_by(|(a, ca), (b, cb)| b.cmp(a).then_with(|| ca.name.cmp(&cb.name)));
    Ok(scored.into_iter().take(limit).map(|(_, c)| c.clone()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contacts::{ContactSource, merge};

    fn person(name: &str, org: Option<&str>, emails: &[&str]) -> Contact {
        let mut parts = name.split(' ');
        Contact {
            name: name.into(),
            given: parts.next().map(str::to_owned),
            family: parts.next().map(str::to_owned),
            org: org.map(str::to_owned),
            emails: emails.iter().map(|e| (*e).to_owned()).collect(),
            sources: vec![ContactSource { source: "book".into(), uid: name.into() }],
            ..Contact::default()
        }
    }

    fn book() -> Vec<Contact> {
        let mut nick = person("Giuseppe Verdi", None, &["beppe@example.org"]);
        nick.nicknames = vec!["Beppe".into()];
        let mut two = person("Marco Neri", None, &["marco@work.example", "marco@home.example"]);
        two.phones = vec!["+390612345678".into()];
        merge(vec![
            person("Anna Rossi", Some("Politecnico di Milano"), &["anna.rossi@polimi.it"]),
            person("Anna Bianchi", Some("Scuola Manzoni"), &["anna.bianchi@example.org"]),
            person("Luca Bruno", Some("Scuola Manzoni"), &["luca@example.org"]),
            nick,
            two,
        ])
    }

    fn mail() -> Vec<Correspondent> {
        vec![
            Correspondent {
                email: "anna.bianchi@example.org".into(),
                sent: 40,
                last_sent: Some("2026-11-30T10:00:00+01:00".into()),
                ..Correspondent::default()
            },
            Correspondent {
                email: "anna.verdi@studio.example".into(),
                name: Some("Anna Verdi".into()),
                received: 3,
                ..Correspondent::default()
            },
        ]
    }

    fn emails(r: &Resolution) -> Vec<&str> {
        r.candidates.iter().map(|c| c.email.as_str()).collect()
    }

    #[test]
    fn a_question_that_fits_one_address_resolves_and_anything_less_is_the_persons_choice() {
        let (book, mail) = (book(), mail());
        // The organization's words pick one Anna.
        let r = resolve_recipient("Anna from Polimi", &book, &mail).unwrap();
        assert_eq!((r.status, emails(&r)[0]), (Status::Resolved, "anna.rossi@polimi.it"));
        let r = resolve_recipient("Anna della scuola Manzoni", &book, &mail).unwrap();
        assert_eq!((r.status, emails(&r)[0]), (Status::Resolved, "anna.bianchi@example.org"));
        // Three Annas: ambiguous, however often I wrote to one of them (ranked first, not picked).
        let r = resolve_recipient("Anna", &book, &mail).unwrap();
        assert_eq!(r.status, Status::Ambiguous);
        assert_eq!(emails(&r)[0], "anna.bianchi@example.org");
        assert_eq!(r.candidates.len(), 3);
        assert!(r.candidates.iter().any(|c| c.evidence.contains(&Evidence::NotInContacts)));
        assert!(matches!(
            r.candidates[0].evidence.last(),
            Some(Evidence::YouWrote { count: 40, .. })
        ));
        // One person with two addresses and none preferred: the person chooses.
        let r = resolve_recipient("Marco Neri", &book, &mail).unwrap();
        assert_eq!((r.status, r.candidates.len()), (Status::Ambiguous, 2));
        // A nickname; an address written out (known or not); an organization alone says who
        // only with a name.
        let r = resolve_recipient("mail Beppe", &book, &mail).unwrap();
        assert_eq!((r.status, emails(&r)[0]), (Status::Resolved, "beppe@example.org"));
        let r = resolve_recipient("<New.Person@Example.com>", &book, &mail).unwrap();
        assert_eq!(r.status, Status::Resolved);
        assert_eq!(r.candidates[0].evidence, [Evidence::ExactEmail, Evidence::NotInContacts]);
        let r = resolve_recipient("scuola Manzoni", &book, &mail).unwrap();
        assert_eq!(r.status, Status::NotFound);
        // Someone who only wrote in is never the answer alone (a spammer can name himself).
        let r = resolve_recipient("Anna Verdi", &book, &mail).unwrap();
        assert_eq!((r.status, emails(&r)[0]), (Status::Ambiguous, "anna.verdi@studio.example"));
        // A domain word says where, never who: "example" alone names nobody.
        assert_eq!(resolve_recipient("example", &book, &mail).unwrap().status, Status::NotFound);
        // Part of the question fits: ambiguous, never resolved.
        let r = resolve_recipient("Anna Rossi from Manzoni", &book, &mail).unwrap();
        assert_eq!(r.status, Status::Ambiguous);
        assert_eq!(resolve_recipient("Zorro", &book, &mail).unwrap().status, Status::NotFound);
        assert_eq!(resolve_recipient("  the  ", &book, &mail), Err(ContactsError::EmptyQuery));
        assert_eq!(
            resolve_recipient(&"x".repeat(201), &book, &mail),
            Err(ContactsError::QueryTooLong)
        );
    }

    #[test]
    fn search_finds_by_name_prefix_organization_and_phone_digits() {
        let book = book();
        let names = |q: &str| -> Vec<String> {
            search_contacts(q, &book, 10).unwrap().iter().map(|c| c.name.clone()).collect()
        };
        assert_eq!(names("manzoni"), ["Anna Bianchi", "Luca Bruno"]);
        assert_eq!(names("06 1234 5678"), ["Marco Neri"]);
        assert_eq!(names("Giu"), ["Giuseppe Verdi"]);
        assert!(names("Zorro").is_empty());
    }
}
