//! What derived indexes read from the mirror: one record per live message, streamed.

use super::Mirror;
use crate::store::StoreError;

/// The indexable text of one live message.
#[derive(Debug, Clone, Copy)]
pub struct IndexableMessage<'a> {
    /// The message id.
    pub id: i64,
    /// The subject.
    pub subject: &'a str,
    /// The body text held by the mirror.
    pub body: &'a str,
    /// Sender and recipient names and addresses, space separated.
    pub people: &'a str,
    /// Attachment names, space separated.
    pub attachments: &'a str,
}

/// Why feeding an index stopped.
#[derive(Debug)]
pub enum IndexFeedError {
    /// Reading the mirror failed.
    Store(StoreError),
    /// The receiving index failed.
    Sink(String),
}

impl From<StoreError> for IndexFeedError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

impl Mirror {
    /// Calls `each` for every live message, in id order, on one read transaction (a consistent
    /// snapshot). Returns how many were fed.
    pub fn for_each_indexable(
        &self,
        each: &mut dyn FnMut(IndexableMessage<'_>) -> Result<(), String>,
    ) -> Result<u64, IndexFeedError> {
        self.db
            .read(|c| {
                let q = |ctx: &'static str| move |e| IndexFeedError::Store(StoreError::query(ctx, e));
                let mut stmt = c
                    .prepare(
                        "SELECT m.id, m.subject, coalesce(b.body_text, ''),
                            coalesce((SELECT group_concat(coalesce(a.name, '') || ' ' || a.address, ' ')
                                      FROM message_addresses a WHERE a.message_id = m.id), ''),
                            coalesce((SELECT group_concat(coalesce(t.name, ''), ' ')
                                      FROM attachments t WHERE t.message_id = m.id), '')
                         FROM messages m LEFT JOIN message_bodies b ON b.message_id = m.id
                         WHERE m.deleted_at IS NULL ORDER BY m.id",
                    )
                    .map_err(q("prepare index feed"))?;
                let mut rows = stmt.query([]).map_err(q("index feed"))?;
                let mut n = 0u64;
                while let Some(r) = rows.next().map_err(q("index feed row"))? {
                    let text = |i: usize| -> Result<&str, IndexFeedError> {
                        r.get_ref(i).map_err(q("index feed value"))?.as_str().map_err(|e| {
                            IndexFeedError::Store(StoreError::query("index feed text", e.into()))
                        })
                    };
                    let id: i64 = r.get(0).map_err(q("index feed id"))?;
                    each(IndexableMessage {
                        id,
                        subject: text(1)?,
                        body: text(2)?,
                        people: text(3)?,
                        attachments: text(4)?,
                    })
                    .map_err(IndexFeedError::Sink)?;
                    n += 1;
                }
                Ok::<_, IndexFeedError>(n)
            })
    }
}
