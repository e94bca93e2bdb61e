//! The facade's contacts: address books indexed into `contacts.db`, search, and recipient
//! resolution over the people merged from them and the people of the mail mirror.

use super::Steward;
use crate::contacts::{
    AccountRead, Contact, ContactStore, ContactStoreError, ContactsError, ContactsReport,
    Resolution, resolve_recipient_among, search_people,
};
use crate::mirror::DEFAULT_MAX_CORRESPONDENTS;

/// Why a contacts question failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContactsQueryError {
    /// The question.
    #[error(transparent)]
    Query(#[from] ContactsError),
    /// The store.
    #[error(transparent)]
    Store(#[from] ContactStoreError),
    /// The mail mirror.
    #[error(transparent)]
    Mirror(#[from] crate::mirror::MirrorError),
}

impl crate::StewardError for ContactsQueryError {
    fn code(&self) -> &'static str {
        match self {
            Self::Query(e) => e.code(),
            Self::Store(e) => e.code(),
            Self::Mirror(e) => e.code(),
        }
    }

    fn kind(&self) -> crate::ErrorKind {
        match self {
            Self::Query(e) => e.kind(),
            Self::Store(e) => e.kind(),
            Self::Mirror(e) => e.kind(),
        }
    }
}

impl Steward {
    fn contact_store(&self) -> Result<&ContactStore, ContactStoreError> {
        self.open_once(&self.contacts, || ContactStore::open(&self.home, &self.limits))
    }

    /// Replaces the cards of the books `read` read whole and re-merges the people (see
    /// [`ContactStore::index_account`]).
    pub fn index_contacts(
        &self,
        account: &str,
        read: AccountRead,
    ) -> Result<ContactsReport, ContactStoreError> {
        self.contact_store()?.index_account(account, read, chrono::Utc::now().timestamp())
    }

    /// The version of each of `account`'s books as last indexed (a CardDAV listing's digest),
    /// by book: a connector leaves a book whose version has not changed unread.
    pub fn contact_book_versions(
        &self,
        account: &str,
    ) -> Result<std::collections::BTreeMap<String, String>, ContactStoreError> {
        self.contact_store()?.book_versions(account)
    }

    /// Every person of the indexed address books, by name.
    pub fn contacts(&self) -> Result<Vec<Contact>, ContactStoreError> {
        self.contact_store()?.contacts()
    }

    /// The people that fit `text` best, at most `limit` (see [`search_contacts`]).
    pub fn search_contacts(
        &self,
        text: &str,
        limit: usize,
    ) -> Result<Vec<Contact>, ContactsQueryError> {
        let people = self.contact_store()?.people()?;
        Ok(search_people(text, &people, limit)?)
    }

    /// Who `text` means, over the address books and the mirror's correspondents: resolved,
    /// ambiguous or not found, never a guess (see [`resolve_recipient`]).
    pub fn resolve_recipient(&self, text: &str) -> Result<Resolution, ContactsQueryError> {
        let people = self.contact_store()?.people()?;
        let mail = self.correspondents(DEFAULT_MAX_CORRESPONDENTS)?;
        Ok(resolve_recipient_among(text, &people, &mail)?)
    }
}
