//! The facade's mail reads: what frontends call instead of the mirror.

use super::Steward;
use crate::mirror::{BodyWindow, MessageRead, MirrorError, MirrorStats, ReadError, ThreadPage};

impl Steward {
    /// One message, its body in a bounded window.
    pub fn read_message(&self, id: i64, window: BodyWindow) -> Result<MessageRead, ReadError> {
        self.mirror().read_message(id, window)
    }

    /// A page of a thread's messages, oldest first.
    pub fn read_thread(
        &self,
        thread_id: i64,
        offset: usize,
        limit: usize,
    ) -> Result<ThreadPage, ReadError> {
        self.mirror().read_thread(thread_id, offset, limit)
    }

    /// Counts of the mirror's tables, its sources and its last errors.
    pub fn mail_stats(&self) -> Result<MirrorStats, MirrorError> {
        self.mirror().stats()
    }

    /// The people of the mirror's headers, with how often and how recently you wrote to them
    /// and they to you (see [`crate::mirror::Mirror::correspondents`]), at most `max`.
    pub fn correspondents(
        &self,
        max: usize,
    ) -> Result<Vec<crate::contacts::Correspondent>, MirrorError> {
        self.mirror().correspondents(max)
    }
}
