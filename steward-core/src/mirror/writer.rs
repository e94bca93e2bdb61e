//! Applying parsed files to mirror.db inside one transaction: identities, paths, mailbox
//! attribution, thread resolution, attachments. Every function here takes the open
//! `&Transaction`; nothing here commits.

use std::collections::{BTreeSet, HashMap};

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
    pub(crate) result: Result<Vec<PreparedMessage>, FileError>,
}

/// A parsed message plus the blob hash of each attachment (None when the bytes were missing).
#[derive(Debug)]
pub(crate) struct PreparedMessage {
    pub(crate) msg: ParsedMessage,
    pub(crate) attachment_shas: Vec<Option<String>>,
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
}

/// Threads examined from each end of the window by the subject fallback.
const SUBJECT_CANDIDATES: i64 = 16;

/// Most thread participant lists cached during one run.
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
pub(crate) fn normalize_message_id(id: &str) -> String {
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
    pub(crate) fn apply(
        &mut self,
        account: &str,
        pf: &PreparedFile,
        is_new: bool,
        tally: &mut Tally,
    ) -> Res<()> {
        let (mailbox_id, role) = self.mailbox(&pf.file.mailbox)?;
        let path = pf.file.path.to_string_lossy();
        let (code, message) = match &pf.result {
            Ok(_) => (None, None),
            Err(e) => (Some(e.code()), Some(e.to_string())),
        };
        let file_id: i64 = self
            .tx
            .prepare_cached(
                "INSERT INTO source_files (account_id, path, mailbox_id, mtime_ns, size, error_code, error_message)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (account_id, path) DO UPDATE SET
                   mailbox_id = excluded.mailbox_id, mtime_ns = excluded.mtime_ns, size = excluded.size,
                   error_code = excluded.error_code, error_message = excluded.error_message
                 RETURNING id",
            )
            .map_err(q("prepare source file"))?
            .query_row(
                params![
                    self.account_id,
                    path,
                    mailbox_id,
                    pf.file.mtime_ns,
                    i64::try_from(pf.file.size).unwrap_or(i64::MAX),
                    code,
                    message
                ],
                |r| r.get(0),
            )
            .map_err(q("upsert source file"))?;
        // Paths this file held before (a changed file): drop them, the new parse re-adds.
        let previous: Vec<i64> = if is_new {
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
            let message_id =
                self.upsert_message(account, pm, mailbox_id, role, &previous, tally)?;
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
        account: &str,
        pm: &PreparedMessage,
        mailbox_id: i64,
        role: MailboxRole,
        previous: &[i64],
        tally: &mut Tally,
    ) -> Res<i64> {
        let m = &pm.msg;
        let identity = identity_of(account, m);
        let content_hash = hex(&m.content_hash);
        let existing: Option<(i64, i64, String, i64, String, String)> = self
            .tx
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
            .map_err(q("find message"))?;

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
            let content_changed = cur_hash != content_hash && (same_file || more_complete);
            if content_changed {
                self.write_content(id, m, &pm.attachment_shas, true)?;
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

        let norm_subject = normalize_subject(m.subject.as_deref().unwrap_or(""));
        let participants = participants_of(m);
        let when = m.date.or(m.received_at);
        let rfc_id = m.message_id.as_deref().map(normalize_message_id);
        let children = match &rfc_id {
            Some(r) => self.child_threads(r)?,
            None => Vec::new(),
        };
        let thread_id = self.resolve_thread(m, &norm_subject, &participants, when, &children)?;
        let from = m.from.first();
        let id: i64 = self
            .tx
            .prepare_cached(
                "INSERT INTO messages (account_id, identity, rfc_message_id, thread_id, mailbox_id, subject,
                   from_name, from_addr, date, received_at, flags, body_state, size, attachment_count,
                   content_hash, ingested_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?16)
                 RETURNING id",
            )
            .map_err(q("prepare insert message"))?
            .query_row(
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
                    self.now
                ],
                |r| r.get(0),
            )
            .map_err(q("insert message"))?;
        self.write_content(id, m, &pm.attachment_shas, false)?;
        self.touch_thread(thread_id, &participants, when, 1)?;
        self.adopt_children(thread_id, &children)?;
        tally.added += 1;
        Ok(id)
    }

    /// Writes body, addresses, references and attachments (replacing old ones on update).
    fn write_content(
        &mut self,
        id: i64,
        m: &ParsedMessage,
        shas: &[Option<String>],
        replace: bool,
    ) -> Res<()> {
        let tx = self.tx;
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
                   body_state = ?7, size = ?8, attachment_count = ?9, content_hash = ?10 WHERE id = ?1",
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
                hex(&m.content_hash)
            ])
            .map_err(q("update content"))?;
        }
        tx.prepare_cached(
            "INSERT OR REPLACE INTO message_bodies (message_id, body_text) VALUES (?1, ?2)",
        )
        .map_err(q("prepare body"))?
        .execute(params![id, m.body_text])
        .map_err(q("insert body"))?;
        // One statement each for the address and reference lists (json_each), not one per item.
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
            let json = serde_json::to_string(&rows).unwrap_or_else(|_| "[]".to_owned());
            tx.prepare_cached(
                "INSERT OR IGNORE INTO message_addresses (message_id, field, position, name, address)
                 SELECT ?1, value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(?2)",
            )
            .map_err(q("prepare addresses"))?
            .execute(params![id, json])
            .map_err(q("insert addresses"))?;
        }
        let refs: Vec<String> =
            m.in_reply_to.iter().chain(&m.references).map(|r| normalize_message_id(r)).collect();
        if !refs.is_empty() {
            let json = serde_json::to_string(&refs).unwrap_or_else(|_| "[]".to_owned());
            tx.prepare_cached(
                "INSERT OR IGNORE INTO message_refs (message_id, position, ref)
                 SELECT ?1, key, value FROM json_each(?2)",
            )
            .map_err(q("prepare refs"))?
            .execute(params![id, json])
            .map_err(q("insert refs"))?;
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
        m: &ParsedMessage,
        norm_subject: &str,
        participants: &BTreeSet<String>,
        when: Option<i64>,
        children: &[i64],
    ) -> Res<i64> {
        let tx = self.tx;
        // 2. Gmail thread id.
        if let Some(g) = &m.gm_thread_id {
            let found: Option<i64> = tx
                .prepare_cached(
                    "SELECT id FROM threads WHERE account_id = ?1 AND gm_thread_id = ?2",
                )
                .map_err(q("prepare gm thread"))?
                .query_row(params![self.account_id, g], |r| r.get(0))
                .optional()
                .map_err(q("find gm thread"))?;
            if let Some(t) = found {
                return Ok(t);
            }
        }
        // 3. RFC reply graph: In-Reply-To first, then References from the nearest ancestor. One
        // query fetches every known ancestor; priority is applied here.
        let wanted: Vec<String> = m
            .in_reply_to
            .iter()
            .chain(m.references.iter().rev())
            .map(|r| normalize_message_id(r))
            .collect();
        if !wanted.is_empty() {
            let json = serde_json::to_string(&wanted).unwrap_or_else(|_| "[]".to_owned());
            let mut stmt = tx
                .prepare_cached(
                    "SELECT rfc_message_id, thread_id FROM messages
                     WHERE account_id = ?1 AND rfc_message_id IN (SELECT value FROM json_each(?2))",
                )
                .map_err(q("prepare parents"))?;
            let found: HashMap<String, i64> = stmt
                .query_map(params![self.account_id, json], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(q("find parents"))?
                .collect::<Result<_, _>>()
                .map_err(q("read parent"))?;
            if let Some(t) = wanted.iter().find_map(|w| found.get(w)) {
                return self.claim_gm(*t, m);
            }
        }
        // 3b. A parent arriving after its children joins them.
        if let Some(&t) = children.first() {
            return self.claim_gm(t, m);
        }
        // 4. Normalized subject + a shared participant within the window: the threads whose
        // span starts closest before the window's end and those whose span ends closest after
        // its start (each an index range scan), checked newest activity first.
        if let (false, Some(when)) = (norm_subject.is_empty(), when) {
            let window = self.cfg.window_secs;
            let mut candidates: Vec<(i64, i64, String, Option<String>)> = Vec::new();
            for sql in [
                "SELECT id, last_activity, participants, gm_thread_id FROM threads
                 WHERE account_id = ?1 AND norm_subject = ?2 AND first_activity <= ?3 + ?4
                 ORDER BY first_activity DESC LIMIT ?5",
                "SELECT id, last_activity, participants, gm_thread_id FROM threads
                 WHERE account_id = ?1 AND norm_subject = ?2 AND last_activity >= ?3 - ?4
                 ORDER BY last_activity ASC LIMIT ?5",
            ] {
                let mut stmt = tx.prepare_cached(sql).map_err(q("prepare subject threads"))?;
                let rows = stmt
                    .query_map(
                        params![self.account_id, norm_subject, when, window, SUBJECT_CANDIDATES],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                    )
                    .map_err(q("find subject threads"))?;
                for row in rows {
                    candidates.push(row.map_err(q("read subject thread"))?);
                }
            }
            candidates.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            candidates.dedup_by_key(|c| c.0);
            let first_of = |id: i64| -> Res<Option<i64>> {
                tx.prepare_cached("SELECT first_activity FROM threads WHERE id = ?1")
                    .map_err(q("prepare thread span"))?
                    .query_row([id], |r| r.get(0))
                    .map_err(q("thread span"))
            };
            for (id, last, people, gm) in candidates {
                let gm_conflict = matches!((&gm, &m.gm_thread_id), (Some(a), Some(b)) if a != b);
                if gm_conflict
                    || last < when - window
                    || !people.lines().any(|p| participants.contains(p))
                {
                    continue;
                }
                if first_of(id)?.is_some_and(|first| first <= when + window) {
                    return self.claim_gm(id, m);
                }
            }
        }
        // 5. A new thread.
        tx.prepare_cached(
            "INSERT INTO threads (account_id, norm_subject, gm_thread_id, participants, first_activity, last_activity, message_count)
             VALUES (?1, ?2, ?3, '', ?4, ?4, 0) RETURNING id",
        )
        .map_err(q("prepare new thread"))?
        .query_row(params![self.account_id, norm_subject, m.gm_thread_id, when], |r| r.get(0))
        .map_err(q("new thread"))
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
