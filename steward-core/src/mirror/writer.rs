//! Applying parsed files to mirror.db inside one transaction: identities, paths, mailbox
//! attribution, thread resolution, attachments. Every function here takes the open
//! `&Transaction`; nothing here commits.

use std::collections::{BTreeSet, HashMap, HashSet};

use rusqlite::{OptionalExtension, Transaction, params};

use super::{
    blobs::hex,
    model::{Address, FileError, MailboxRef, MailboxRole, ParsedMessage, SourceFile},
    subject::normalize_subject,
};
use crate::{
    error::StewardError,
    store::{StoreError, int},
};

type Res<T> = Result<T, StoreError>;

fn q(context: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::query(context, e)
}

/// A parsed file whose attachment bytes are already in the blob store.
#[derive(Debug)]
pub(crate) struct PreparedFile {
    pub(crate) file: SourceFile,
    /// `file.path` as stored in `source_files`, converted once on the parser thread.
    pub(crate) path: String,
    pub(crate) result: Result<Vec<PreparedMessage>, FileError>,
}

/// A parsed message plus the blob hash of each attachment (None when the bytes were missing).
#[derive(Debug)]
pub(crate) struct PreparedMessage {
    pub(crate) msg: ParsedMessage,
    pub(crate) attachment_shas: Vec<Option<String>>,
    /// Everything derived from the message alone is computed on the parser threads, so the
    /// single writer only runs SQL.
    identity: String,
    content_hash: String,
    rfc_id: Option<String>,
    norm_subject: String,
    participants: BTreeSet<String>,
    /// In-Reply-To then References nearest-first: candidate parents, in priority order.
    ancestors: Vec<String>,
    /// In-Reply-To then the last References, as stored for the reverse lookup.
    stored_refs: Vec<String>,
}

impl PreparedMessage {
    pub(crate) fn new(
        account: &str,
        msg: ParsedMessage,
        attachment_shas: Vec<Option<String>>,
    ) -> Self {
        let identity = identity_of(account, &msg);
        let skip = msg.references.len().saturating_sub(MAX_STORED_REFERENCES);
        Self {
            content_hash: hex(&msg.content_hash),
            rfc_id: msg.message_id.as_deref().map(normalize_message_id),
            norm_subject: normalize_subject(msg.subject.as_deref().unwrap_or("")),
            participants: participants_of(&msg),
            ancestors: msg
                .in_reply_to
                .iter()
                .chain(msg.references.iter().rev())
                .map(|r| normalize_message_id(r))
                .collect(),
            // Each message is referenced by its own replies, so In-Reply-To and the nearest
            // References are enough to connect a tree whose parent arrives late.
            stored_refs: msg
                .in_reply_to
                .iter()
                .chain(msg.references.iter().skip(skip))
                .map(|r| normalize_message_id(r))
                .collect(),
            identity,
            msg,
            attachment_shas,
        }
    }
}

/// What one batch did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tally {
    pub(crate) added: u64,
    pub(crate) updated: u64,
    pub(crate) copies: u64,
    pub(crate) unchanged: u64,
    pub(crate) paths_removed: u64,
    pub(crate) errors: u64,
}

/// The thread chosen for a new message.
#[derive(Debug, Clone, Copy)]
struct Resolved {
    id: i64,
    /// Created for this message, already counting it.
    created: bool,
}

/// Settings the writer needs from [`crate::Limits`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct WriterConfig {
    pub(crate) window_secs: i64,
    pub(crate) max_participants: usize,
}

/// Lookups kept across the batches of one sync run. Only what the committed transactions
/// wrote is cached (a failed batch aborts the run), and merges invalidate what they touch.
#[derive(Debug, Default)]
pub(crate) struct IngestCache {
    mailboxes: HashMap<String, (i64, MailboxRole)>,
    participants: HashMap<i64, Vec<String>>,
    filters: Option<Filters>,
}

/// Existence filters over the account's stored ids: a miss proves absence and skips a query;
/// a hit (or a hash collision) runs it. Only ever grow during a run, so they stay supersets.
#[derive(Debug, Default)]
struct Filters {
    /// Identities and Message-IDs of stored messages.
    ids: HashSet<u64>,
    /// Ids referenced (In-Reply-To / References) by stored messages.
    refs: HashSet<u64>,
    /// Gmail thread ids of stored threads.
    gm: HashSet<u64>,
}

