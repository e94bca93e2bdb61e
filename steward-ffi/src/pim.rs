//! Calendars and contacts: the launcher feeds its own stores (EventKit, Contacts) through a
//! callback interface, and asks the agenda, free/busy, event search, contact search and
//! recipient resolution. Times cross as text: `YYYY-MM-DD` (midnight in the person's zone) or
//! RFC 3339 in, RFC 3339 with offset out.

use steward_connectors::{
    contacts::phone::parse_region,
    launcher::{FedCollection, FedItem, FedKind, FedTag, LauncherFeed},
    pim::{PimFrom, index_books, index_calendars},
};
use steward_core::calendar::{instant_in, store::EventQuery};

use crate::{FfiError, Steward};

/// The launcher's calendars and address books, read with Apple's frameworks. `kind` is
/// `calendars` (items are iCalendar text: a VCALENDAR with the event and its overrides) or
/// `contacts` (items are vCard text, e.g. `CNContactVCardSerialization`).
#[uniffi::export(callback_interface)]
pub trait LauncherPim: Send + Sync {
    /// The collections of `kind` the app can read now (none: access not granted).
    fn collections(&self, kind: String) -> Vec<PimCollection>;
    /// Every item of `collection` with a tag that changes whenever the item does.
    fn tags(&self, kind: String, collection: String) -> Vec<PimTag>;
    /// The text of the items `ids` of `collection` (at most 200 asked at once).
    fn items(&self, kind: String, collection: String, ids: Vec<String>) -> Vec<PimItem>;
}

/// A calendar or address book of the launcher.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct PimCollection {
    /// Its stable id.
    pub id: String,
    /// Its name for people.
    pub name: Option<String>,
    /// Its color (`#rrggbb`).
    pub color: Option<String>,
}

/// An item's id and change tag.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct PimTag {
    /// Its stable id in the collection.
    pub id: String,
    /// Changes whenever the item does (a last-modified date).
    pub tag: String,
}

/// An item's text.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct PimItem {
    /// Its id in the collection.
    pub id: String,
    /// Its change tag.
    pub tag: String,
    /// iCalendar or vCard text.
    pub text: String,
}

/// Something of a source that could not be read (the rest was).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct PimProblem {
    /// Where (`launcher:calendars/<calendar>/<item>`).
    pub place: String,
    /// A stable code.
    pub code: String,
    /// What was wrong.
    pub message: String,
}

/// What indexing the launcher's calendars changed.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct CalendarIndexReport {
    /// Calendars seen.
    pub calendars: u64,
    /// Items new, changed, gone, unchanged (not read).
    pub added: u64,
    /// Items changed.
    pub changed: u64,
    /// Items gone.
    pub removed: u64,
    /// Items unchanged.
    pub unchanged: u64,
    /// Live events of the account after the run.
    pub events: u64,
    /// What could not be read.
    pub problems: Vec<PimProblem>,
}

/// What indexing the launcher's address books changed.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ContactsIndexReport {
    /// Cards read now.
    pub cards: u64,
    /// Cards new.
    pub added: u64,
    /// Cards changed.
    pub changed: u64,
    /// Cards gone.
    pub removed: u64,
    /// People after merging every account.
    pub people: u64,
    /// Books left unread: nothing in them changed.
    pub unchanged_books: Vec<String>,
    /// What could not be read.
    pub problems: Vec<PimProblem>,
}

/// One occurrence on the agenda.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct AgendaOccurrence {
    /// The calendar (`account/collection`).
    pub calendar: String,
    /// The event's UID.
    pub uid: String,
    /// The occurrence's original start, for a recurring event.
    pub recurrence_id: Option<String>,
    /// What it is.
    pub summary: String,
    /// Where.
    pub location: Option<String>,
    /// RFC 3339 with offset.
    pub start: String,
    /// RFC 3339 with offset.
    pub end: String,
    /// Whether it takes whole days.
    pub all_day: bool,
    /// `tentative`, `confirmed` or `cancelled`.
    pub status: Option<String>,
    /// Whether it leaves the time free.
    pub transparent: bool,
}

fn occurrence(calendar: String, i: steward_core::calendar::AgendaItem) -> AgendaOccurrence {
    AgendaOccurrence {
        calendar,
        uid: i.uid,
        recurrence_id: i.recurrence_id,
        summary: i.summary,
        location: i.location,
        start: i.start.to_rfc3339(),
        end: i.end.to_rfc3339(),
        all_day: i.all_day,
        status: i.status,
        transparent: i.transparent,
    }
}

/// A span of time.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct TimeSpan {
    /// RFC 3339 with offset.
    pub start: String,
    /// RFC 3339 with offset.
    pub end: String,
}

/// Busy time and free slots.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct FreeBusyReport {
    /// The busy occurrences' spans, by start.
    pub busy: Vec<TimeSpan>,
    /// The free slots in working hours, by start.
    pub free: Vec<TimeSpan>,
}

