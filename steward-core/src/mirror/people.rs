//! The people of the mirror's headers: for each address, how many messages you sent it (To,
//! Cc, Bcc of messages in a Sent mailbox) and when last, how many it sent you (From of
//! messages elsewhere, junk, trash and drafts left out) and when last, and the name most often
//! shown with it. Your own addresses (the senders of your Sent mail) are not people you write
//! to and are left out.

use std::collections::{BTreeMap, BTreeSet};

use super::{Mirror, MirrorError};
use crate::{contacts::Correspondent, store::StoreError};

/// Most people harvested from the mirror by default.
/// Default of `max` in [`Mirror::correspondents`] (callers pass their own bound).
pub const DEFAULT_MAX_CORRESPONDENTS: usize = 20_000;

fn rfc3339(unix: Option<i64>) -> Option<String> {
    unix.and_then(|s| chrono::DateTime::from_timestamp(s, 0)).map(|t| t.to_rfc3339())
}

impl Mirror {
    /// The people of the mirror's headers (see the module), most written to first, then most
    /// heard from, at most `max`.
    pub fn correspondents(&self, max: usize) -> Result<Vec<Correspondent>, MirrorError> {
        let rows = self.db.read(|c| {
            let q = |ctx: &'static str| move |e| StoreError::query(ctx, e);
            let grouped = |sql: &str| -> Result<Vec<(String, i64, Option<i64>)>, StoreError> {
                let mut stmt = c.prepare(sql).map_err(q("prepare people"))?;
                let rows = stmt
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                    .map_err(q("people"))?;
                rows.collect::<Result<Vec<_>, _>>().map_err(q("people row"))
            };
            let sent = grouped(
                "SELECT lower(trim(a.address)), count(DISTINCT m.id), max(coalesce(m.date, m.received_at))
                 FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id
                 JOIN message_addresses a ON a.message_id = m.id
                 WHERE b.role = 'sent' AND a.field IN ('to','cc','bcc') AND m.deleted_at IS NULL
                 GROUP BY 1",
            )?;
            let received = grouped(
                "SELECT lower(trim(m.from_addr)), count(*), max(coalesce(m.date, m.received_at))
                 FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id
                 WHERE b.role NOT IN ('sent','drafts','junk','trash') AND m.deleted_at IS NULL
                   AND m.from_addr IS NOT NULL
                 GROUP BY 1",
            )?;
            let me: BTreeSet<String> = {
                let mut stmt = c
                    .prepare(
                        "SELECT DISTINCT lower(trim(m.from_addr)) FROM messages m
                         JOIN mailboxes b ON b.id = m.mailbox_id
                         WHERE b.role = 'sent' AND m.from_addr IS NOT NULL",
                    )
                    .map_err(q("prepare me"))?;
                let rows = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(q("me"))?;
                rows.collect::<Result<_, _>>().map_err(q("me row"))?
            };
            let names = {
                let mut stmt = c
                    .prepare(
                        "SELECT lower(trim(address)), name, count(*) AS n FROM message_addresses
                         WHERE name IS NOT NULL AND trim(name) != ''
                         GROUP BY 1, 2 ORDER BY 1, n DESC, 2",
                    )
                    .map_err(q("prepare names"))?;
                let rows = stmt
                    .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
                    .map_err(q("names"))?;
                let mut first: BTreeMap<String, String> = BTreeMap::new();
                for r in rows {
                    let (a, n) = r.map_err(q("name row"))?;
                    first.entry(a).or_insert(n);
                }
                first
            };
            Ok::<_, StoreError>((sent, received, me, names))
        })?;
        let (sent, received, me, names) = rows;
        let mut people: BTreeMap<String, Correspondent> = BTreeMap::new();
        let count = |n: i64| u32::try_from(n).unwrap_or(u32::MAX);
        for (email, n, last) in sent {
            let p = people
                .entry(email.clone())
                .or_insert_with(|| Correspondent { email, ..Correspondent::default() });
            p.sent = count(n);
            p.last_sent = rfc3339(last);
        }
        for (email, n, last) in received {
            let p = people
                .entry(email.clone())
                .or_insert_with(|| Correspondent { email, ..Correspondent::default() });
            p.received = count(n);
            p.last_received = rfc3339(last);
        }
        let mut out: Vec<Correspondent> = people
            .into_values()
            .filter(|p| {
                !me.contains(&p.email) && crate::contacts::normalize_email(&p.email).is_some()
            })
            .map(|mut p| {
                p.name = names.get(&p.email).and_then(|n| crate::contacts::clean_name(n));
                p
            })
            .collect();
        out.sort_by(|a, b| {
            b.sent
                .cmp(&a.sent)
                .then(b.received.cmp(&a.received))
                .then_with(|| a.email.cmp(&b.email))
        });
        out.truncate(max);
        Ok(out)
    }
}