/// Largest account for which the existence filters are built (entries across the three sets);
/// above it every lookup goes to SQLite.
/// Fixed (not a setting).
pub(crate) const MAX_FILTER_ENTRIES: i64 = 5_000_000;

fn key_hash(s: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

impl IngestCache {
    /// Loads the existence filters for `account_id`, unless the account is too large.
    pub(crate) fn load_filters(&mut self, conn: &rusqlite::Connection, account_id: i64) -> Res<()> {
        let count: i64 = conn
            .query_row(
                "SELECT (SELECT count(*) FROM messages WHERE account_id = ?1)
                      + (SELECT count(*) FROM message_refs r JOIN messages m ON m.id = r.message_id WHERE m.account_id = ?1)",
                [account_id],
                |r| r.get(0),
            )
            .map_err(q("count filter entries"))?;
        if count > MAX_FILTER_ENTRIES {
            self.filters = None;
            return Ok(());
        }
        let mut f = Filters::default();
        let fill = |sql: &str, set: &mut HashSet<u64>| -> Res<()> {
            let mut stmt = conn.prepare(sql).map_err(q("prepare filter"))?;
            let mut rows = stmt.query([account_id]).map_err(q("filter"))?;
            while let Some(row) = rows.next().map_err(q("filter row"))? {
                let v: rusqlite::types::ValueRef<'_> = row.get_ref(0).map_err(q("filter value"))?;
                if let rusqlite::types::ValueRef::Text(t) = v {
                    set.insert(key_hash(&String::from_utf8_lossy(t)));
                }
            }
            Ok(())
        };
        fill("SELECT identity FROM messages WHERE account_id = ?1", &mut f.ids)?;
        fill(
            "SELECT rfc_message_id FROM messages WHERE account_id = ?1 AND rfc_message_id IS NOT NULL",
            &mut f.ids,
        )?;
        fill(
            "SELECT r.ref FROM message_refs r JOIN messages m ON m.id = r.message_id WHERE m.account_id = ?1",
            &mut f.refs,
        )?;
        fill(
            "SELECT gm_thread_id FROM threads WHERE account_id = ?1 AND gm_thread_id IS NOT NULL",
            &mut f.gm,
        )?;
        self.filters = Some(f);
        Ok(())
    }

    fn may_have(&self, pick: fn(&Filters) -> &HashSet<u64>, key: &str) -> bool {
        self.filters.as_ref().is_none_or(|f| pick(f).contains(&key_hash(key)))
    }

    fn remember_message(&mut self, identity: &str, gm_thread_id: Option<&str>) {
        if let Some(f) = &mut self.filters {
            f.ids.insert(key_hash(identity));
            if let Some(g) = gm_thread_id {
                f.gm.insert(key_hash(g));
            }
        }
    }

    fn remember_refs(&mut self, refs: &[String]) {
        if let Some(f) = &mut self.filters {
            f.refs.extend(refs.iter().map(|r| key_hash(r)));
        }
    }
}

/// References kept per message for the reverse (children) lookup, nearest first.
/// Fixed (not a setting).
const MAX_STORED_REFERENCES: usize = 8;

/// The mtime recorded for a file that could not be read, so that the next run retries it.
/// Fixed (not a setting).
const UNREAD_MTIME: i64 = -1;

/// Threads examined from each end of the window by the subject fallback.
/// Fixed (not a setting).
const SUBJECT_CANDIDATES: i64 = 16;

/// Most thread participant lists cached during one run.
/// Fixed (not a setting).
const PARTICIPANT_CACHE: usize = 50_000;

/// Applies prepared files for one account.
pub(crate) struct Writer<'t, 'c> {
    tx: &'t Transaction<'c>,
    account_id: i64,
    cache: &'t mut IngestCache,
    cfg: WriterConfig,
    now: i64,
}

/// Returns the id of `name`, creating the account if needed.
pub(crate) fn ensure_account(tx: &Transaction<'_>, name: &str, now: i64) -> Res<i64> {
    tx.execute(
        "INSERT INTO accounts (name, created_at) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING",
        params![name, now],
    )
    .map_err(q("insert account"))?;
    tx.query_row("SELECT id FROM accounts WHERE name = ?1", [name], |r| r.get(0))
        .map_err(q("select account"))
}

/// The stable identity of a message: its normalized Message-ID, else a surrogate from the account
/// and the source's stable key.
pub(crate) fn identity_of(account: &str, msg: &ParsedMessage) -> String {
    match &msg.message_id {
        Some(id) => normalize_message_id(id),
        None => {
            use sha2::{Digest, Sha256};
            let mut h = Sha256::new();
            h.update(account.as_bytes());
            h.update([0]);
            h.update(msg.source_key.as_bytes());
            format!("surrogate:{}", hex(&h.finalize()))
        }
    }
}

/// Message-IDs compare case-sensitively on the local part in theory; in practice clients vary
/// only in surrounding brackets and whitespace, which we strip.
pub fn normalize_message_id(id: &str) -> String {
    id.trim().trim_start_matches('<').trim_end_matches('>').trim().to_owned()
}

fn participants_of(msg: &ParsedMessage) -> BTreeSet<String> {
    msg.from
        .iter()
        .chain(&msg.to)
        .chain(&msg.cc)
        .map(|a| a.addr.trim().to_lowercase())
        .filter(|a| !a.is_empty())
        .collect()
}

impl<'t, 'c> Writer<'t, 'c> {
    pub(crate) fn new(
        tx: &'t Transaction<'c>,
        account_id: i64,
        cache: &'t mut IngestCache,
        cfg: WriterConfig,
        now: i64,
    ) -> Self {
        Self { tx, account_id, cache, cfg, now }
    }

    fn mailbox(&mut self, mb: &MailboxRef) -> Res<(i64, MailboxRole)> {
        if let Some(v) = self.cache.mailboxes.get(&mb.name) {
            return Ok(*v);
        }
        let role = mb.role();
        self.tx
            .execute(
                "INSERT INTO mailboxes (account_id, name, role) VALUES (?1, ?2, ?3)
                 ON CONFLICT (account_id, name) DO NOTHING",
                params![self.account_id, mb.name, role.as_str()],
            )
            .map_err(q("insert mailbox"))?;
        let (id, stored): (i64, String) = self
            .tx
            .query_row(
                "SELECT id, role FROM mailboxes WHERE account_id = ?1 AND name = ?2",
                params![self.account_id, mb.name],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(q("select mailbox"))?;
        let v = (id, MailboxRole::parse(&stored).unwrap_or(role));
        self.cache.mailboxes.insert(mb.name.clone(), v);
        Ok(v)
    }

    /// Removes every path recorded for `path` (a vanished file). Returns how many were removed.
    pub(crate) fn remove_file(&mut self, path: &str) -> Res<u64> {
        let id: Option<i64> = self
            .tx
            .query_row(
                "SELECT id FROM source_files WHERE account_id = ?1 AND path = ?2",
                params![self.account_id, path],
                |r| r.get(0),
            )
            .optional()
            .map_err(q("select source file"))?;
        let Some(id) = id else { return Ok(0) };
        let n = self
            .tx
            .execute("DELETE FROM message_paths WHERE file_id = ?1", [id])
            .map_err(q("delete paths"))?;
        self.tx
            .execute("DELETE FROM source_files WHERE id = ?1", [id])
            .map_err(q("delete source file"))?;
        Ok(n as u64)
    }

    /// Applies one prepared file.
    /// `is_new` says the file was not in `source_files` when the run started (no old paths).
    pub(crate) fn apply(&mut self, pf: &PreparedFile, is_new: bool, tally: &mut Tally) -> Res<()> {
        let (mailbox_id, role) = self.mailbox(&pf.file.mailbox)?;
        let path = pf.path.as_str();
        let (code, message) = match &pf.result {
            Ok(_) => (None, None),
            Err(e) => (Some(e.code()), Some(e.to_string())),
        };
        let transient = matches!(pf.result, Err(FileError::Io { .. }));
        let values = params![
            self.account_id,
            path,
            mailbox_id,
            // An unreadable file (permissions, a disk hiccup) is retried by the next run: its
            // recorded mtime can never match, and the copies it held before are kept.
            if transient { UNREAD_MTIME } else { pf.file.mtime_ns },
            i64::try_from(pf.file.size).unwrap_or(i64::MAX),
            code,
            message
        ];
        let file_id: i64 = if is_new {
            self.tx
                .prepare_cached(
                    "INSERT INTO source_files (account_id, path, mailbox_id, mtime_ns, size, error_code, error_message)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(q("prepare source file"))?
                .insert(values)
                .map_err(q("insert source file"))?
        } else {
            self.tx
                .prepare_cached(
                    "INSERT INTO source_files (account_id, path, mailbox_id, mtime_ns, size, error_code, error_message)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT (account_id, path) DO UPDATE SET
                       mailbox_id = excluded.mailbox_id, mtime_ns = excluded.mtime_ns, size = excluded.size,
                       error_code = excluded.error_code, error_message = excluded.error_message
                     RETURNING id",
                )
                .map_err(q("prepare source file"))?
                .query_row(values, |r| r.get(0))
                .map_err(q("upsert source file"))?
        };
        // Paths this file held before (a changed file): drop them, the new parse re-adds.
        let previous: Vec<i64> = if is_new || transient {
            Vec::new()
        } else {
            let mut stmt = self
                .tx
                .prepare_cached("SELECT message_id FROM message_paths WHERE file_id = ?1")
                .map_err(q("prepare old paths"))?;
            let rows = stmt.query_map([file_id], |r| r.get(0)).map_err(q("old paths"))?;
            rows.collect::<Result<_, _>>().map_err(q("old path"))?
        };
        let removed = if previous.is_empty() {
            0
        } else {
            self.tx
                .prepare_cached("DELETE FROM message_paths WHERE file_id = ?1")
                .map_err(q("prepare delete paths"))?
                .execute([file_id])
                .map_err(q("delete old paths"))?
        };
        let Ok(msgs) = &pf.result else {
            tally.errors += 1;
            tally.paths_removed += removed as u64;
            return Ok(());
        };
        let mut readded = 0u64;
        for pm in msgs {
            let message_id = self.upsert_message(pm, mailbox_id, role, &previous, tally)?;
            self.tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO message_paths (file_id, ordinal, message_id, mailbox_id, offset, size, flags)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(q("prepare path"))?
                .execute(params![
                    file_id,
                    i64::from(pm.msg.ordinal),
                    message_id,
                    mailbox_id,
                    i64::try_from(pm.msg.offset).unwrap_or(i64::MAX),
                    i64::try_from(pm.msg.size).unwrap_or(i64::MAX),
                    pm.msg.flags.bits()
                ])
                .map_err(q("insert path"))?;
            readded += 1;
        }
        tally.paths_removed += (removed as u64).saturating_sub(readded);
        Ok(())
    }

    fn upsert_message(
        &mut self,
        pm: &PreparedMessage,
        mailbox_id: i64,
        role: MailboxRole,
        previous: &[i64],
        tally: &mut Tally,
    ) -> Res<i64> {
        let m = &pm.msg;
        let identity = &pm.identity;
        let content_hash = &pm.content_hash;
        let existing: Option<(i64, i64, String, i64, String, String)> =
            if !self.cache.may_have(|f| &f.ids, identity) {
                None
            } else {
                self.tx
                    .prepare_cached(
                        "SELECT m.id, m.mailbox_id, b.role, m.flags, m.content_hash, m.body_state
                 FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id
                 WHERE m.account_id = ?1 AND m.identity = ?2",
                    )
                    .map_err(q("prepare find message"))?
                    .query_row(params![self.account_id, identity], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
                    })
                    .optional()
                    .map_err(q("find message"))?
            };

        if let Some((id, cur_mailbox, cur_role, cur_flags, cur_hash, cur_body)) = existing {
            // A Gmail "All Mail" copy never overrides a more specific mailbox.
            let cur_role = MailboxRole::parse(&cur_role).unwrap_or(MailboxRole::Other);
            let new_mailbox = if cur_role == MailboxRole::AllMail && role != MailboxRole::AllMail {
                mailbox_id
            } else {
                cur_mailbox
            };
            let flags = m.flags.bits();
            // Content follows the same physical file when it changes, or a more complete copy
            // (a .partial.emlx downloaded in full). Another copy with different bytes (the Sent
            // copy of a message also received) is a copy, not a rewrite: first seen wins, so
            // re-runs never flap between copies.
            let rank = |s: &str| match s {
                "full" => 2,
                "partial" => 1,
                _ => 0,
            };
            let same_file = previous.contains(&id);
            let more_complete = rank(m.body_state.as_str()) > rank(&cur_body);
            let content_changed = &cur_hash != content_hash && (same_file || more_complete);
            if content_changed {
                self.write_content(id, pm, true)?;
            }
            // Soft-delete state is settled once per run, after every path is known.
            let changed = content_changed || flags != cur_flags;
            if changed || new_mailbox != cur_mailbox {
                self.tx
                    .prepare_cached(
                        "UPDATE messages SET mailbox_id = ?2, flags = ?3, updated_at = ?4
                         WHERE id = ?1",
                    )
                    .map_err(q("prepare update message"))?
                    .execute(params![id, new_mailbox, flags, self.now])
                    .map_err(q("update message"))?;
            }
            if changed {
                tally.updated += 1;
            } else if same_file {
                tally.unchanged += 1;
            } else {
                // Another physical copy (a label, All Mail, a moved file) of a known message.
                tally.copies += 1;
            }
            return Ok(id);
        }

        let participants = &pm.participants;
        let when = m.date.or(m.received_at);
        let rfc_id = pm.rfc_id.as_deref();
        let children = match &rfc_id {
            Some(r) if self.cache.may_have(|f| &f.refs, r) => self.child_threads(r)?,
            _ => Vec::new(),
        };
        let resolved = self.resolve_thread(pm, when, &children)?;
        let thread_id = resolved.id;
        let from = m.from.first();
        let id: i64 = self
            .tx
            .prepare_cached(
                "INSERT INTO messages (account_id, identity, rfc_message_id, thread_id, mailbox_id, subject,
                   from_name, from_addr, date, received_at, flags, body_state, size, attachment_count,
                   content_hash, ingested_at, updated_at, bulk)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?16, ?17)",
            )
            .map_err(q("prepare insert message"))?
            .insert(
                params![
                    self.account_id,
                    identity,
                    rfc_id,
                    thread_id,
                    mailbox_id,
                    m.subject.as_deref().unwrap_or(""),
                    from.and_then(|a| a.name.as_deref()),
                    from.map(|a| a.addr.as_str()),
                    m.date,
                    m.received_at,
                    m.flags.bits(),
                    m.body_state.as_str(),
                    i64::try_from(m.size).unwrap_or(i64::MAX),
                    int(m.attachments.len()),
                    content_hash,
                    self.now,
                    m.bulk.as_deref()
                ],
            )
            .map_err(q("insert message"))?;
        self.write_content(id, pm, false)?;
        self.cache.remember_message(identity, m.gm_thread_id.as_deref());
        if !resolved.created {
            self.touch_thread(thread_id, participants, when, 1)?;
        }
        self.adopt_children(thread_id, &children)?;
        tally.added += 1;
        Ok(id)
    }

    /// Writes body, addresses, references and attachments (replacing old ones on update).
    fn write_content(&mut self, id: i64, pm: &PreparedMessage, replace: bool) -> Res<()> {
        let tx = self.tx;
        let m = &pm.msg;
        let shas = &pm.attachment_shas;
        if replace {
            for sql in [
                "DELETE FROM message_addresses WHERE message_id = ?1",
                "DELETE FROM message_refs WHERE message_id = ?1",
                "DELETE FROM attachments WHERE message_id = ?1",
            ] {
                tx.prepare_cached(sql)
                    .map_err(q("prepare delete content"))?
                    .execute([id])
                    .map_err(q("delete content"))?;
            }
            tx.prepare_cached(
                "UPDATE messages SET subject = ?2, from_name = ?3, from_addr = ?4, date = ?5, received_at = ?6,
                   body_state = ?7, size = ?8, attachment_count = ?9, content_hash = ?10, bulk = ?11
                 WHERE id = ?1",
            )
            .map_err(q("prepare update content"))?
            .execute(params![
                id,
                m.subject.as_deref().unwrap_or(""),
                m.from.first().and_then(|a| a.name.as_deref()),
                m.from.first().map(|a| a.addr.as_str()),
                m.date,
                m.received_at,
                m.body_state.as_str(),
                i64::try_from(m.size).unwrap_or(i64::MAX),
                int(m.attachments.len()),
                hex(&m.content_hash),
                m.bulk.as_deref()
            ])
            .map_err(q("update content"))?;
        }
        tx.prepare_cached(
            "INSERT OR REPLACE INTO message_bodies (message_id, body_text) VALUES (?1, ?2)",
        )
        .map_err(q("prepare body"))?
        .execute(params![id, m.body_text])
        .map_err(q("insert body"))?;
        let fields: [(&str, &[Address]); 4] =
            [("from", &m.from), ("to", &m.to), ("cc", &m.cc), ("bcc", &m.bcc)];
        let rows: Vec<(&str, usize, Option<&str>, &str)> = fields
            .iter()
            .flat_map(|(f, list)| {
                list.iter()
                    .enumerate()
                    .map(move |(i, a)| (*f, i, a.name.as_deref(), a.addr.as_str()))
            })
            .collect();
        if !rows.is_empty() {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO message_addresses (message_id, field, position, name, address)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(q("prepare address"))?;
            for (field, pos, name, addr) in &rows {
                stmt.execute(params![id, field, int(*pos), name, addr])
                    .map_err(q("insert address"))?;
            }
        }
        let refs = &pm.stored_refs;
        self.cache.remember_refs(refs);
        if !refs.is_empty() {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO message_refs (message_id, position, ref) VALUES (?1, ?2, ?3)",
                )
                .map_err(q("prepare ref"))?;
            for (i, r) in refs.iter().enumerate() {
                stmt.execute(params![id, int(i), r]).map_err(q("insert ref"))?;
            }
        }
        if !m.attachments.is_empty() {
            let mut blob = tx
                .prepare_cached("INSERT OR IGNORE INTO blobs (sha256, size) VALUES (?1, ?2)")
                .map_err(q("prepare blob"))?;
            let mut att = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO attachments (message_id, position, name, mime_type, size, sha256)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(q("prepare attachment"))?;
            for (i, a) in m.attachments.iter().enumerate() {
                let sha = shas.get(i).cloned().flatten();
                let size = i64::try_from(a.size).unwrap_or(i64::MAX);
                if let Some(s) = &sha {
                    blob.execute(params![s, size]).map_err(q("insert blob"))?;
                }
                att.execute(params![id, int(i), a.name, a.mime_type, size, sha])
                    .map_err(q("insert attachment"))?;
            }
        }
        Ok(())
    }

    /// Thread resolution, in descending order of confidence (see the module docs of `mirror`).
    fn resolve_thread(
        &mut self,
        pm: &PreparedMessage,
        when: Option<i64>,
        children: &[i64],
    ) -> Res<Resolved> {
        let tx = self.tx;
        let m = &pm.msg;
        let norm_subject = pm.norm_subject.as_str();
        let participants = &pm.participants;
        // 2. Gmail thread id.
        if let Some(g) = m.gm_thread_id.as_ref().filter(|g| self.cache.may_have(|f| &f.gm, g)) {
            let found: Option<i64> = tx
                .prepare_cached(
                    "SELECT id FROM threads WHERE account_id = ?1 AND gm_thread_id = ?2",
                )
                .map_err(q("prepare gm thread"))?
                .query_row(params![self.account_id, g], |r| r.get(0))
                .optional()
                .map_err(q("find gm thread"))?;
            if let Some(t) = found {
                return Ok(Resolved { id: t, created: false });
            }
        }
        // 3. RFC reply graph: In-Reply-To first, then References from the nearest ancestor. One
        // query fetches every known ancestor; priority is applied here.
        let wanted = &pm.ancestors;
        if wanted.iter().any(|w| self.cache.may_have(|f| &f.ids, w)) {
            let json = serde_json::to_string(wanted).unwrap_or_else(|_| "[]".to_owned());
            let mut stmt = tx
                .prepare_cached(
                    "SELECT identity, thread_id FROM messages
                     WHERE account_id = ?1 AND identity IN (SELECT value FROM json_each(?2))",
                )
                .map_err(q("prepare parents"))?;
            let found: HashMap<String, i64> = stmt
                .query_map(params![self.account_id, json], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(q("find parents"))?
                .collect::<Result<_, _>>()
                .map_err(q("read parent"))?;
            if let Some(t) = wanted.iter().find_map(|w| found.get(w)) {
                return Ok(Resolved { id: self.claim_gm(*t, m)?, created: false });
            }
        }
        // 3b. A parent arriving after its children joins them.
        if let Some(&t) = children.first() {
            return Ok(Resolved { id: self.claim_gm(t, m)?, created: false });
        }
        // 4. Normalized subject + a shared participant within the window. Threads whose span
        // comes within the window are range-scanned from whichever end suits the arrival order
        // (a backfill goes newest first, a reconcile oldest first), newest activity first, at
        // most SUBJECT_CANDIDATES of them.
        if let (false, Some(when)) = (norm_subject.is_empty(), when) {
            let window = self.cfg.window_secs;
            let by_first = "SELECT id, participants, gm_thread_id FROM threads
                 WHERE account_id = ?1 AND norm_subject = ?2 AND first_activity <= ?3 + ?4
                   AND last_activity >= ?3 - ?4
                 ORDER BY first_activity DESC LIMIT ?5";
            let by_last = "SELECT id, participants, gm_thread_id FROM threads
                 WHERE account_id = ?1 AND norm_subject = ?2 AND last_activity >= ?3 - ?4
                   AND first_activity <= ?3 + ?4
                 ORDER BY last_activity ASC LIMIT ?5";
            for sql in [by_first, by_last] {
                let mut stmt = tx.prepare_cached(sql).map_err(q("prepare subject threads"))?;
                let rows = stmt
                    .query_map(
                        params![self.account_id, norm_subject, when, window, SUBJECT_CANDIDATES],
                        |r| {
                            Ok((
                                r.get::<_, i64>(0)?,
                                r.get::<_, String>(1)?,
                                r.get::<_, Option<String>>(2)?,
                            ))
                        },
                    )
                    .map_err(q("find subject threads"))?;
                let mut found = None;
                for row in rows {
                    let (id, people, gm) = row.map_err(q("read subject thread"))?;
                    let gm_conflict =
                        matches!((&gm, &m.gm_thread_id), (Some(a), Some(b)) if a != b);
                    if !gm_conflict && people.lines().any(|p| participants.contains(p)) {
                        found = Some(id);
                        break;
                    }
                }
                if let Some(id) = found {
                    return Ok(Resolved { id: self.claim_gm(id, m)?, created: false });
                }
            }
        }
        // 5. A new thread, created complete with this message (no follow-up update).
        let people: Vec<String> =
            participants.iter().take(self.cfg.max_participants).cloned().collect();
        let id: i64 = tx
            .prepare_cached(
                "INSERT INTO threads (account_id, norm_subject, gm_thread_id, participants, first_activity, last_activity, message_count)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5, 1)",
            )
            .map_err(q("prepare new thread"))?
            .insert(params![self.account_id, norm_subject, m.gm_thread_id, people.join("\n"), when])
            .map_err(q("new thread"))?;
        if self.cache.participants.len() >= PARTICIPANT_CACHE {
            self.cache.participants.clear();
        }
        self.cache.participants.insert(id, people);
        Ok(Resolved { id, created: true })
    }

    /// Records the message's Gmail thread id on a thread that has none yet.
    fn claim_gm(&mut self, thread: i64, m: &ParsedMessage) -> Res<i64> {
        if let Some(g) = &m.gm_thread_id {
            self.tx
                .prepare_cached(
                    "UPDATE threads SET gm_thread_id = ?2 WHERE id = ?1 AND gm_thread_id IS NULL
                     AND NOT EXISTS (SELECT 1 FROM threads WHERE account_id = ?3 AND gm_thread_id = ?2)",
                )
                .map_err(q("prepare claim gm"))?
                .execute(params![thread, g, self.account_id])
                .map_err(q("claim gm"))?;
        }
        Ok(thread)
    }

    fn touch_thread(
        &mut self,
        thread: i64,
        participants: &BTreeSet<String>,
        when: Option<i64>,
        delta: i64,
    ) -> Res<()> {
        let mut merged = match self.cache.participants.remove(&thread) {
            Some(v) => v,
            None => {
                let current: String = self
                    .tx
                    .prepare_cached("SELECT participants FROM threads WHERE id = ?1")
                    .map_err(q("prepare thread participants"))?
                    .query_row([thread], |r| r.get(0))
                    .map_err(q("thread participants"))?;
                current.lines().map(str::to_owned).collect()
            }
        };
        for p in participants {
            if merged.len() >= self.cfg.max_participants {
                break;
            }
            if !merged.contains(p) {
                merged.push(p.clone());
            }
        }
        let joined = merged.join("\n");
        if self.cache.participants.len() >= PARTICIPANT_CACHE {
            self.cache.participants.clear();
        }
        self.cache.participants.insert(thread, merged);
        self.tx
            .prepare_cached(
                "UPDATE threads SET participants = ?2, message_count = message_count + ?4,
                   first_activity = CASE WHEN ?3 IS NULL THEN first_activity
                                         WHEN first_activity IS NULL OR ?3 < first_activity THEN ?3 ELSE first_activity END,
                   last_activity  = CASE WHEN ?3 IS NULL THEN last_activity
                                         WHEN last_activity IS NULL OR ?3 > last_activity THEN ?3 ELSE last_activity END
                 WHERE id = ?1",
            )
            .map_err(q("prepare touch thread"))?
            .execute(params![thread, joined, when, delta])
            .map_err(q("touch thread"))?;
        Ok(())
    }

    /// The threads of stored messages that reference `rfc_id` (its children), ascending.
    fn child_threads(&mut self, rfc_id: &str) -> Res<Vec<i64>> {
        let mut stmt = self
            .tx
            .prepare_cached(
                "SELECT DISTINCT c.thread_id FROM message_refs r JOIN messages c ON c.id = r.message_id
                 WHERE r.ref = ?1 AND c.account_id = ?2 ORDER BY c.thread_id",
            )
            .map_err(q("prepare children"))?;
        let rows = stmt
            .query_map(params![rfc_id, self.account_id], |r| r.get(0))
            .map_err(q("children"))?;
        rows.collect::<Result<_, _>>().map_err(q("child row"))
    }

    /// Merges into `thread` every other thread holding a child of the new message.
    fn adopt_children(&mut self, thread: i64, children: &[i64]) -> Res<()> {
        for &other in children.iter().filter(|&&t| t != thread) {
            merge_threads(self.tx, thread, other, self.cfg.max_participants)?;
            self.cache.participants.remove(&other);
            self.cache.participants.remove(&thread);
        }
        Ok(())
    }
}