/// An event found.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct EventFound {
    /// Steward's id for the event.
    pub id: String,
    /// Its first occurrence in the window.
    pub first: AgendaOccurrence,
    /// More occurrences in the window.
    pub more_occurrences: u64,
}

/// A person of the address books.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Person {
    /// Steward's id for the person.
    pub id: String,
    /// The name to show.
    pub name: String,
    /// Addresses, the preferred one first.
    pub emails: Vec<String>,
    /// Phones (E.164 where they can be read).
    pub phones: Vec<String>,
    /// Organization.
    pub org: Option<String>,
}

impl From<steward_core::contacts::Contact> for Person {
    fn from(c: steward_core::contacts::Contact) -> Self {
        Self { id: c.id, name: c.name, emails: c.emails, phones: c.phones, org: c.org }
    }
}

/// One address that may be meant, with why.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RecipientCandidate {
    /// The person's name.
    pub name: String,
    /// The address.
    pub email: String,
    /// The person's id, when in the address book.
    pub contact_id: Option<String>,
    /// How many of the question's words they fit, of how many.
    pub covers: u64,
    /// Of how many.
    pub of: u64,
    /// Why (`name:anna`, `organization:polimi`, `you_wrote:3`, `not_in_contacts`, …).
    pub evidence: Vec<String>,
}

/// Who a text means.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RecipientResolution {
    /// `resolved` (the first candidate is the answer), `ambiguous` (the person chooses) or
    /// `not_found`.
    pub status: String,
    /// Best first.
    pub candidates: Vec<RecipientCandidate>,
}

fn evidence(e: &steward_core::contacts::Evidence) -> String {
    use steward_core::contacts::Evidence as E;
    match e {
        E::ExactEmail => "exact_email".to_owned(),
        E::Name { word } => format!("name:{word}"),
        E::Nickname { word } => format!("nickname:{word}"),
        E::Organization { word } => format!("organization:{word}"),
        E::Address { word } => format!("address:{word}"),
        E::YouWrote { count, .. } => format!("you_wrote:{count}"),
        E::TheyWrote { count, .. } => format!("they_wrote:{count}"),
        E::NotInContacts => "not_in_contacts".to_owned(),
    }
}

fn problems(errors: &[steward_connectors::SourceError]) -> Vec<PimProblem> {
    errors
        .iter()
        .map(|e| PimProblem {
            place: e.path.to_string_lossy().into_owned(),
            code: e.code.to_owned(),
            message: e.message.clone(),
        })
        .collect()
}

/// The callback interface as the connectors' feed.
struct Feed<'a>(&'a dyn LauncherPim);

fn kind_name(kind: FedKind) -> String {
    match kind {
        FedKind::Calendars => "calendars".to_owned(),
        FedKind::Contacts => "contacts".to_owned(),
    }
}

impl LauncherFeed for Feed<'_> {
    fn collections(&self, kind: FedKind) -> Vec<FedCollection> {
        self.0
            .collections(kind_name(kind))
            .into_iter()
            .map(|c| FedCollection { id: c.id, name: c.name, color: c.color })
            .collect()
    }

    fn tags(&self, kind: FedKind, collection: &str) -> Vec<FedTag> {
        self.0
            .tags(kind_name(kind), collection.to_owned())
            .into_iter()
            .map(|t| FedTag { id: t.id, tag: t.tag })
            .collect()
    }

    fn items(&self, kind: FedKind, collection: &str, ids: &[String]) -> Vec<FedItem> {
        self.0
            .items(kind_name(kind), collection.to_owned(), ids.to_vec())
            .into_iter()
            .map(|i| FedItem { id: i.id, tag: i.tag, text: i.text })
            .collect()
    }
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

impl Steward {
    fn window(
        &self,
        from: &str,
        to: &str,
    ) -> Result<(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>), FfiError> {
        let zone = self.inner().calendar_settings().zone;
        let at = |t: &str| instant_in(t, zone).map_err(|e| FfiError::from_core(&e));
        Ok((at(from)?, at(to)?))
    }
}

#[uniffi::export]
impl Steward {
    /// Mirrors the launcher's calendars into `calendar.db` under `account`: only items whose
    /// tag changed are asked for; items no longer listed are removed.
    pub fn index_launcher_calendars(
        &self,
        account: String,
        source: Box<dyn LauncherPim>,
    ) -> Result<CalendarIndexReport, FfiError> {
        let feed = Feed(source.as_ref());
        let (r, errors) = index_calendars(self.inner(), &account, PimFrom::Launcher(&feed))
            .map_err(|e| FfiError::from_core(&e))?;
        Ok(CalendarIndexReport {
            calendars: count(r.calendars),
            added: count(r.added),
            changed: count(r.changed),
            removed: count(r.removed),
            unchanged: count(r.unchanged),
            events: count(r.events),
            problems: problems(&errors),
        })
    }

    /// Mirrors the launcher's address books into `contacts.db` under `account` (`region`: an
    /// ISO 3166 code for phones written without a country code); a book whose tags did not
    /// change is not asked for. Fails (`LAUNCHER_NOTHING_LISTED`, …) when nothing could be
    /// read, and then changes nothing.
    pub fn index_launcher_contacts(
        &self,
        account: String,
        region: Option<String>,
        source: Box<dyn LauncherPim>,
    ) -> Result<ContactsIndexReport, FfiError> {
        let region = parse_region(region.as_deref()).map_err(|e| FfiError::from_core(&e))?;
        let feed = Feed(source.as_ref());
        let done = index_books(self.inner(), &account, PimFrom::Launcher(&feed), region)
            .map_err(|e| FfiError::from_core(&e))?;
        let (r, unchanged_books, errors) = (done.report, done.unchanged, done.errors);
        Ok(ContactsIndexReport {
            cards: count(r.cards),
            added: count(r.added),
            changed: count(r.changed),
            removed: count(r.removed),
            people: count(r.contacts),
            unchanged_books,
            problems: problems(&errors),
        })
    }

    /// The occurrences of every calendar in `[from, to)`, by start (at most 366 days and
    /// 1,000 occurrences, else a typed error).
    pub fn agenda(&self, from: String, to: String) -> Result<Vec<AgendaOccurrence>, FfiError> {
        let (from, to) = self.window(&from, &to)?;
        let items = self.inner().agenda(from, to).map_err(|e| FfiError::from_core(&e))?;
        Ok(items.into_iter().map(|o| occurrence(o.calendar, o.item)).collect())
    }

    /// Busy time and the free slots of at least `min_minutes` (5 to 1440) in working hours.
    pub fn free_busy(
        &self,
        from: String,
        to: String,
        min_minutes: i64,
    ) -> Result<FreeBusyReport, FfiError> {
        let (from, to) = self.window(&from, &to)?;
        let fb =
            self.inner().free_busy(from, to, min_minutes).map_err(|e| FfiError::from_core(&e))?;
        let span = |start: chrono::DateTime<chrono::FixedOffset>,
                    end: chrono::DateTime<chrono::FixedOffset>| TimeSpan {
            start: start.to_rfc3339(),
            end: end.to_rfc3339(),
        };
        Ok(FreeBusyReport {
            busy: fb.busy.iter().map(|b| span(b.span.start, b.span.end)).collect(),
            free: fb.free.iter().map(|f| span(f.start, f.end)).collect(),
        })
    }

    /// Events whose summary, location, description or attendees hold every word of `text`
    /// (absent: the window's events), in `[from, to)` (absent: 30 days back to 90 ahead).
    pub fn search_events(
        &self,
        text: Option<String>,
        from: Option<String>,
        to: Option<String>,
        limit: u32,
    ) -> Result<Vec<EventFound>, FfiError> {
        let zone = self.inner().calendar_settings().zone;
        let at = |t: Option<String>| {
            t.map(|t| instant_in(&t, zone)).transpose().map_err(|e| FfiError::from_core(&e))
        };
        let q = EventQuery {
            text,
            from: at(from)?,
            to: at(to)?,
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
            ..EventQuery::default()
        };
        let hits = self.inner().search_events(&q).map_err(|e| FfiError::from_core(&e))?;
        Ok(hits
            .into_iter()
            .map(|h| EventFound {
                id: h.id,
                first: occurrence(h.calendar, h.item),
                more_occurrences: count(h.more_occurrences),
            })
            .collect())
    }

    /// Every person of the indexed address books, by name.
    pub fn contacts(&self) -> Result<Vec<Person>, FfiError> {
        let all = self.inner().contacts().map_err(|e| FfiError::from_core(&e))?;
        Ok(all.into_iter().map(Into::into).collect())
    }

    /// The people that fit `text` best (names, organization, addresses, phone digits).
    pub fn search_contacts(&self, text: String, limit: u32) -> Result<Vec<Person>, FfiError> {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let found =
            self.inner().search_contacts(&text, limit).map_err(|e| FfiError::from_core(&e))?;
        Ok(found.into_iter().map(Into::into).collect())
    }

    /// Who `text` means: resolved, ambiguous or not found — never a guess.
    pub fn resolve_recipient(&self, text: String) -> Result<RecipientResolution, FfiError> {
        use steward_core::contacts::Status;
        let r = self.inner().resolve_recipient(&text).map_err(|e| FfiError::from_core(&e))?;
        Ok(RecipientResolution {
            status: match r.status {
                Status::Resolved => "resolved",
                Status::Ambiguous => "ambiguous",
                Status::NotFound => "not_found",
            }
            .to_owned(),
            candidates: r
                .candidates
                .into_iter()
                .map(|c| RecipientCandidate {
                    evidence: c.evidence.iter().map(evidence).collect(),
                    name: c.name,
                    email: c.email,
                    contact_id: c.contact_id,
                    covers: count(c.covers),
                    of: count(c.of),
                })
                .collect(),
        })
    }
}