/// Moves every message of `from` into `into`, deletes `from` and recomputes `into`.
pub(crate) fn merge_threads(
    tx: &Transaction<'_>,
    into: i64,
    from: i64,
    max_participants: usize,
) -> Res<()> {
    let gm: Option<String> = tx
        .query_row("SELECT gm_thread_id FROM threads WHERE id = ?1", [from], |r| r.get(0))
        .optional()
        .map_err(q("merge gm"))?
        .flatten();
    tx.execute("UPDATE messages SET thread_id = ?1 WHERE thread_id = ?2", [into, from])
        .map_err(q("merge move"))?;
    tx.execute("DELETE FROM threads WHERE id = ?1", [from]).map_err(q("merge delete"))?;
    if let Some(g) = gm {
        tx.execute(
            "UPDATE threads SET gm_thread_id = ?2 WHERE id = ?1 AND gm_thread_id IS NULL",
            params![into, g],
        )
        .map_err(q("merge gm move"))?;
    }
    recompute_thread(tx, into, max_participants)
}

/// Recomputes a thread's counts, activity span and participants from its messages.
pub(crate) fn recompute_thread(
    tx: &Transaction<'_>,
    thread: i64,
    max_participants: usize,
) -> Res<()> {
    let people: Vec<String> = {
        let mut stmt = tx
            .prepare_cached(
                "SELECT lower(trim(a.address)) FROM messages m JOIN message_addresses a ON a.message_id = m.id
                 WHERE m.thread_id = ?1 AND a.field != 'bcc' ORDER BY m.id, a.field, a.position",
            )
            .map_err(q("prepare recompute people"))?;
        let rows =
            stmt.query_map([thread], |r| r.get::<_, String>(0)).map_err(q("recompute people"))?;
        let mut out: Vec<String> = Vec::new();
        for r in rows {
            let p = r.map_err(q("recompute person"))?;
            if out.len() >= max_participants {
                break;
            }
            if !p.is_empty() && !out.contains(&p) {
                out.push(p);
            }
        }
        out
    };
    tx.prepare_cached(
        "UPDATE threads SET participants = ?2,
           message_count = (SELECT count(*) FROM messages WHERE thread_id = ?1 AND deleted_at IS NULL),
           first_activity = (SELECT min(coalesce(date, received_at)) FROM messages WHERE thread_id = ?1),
           last_activity = (SELECT max(coalesce(date, received_at)) FROM messages WHERE thread_id = ?1)
         WHERE id = ?1",
    )
    .map_err(q("prepare recompute"))?
    .execute(params![thread, people.join("\n")])
    .map_err(q("recompute"))?;
    Ok(())
}
