//! Frozen-schema upgrades of the primary stores, which are never rebuilt: `steward.db`
//! (approvals, PIN, policy, network access, jobs) and `watches.db` (definitions, the event
//! queue, deliveries, grants). Each historical version is written with the SQL it shipped —
//! frozen below, never edited: a later change goes in a new migration and a new constant —
//! filled with representative rows, then opened through the current API: every row survives
//! and still works (a pending approval is approved with the old PIN, an old watch is polled
//! and its event delivered), the later tables exist, and the upgraded schema is exactly a
//! fresh home's.

use std::{path::Path, sync::Arc};

use rusqlite::params;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use steward_core::{
    Steward,
    access::IdempotentStart,
    approval::{ApprovalStatus, NewApproval, Resolution, input_sha256},
    policy::Level,
    runner::{JobName, JobOutcome},
    watch::{
        Delivery, DeliveryError, DomainEvent, QueuedEvent, SourceError, WatchAdapter,
        WatchEventQuery,
    },
};

const NOW: i64 = 1_800_000_000;
/// Far after `NOW`: nothing in the fixtures expires during a test.
const LATER: i64 = 4_000_000_000;

// ---- steward.db, as each migration shipped (migrations/steward/NNN_*.sql) -------------------

const STEWARD_001_APPROVALS: &str = r"
-- steward.db v1: approvals. Primary data (not rebuildable): a person's decisions.
CREATE TABLE approvals (
    id                INTEGER PRIMARY KEY,
    batch_id          INTEGER,
    chat              TEXT,
    requested_by      TEXT NOT NULL,
    tool              TEXT NOT NULL,
    proposed_input    TEXT NOT NULL,   -- canonical JSON
    normalized_input  TEXT NOT NULL,   -- after the tool's preflight
    summary           TEXT NOT NULL,
    level             TEXT NOT NULL CHECK (level IN ('confirm','secure')),
    status            TEXT NOT NULL CHECK (status IN ('requested','approved','edited','denied',
                                                      'revision_requested','expired','cancelled')),
    decided_by        TEXT,
    note              TEXT,
    effective_input   TEXT,            -- what runs (canonical JSON)
    effective_sha256  TEXT,
    created_at        INTEGER NOT NULL,
    decided_at        INTEGER,
    expires_at        INTEGER NOT NULL
);
CREATE INDEX approvals_pending ON approvals (status, expires_at);
CREATE INDEX approvals_chat ON approvals (chat, id);
CREATE INDEX approvals_batch ON approvals (batch_id) WHERE batch_id IS NOT NULL;

-- Every transition and refused attempt, in order (the feed for subscriptions and the audit).
CREATE TABLE approval_events (
    seq          INTEGER PRIMARY KEY,
    approval_id  INTEGER NOT NULL,
    event        TEXT NOT NULL,
    actor        TEXT NOT NULL,
    at           INTEGER NOT NULL
);
CREATE INDEX approval_events_approval ON approval_events (approval_id, seq);

CREATE TABLE pin (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    hash    TEXT NOT NULL,                 -- Argon2id PHC string (salted)
    set_by  TEXT NOT NULL,
    set_at  INTEGER NOT NULL
);
CREATE TABLE pin_failures (
    at      INTEGER NOT NULL,
    person  TEXT NOT NULL
);
CREATE INDEX pin_failures_at ON pin_failures (at);
";

const STEWARD_002_AUDIT_CURSOR: &str = r"
-- steward.db v2: how far approval events have been copied to the audit trail.
CREATE TABLE audit_cursor (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    seq  INTEGER NOT NULL
);
INSERT INTO audit_cursor (id, seq) VALUES (1, 0);
";

const STEWARD_003_POLICY: &str = r"
-- steward.db v3: the person's tool policy, one row per version. Primary data (not
-- rebuildable): version 0 is the built-in default and has no row; every change appends.
CREATE TABLE policy_versions (
    version      INTEGER PRIMARY KEY,
    policy       TEXT NOT NULL,      -- the whole policy after the change (JSON)
    change       TEXT NOT NULL,      -- the change (JSON)
    changed_by   TEXT NOT NULL,      -- the person
    approval_id  INTEGER,            -- the approval that authorized an agent's proposal
    at           INTEGER NOT NULL
);
-- An approved proposal is applied once: replaying the approval later cannot undo a newer change.
CREATE UNIQUE INDEX policy_versions_approval ON policy_versions (approval_id)
    WHERE approval_id IS NOT NULL;
";

const STEWARD_004_ACCESS: &str = r"
-- steward.db v4: what a network frontend must remember across restarts.
-- Responses to state-changing requests sent with an Idempotency-Key: the same key and request
-- get the first response again; a status of NULL means the request is still in flight (or the
-- process stopped before it answered).
CREATE TABLE idempotent_requests (
    principal       TEXT NOT NULL,
    key             TEXT NOT NULL,
    request_sha256  TEXT NOT NULL,
    status          INTEGER,
    body            BLOB,
    created_at      INTEGER NOT NULL,
    PRIMARY KEY (principal, key)
) WITHOUT ROWID;
CREATE INDEX idempotent_requests_age ON idempotent_requests (created_at);

-- Paired devices: only the SHA-256 of each device token is kept.
CREATE TABLE devices (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL,
    token_sha256  TEXT NOT NULL UNIQUE,
    created_at    INTEGER NOT NULL,
    last_used_at  INTEGER,
    revoked_at    INTEGER
);

-- One-time pairing codes (hashed) and failed attempts, for the brute-force bound.
CREATE TABLE pairing_codes (
    code_sha256  TEXT PRIMARY KEY,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    used_at      INTEGER
);
CREATE TABLE pairing_failures (
    at  INTEGER NOT NULL
);
";

const STEWARD_005_JOBS: &str = r"
-- steward.db v5: the background runner's jobs, one row each: the last run and the next one
-- (what `steward jobs status`, the system status and the live feed show).
CREATE TABLE jobs (
    name              TEXT PRIMARY KEY,
    running           INTEGER NOT NULL DEFAULT 0 CHECK (running IN (0, 1)),
    last_started_at   INTEGER,
    last_finished_at  INTEGER,
    last_outcome      TEXT CHECK (last_outcome IN ('ok', 'failed', 'over_budget')),
    last_summary      TEXT,
    last_error        TEXT,
    last_seconds      REAL,
    next_run_at       INTEGER,
    failures          INTEGER NOT NULL DEFAULT 0,
    runs              INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
";

/// Every shipped version of `steward.db`, oldest first.
const STEWARD_006_TAINT: &str = r"
-- steward.db v6: an approval names the fields of its input that were copied from untrusted
-- content (mail, attachments, outside services) and where they came from (JSON; NULL: none).
ALTER TABLE approvals ADD COLUMN taint TEXT;
";

const STEWARD_VERSIONS: [&str; 6] = [
    STEWARD_001_APPROVALS,
    STEWARD_002_AUDIT_CURSOR,
    STEWARD_003_POLICY,
    STEWARD_004_ACCESS,
    STEWARD_005_JOBS,
    STEWARD_006_TAINT,
];

// ---- watches.db, as each migration shipped (migrations/watches/NNN_*.sql) -------------------

const WATCHES_001_WATCHES: &str = r"
-- watches.db v1: durable watches. Primary data: definitions and the scoped authority a person
-- approved, the last observed snapshot, the queue of matched events and (later) action claims.
CREATE TABLE watches (
    id             INTEGER PRIMARY KEY,
    source         TEXT NOT NULL,
    resource_ref   TEXT NOT NULL,
    rules          TEXT NOT NULL,           -- JSON array of WatchRule (relative times frozen)
    instruction    TEXT NOT NULL,
    chat           TEXT,
    status         TEXT NOT NULL CHECK (status IN ('active','stopped','expired','completed')),
    snapshot       TEXT NOT NULL,           -- JSON: the last observed state
    created_at     INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL,
    last_checked_at INTEGER,
    last_error     TEXT,
    last_error_at  INTEGER,
    ended_at       INTEGER
);
CREATE INDEX watches_active ON watches (status, id);

-- One queued turn per domain event, with every rule it matched.
CREATE TABLE watch_events (
    id             INTEGER PRIMARY KEY,
    event_key      TEXT NOT NULL UNIQUE,    -- <watch id>:<adapter event key>
    watch_id       INTEGER NOT NULL REFERENCES watches (id),
    event_type     TEXT NOT NULL,
    matched_rules  TEXT NOT NULL,           -- JSON array of rule ids
    event          TEXT NOT NULL,           -- JSON DomainEvent
    status         TEXT NOT NULL CHECK (status IN ('pending','delivered','failed')),
    notification   TEXT,                    -- the composed text, stored once made
    attempts       INTEGER NOT NULL DEFAULT 0,
    created_at     INTEGER NOT NULL,
    delivered_at   INTEGER,
    last_error     TEXT,
    last_error_at  INTEGER
);
CREATE INDEX watch_events_pending ON watch_events (status, id);

-- Participation: a `once` rule that took part in an event never matches again, even while that
-- event is still pending.
CREATE TABLE watch_event_rules (
    event_id  INTEGER NOT NULL REFERENCES watch_events (id),
    watch_id  INTEGER NOT NULL REFERENCES watches (id),
    rule_id   TEXT NOT NULL,
    PRIMARY KEY (event_id, rule_id)
) WITHOUT ROWID;
CREATE INDEX watch_event_rules_watch ON watch_event_rules (watch_id, rule_id);

-- Durable claims before a granted action (grants land with the capability registry).
CREATE TABLE watch_action_runs (
    id           INTEGER PRIMARY KEY,
    action_key   TEXT NOT NULL UNIQUE,      -- <event id>:<rule id>:<tool>
    event_id     INTEGER NOT NULL REFERENCES watch_events (id),
    rule_id      TEXT NOT NULL,
    tool         TEXT NOT NULL,
    status       TEXT NOT NULL,
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    outcome      TEXT,
    error        TEXT
);
";

const WATCHES_002_DELIVERIES: &str = r"
-- watches.db v2: a durable feed of delivery outcomes (delivered, or given up), written in the
-- same transaction as the event's status, so a live frontend can follow them by position.
CREATE TABLE watch_deliveries (
    seq       INTEGER PRIMARY KEY,
    event_id  INTEGER NOT NULL REFERENCES watch_events (id),
    watch_id  INTEGER NOT NULL REFERENCES watches (id),
    outcome   TEXT NOT NULL CHECK (outcome IN ('delivered','failed')),
    at        INTEGER NOT NULL
);
";

const WATCHES_003_GRANTS: &str = r"
-- watches.db v3: watches with grants. `approval_id` is the person's approval of the authority
-- (a child inherits its parent's); `parent_id`, `attempt` and `context` (the parent event's
-- state and data, JSON) make a continuation's child watch. An action run carries its watch,
-- the checked arguments and the child it scheduled.
ALTER TABLE watches ADD COLUMN approval_id INTEGER;
ALTER TABLE watches ADD COLUMN parent_id INTEGER REFERENCES watches (id);
ALTER TABLE watches ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
ALTER TABLE watches ADD COLUMN context TEXT;
-- One watch per approval (a retried activation finds it).
CREATE UNIQUE INDEX watches_approval ON watches (approval_id)
    WHERE approval_id IS NOT NULL AND parent_id IS NULL;
ALTER TABLE watch_action_runs ADD COLUMN watch_id INTEGER REFERENCES watches (id);
ALTER TABLE watch_action_runs ADD COLUMN arguments TEXT;
ALTER TABLE watch_action_runs ADD COLUMN child_watch_id INTEGER REFERENCES watches (id);
CREATE INDEX watch_action_runs_rule ON watch_action_runs (watch_id, rule_id, tool);
";

/// Every shipped version of `watches.db`, oldest first.
const WATCHES_VERSIONS: [&str; 3] =
    [WATCHES_001_WATCHES, WATCHES_002_DELIVERIES, WATCHES_003_GRANTS];

// ---- helpers ---------------------------------------------------------------------------------

fn schema(path: &Path) -> Vec<(String, String, String)> {
    let c = rusqlite::Connection::open(path).unwrap();
    let mut stmt = c
        .prepare(
            "SELECT type, name, coalesce(sql, '') FROM sqlite_master
             WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
        )
        .unwrap();
    stmt.query_map([], |r| {
        let sql: String = r.get(2)?;
        Ok((r.get(0)?, r.get(1)?, sql.split_whitespace().collect::<Vec<_>>().join(" ")))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn version(path: &Path) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

fn tables(path: &Path) -> Vec<String> {
    let c = rusqlite::Connection::open(path).unwrap();
    let mut stmt = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .unwrap();
    stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
}

/// Creates `home/<file>` at `version` from the frozen migrations, fills it with `rows` (given
/// the version) and sets `user_version`.
fn frozen(
    home: &Path,
    file: &str,
    migrations: &[&str],
    version: usize,
    rows: impl FnOnce(&rusqlite::Connection, usize),
) {
    std::fs::create_dir_all(home).unwrap();
    let c = rusqlite::Connection::open(home.join(file)).unwrap();
    for sql in &migrations[..version] {
        c.execute_batch(sql).unwrap();
    }
    rows(&c, version);
    c.pragma_update(None, "user_version", i64::try_from(version).unwrap()).unwrap();
}

fn sha256_hex(bytes: &[u8]) -> String {
    steward_core::mirror::hex(&Sha256::digest(bytes))
}

// ---- steward.db ------------------------------------------------------------------------------

const PIN: &str = "2468";
const DEVICE_TOKEN: &str = "frozen-fixture-device-token-0123456789abcdef";

fn pin_hash() -> String {
    use argon2::{Argon2, PasswordHasher as _, password_hash::SaltString};
    let salt = SaltString::encode_b64(b"frozen-fixture-salt").unwrap();
    Argon2::default().hash_password(PIN.as_bytes(), &salt).unwrap().to_string()
}

fn lunch() -> Value {
    json!({"title": "Lunch", "start": "2026-01-05T12:00:00+01:00"})
}

/// Rows a person's home held at `version` of `steward.db`.
fn steward_rows(c: &rusqlite::Connection, version: usize) {
    let send = json!({"body": "v1", "subject": "Draft", "to": ["bob@example.org"]}).to_string();
    let insert = "INSERT INTO approvals (id, batch_id, chat, requested_by, tool, proposed_input,
        normalized_input, summary, level, status, decided_by, note, effective_input,
        effective_sha256, created_at, decided_at, expires_at)
        VALUES (?1, ?2, ?3, 'agent:helper', ?4, ?5, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";
    // A Secure request still pending, an approved one, a denied member of a batch.
    c.execute(
        insert,
        params![
            1,
            None::<i64>,
            "chat-1",
            "mail.send",
            send,
            "Send Draft",
            "secure",
            "requested",
            None::<String>,
            None::<String>,
            None::<String>,
            None::<String>,
            1_700_000_000,
            None::<i64>,
            LATER
        ],
    )
    .unwrap();
    c.execute(
        insert,
        params![
            2,
            None::<i64>,
            "chat-1",
            "calendar.create_event",
            lunch().to_string(),
            "Lunch",
            "confirm",
            "approved",
            "ada",
            "fine",
            lunch().to_string(),
            input_sha256(&lunch()),
            1_700_000_010,
            1_700_000_020,
            LATER
        ],
    )
    .unwrap();
    c.execute(
        insert,
        params![
            3,
            7,
            None::<String>,
            "mail.send",
            send,
            "Batch member",
            "confirm",
            "denied",
            "ada",
            None::<String>,
            None::<String>,
            None::<String>,
            1_700_000_030,
            1_700_000_040,
            1_700_003_600
        ],
    )
    .unwrap();
    c.execute_batch(
        "INSERT INTO approval_events (seq, approval_id, event, actor, at) VALUES
            (1, 1, 'requested', 'agent:helper', 1700000000),
            (2, 2, 'requested', 'agent:helper', 1700000010),
            (3, 2, 'approved', 'ada', 1700000020),
            (4, 3, 'requested', 'agent:helper', 1700000030),
            (5, 3, 'denied', 'ada', 1700000040);
         INSERT INTO pin_failures (at, person) VALUES (1700000000, 'ada');",
    )
    .unwrap();
    c.execute(
        "INSERT INTO pin (id, hash, set_by, set_at) VALUES (1, ?1, 'ada', 1690000000)",
        [pin_hash()],
    )
    .unwrap();
    if version >= 3 {
        c.execute_batch(
            r#"INSERT INTO policy_versions (version, policy, change, changed_by, approval_id, at) VALUES
                (1, '{"rules":{},"deny_prefixes":["shell."],"allow_reads":[],"overrides":{}}',
                    '{"change":"deny_namespace","prefix":"shell"}', 'ada', NULL, 1700000100),
                (2, '{"rules":{"files.delete":{"rule":"deny","reason":"never"}},"deny_prefixes":["shell."],"allow_reads":[],"overrides":{"mail.send":"secure"}}',
                    '{"change":"set_level","tool":"mail.send","level":"secure"}', 'ada', 2, 1700000200);"#,
        )
        .unwrap();
    }
    if version >= 4 {
        c.execute(
            "INSERT INTO devices (id, name, token_sha256, created_at, last_used_at, revoked_at)
             VALUES (1, 'Ada''s phone', ?1, 1700000300, NULL, NULL),
                    (2, 'Old tablet', ?2, 1700000310, 1700000320, 1700000330)",
            params![sha256_hex(DEVICE_TOKEN.as_bytes()), sha256_hex(b"revoked-device-token")],
        )
        .unwrap();
        c.execute(
            "INSERT INTO idempotent_requests (principal, key, request_sha256, status, body, created_at)
             VALUES ('owner', 'k-1', ?1, 200, ?2, ?3)",
            params![sha256_hex(b"POST /approvals/1/decision"), b"{\"ok\":true}".to_vec(), NOW - 60],
        )
        .unwrap();
        c.execute_batch(
            "INSERT INTO pairing_codes (code_sha256, created_at, expires_at, used_at)
                 VALUES ('00ff', 1700000300, 1700000900, 1700000301);
             INSERT INTO pairing_failures (at) VALUES (1700000400);",
        )
        .unwrap();
    }
    if version >= 5 {
        c.execute_batch(
            "INSERT INTO jobs (name, running, last_started_at, last_finished_at, last_outcome,
                 last_summary, last_error, last_seconds, next_run_at, failures, runs)
             VALUES ('mail-reconcile', 0, 1799990000, 1799990005, 'ok', 'synced 3 messages',
                 NULL, 5.0, 1799990905, 0, 3);",
        )
        .unwrap();
    }
}

/// Opens every store of `steward.db` in a fresh home (the schema an upgrade must reach).
fn fresh_steward_db(home: &Path) -> Vec<(String, String, String)> {
    {
        let s = Steward::builder().home(home).open().unwrap();
        s.approvals().unwrap();
        s.policy_store().unwrap();
        s.access().unwrap();
        s.job_board().unwrap();
    }
    schema(&home.join("steward.db"))
}

#[test]
fn every_frozen_steward_db_upgrades_in_place_and_keeps_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = fresh_steward_db(&dir.path().join("fresh"));
    let latest = version(&dir.path().join("fresh/steward.db"));
    assert!(latest >= STEWARD_VERSIONS.len() as i64, "a migration was added: freeze it here");
    for v in 1..=STEWARD_VERSIONS.len() {
        let home = dir.path().join(format!("v{v}"));
        frozen(&home, "steward.db", &STEWARD_VERSIONS, v, steward_rows);
        let db = home.join("steward.db");
        assert_eq!(version(&db), v as i64);
        let s = Steward::builder().home(&home).open().unwrap();

        // Approvals: every row, its events and its hash; the PIN still verifies.
        let approvals = s.approvals().unwrap();
        let pending = approvals.get(1).unwrap();
        assert_eq!((pending.status, pending.level), (ApprovalStatus::Requested, Level::Secure));
        assert_eq!(pending.proposed_input["to"][0], "bob@example.org", "v{v}");
        let approved = approvals.get(2).unwrap();
        assert_eq!(approved.status, ApprovalStatus::Approved);
        assert_eq!(
            (approved.decided_by.as_deref(), approved.note.as_deref()),
            (Some("ada"), Some("fine"))
        );
        assert_eq!(*approvals.authorize_execution(2, &lunch()).unwrap().input(), lunch(), "v{v}");
        let denied = approvals.get(3).unwrap();
        assert_eq!((denied.status, denied.batch_id), (ApprovalStatus::Denied, Some(7)));
        assert_eq!(
            approvals.events(2).unwrap(),
            [
                ("requested".to_owned(), "agent:helper".to_owned(), 1_700_000_010),
                ("approved".to_owned(), "ada".to_owned(), 1_700_000_020)
            ]
        );
        assert_eq!(approvals.feed_position().unwrap(), 5, "v{v}");
        let ada = s.human("ada").unwrap();
        let now_approved =
            approvals.resolve(1, &Resolution::Approve, None, &ada, Some(PIN), None, NOW).unwrap();
        assert_eq!(now_approved.status, ApprovalStatus::Approved, "v{v}: the old PIN verifies");
        let new = approvals
            .request(
                &NewApproval {
                    chat: Some("chat-1".into()),
                    requested_by: "agent:helper".into(),
                    tool: "mail.send".into(),
                    input: json!({"to": ["carol@example.org"], "subject": "Hi", "body": "text"}),
                    summary: "Send Hi".into(),
                    level: Level::Confirm,
                    timeout_secs: None,
                    taint: None,
                },
                None,
                NOW,
            )
            .unwrap();
        assert_eq!(new.id, 4, "v{v}: ids go on after the old rows");

        // Policy: the versions, in force and in history (none before v3).
        let policy = s.policy_store().unwrap().current().unwrap();
        if v >= 3 {
            assert_eq!((policy.version, policy.approval_id), (2, Some(2)), "v{v}");
            assert_eq!(policy.policy.overrides.get("mail.send"), Some(&Level::Secure));
            assert!(policy.policy.deny_prefixes.contains("shell."));
            assert!(policy.policy.rules.contains_key("files.delete"));
            let history = s.policy_store().unwrap().history(10).unwrap();
            assert_eq!(history.iter().map(|p| p.version).collect::<Vec<_>>(), [2, 1]);
        } else {
            assert_eq!(policy.version, 0, "v{v}: the built-in default");
        }

        // Access: devices (a token still signs in, a revoked one does not), remembered answers.
        let access = s.access().unwrap();
        if v >= 4 {
            let devices = access.devices().unwrap();
            assert_eq!(devices.iter().map(|d| d.id).collect::<Vec<_>>(), [2, 1], "v{v}");
            assert_eq!(access.device_for_token(DEVICE_TOKEN, NOW).unwrap().unwrap().id, 1);
            assert!(access.device_for_token("revoked-device-token", NOW).unwrap().is_none());
            let replay = access
                .begin_idempotent("owner", "k-1", &sha256_hex(b"POST /approvals/1/decision"), NOW)
                .unwrap();
            assert_eq!(
                replay,
                IdempotentStart::Replay { status: 200, body: b"{\"ok\":true}".to_vec() }
            );
        } else {
            assert!(access.devices().unwrap().is_empty(), "v{v}");
        }

        // Jobs: the runner's record (none before v5).
        let job = s.job_board().unwrap().get(JobName::MailReconcile).unwrap();
        if v >= 5 {
            let job = job.unwrap();
            assert_eq!((job.runs, job.last_outcome), (3, Some(JobOutcome::Ok)), "v{v}");
            assert_eq!(job.last_summary.as_deref(), Some("synced 3 messages"));
        } else {
            assert!(job.is_none(), "v{v}");
        }
        drop(s);

        assert_eq!(version(&db), latest, "v{v}");
        for table in ["approvals", "audit_cursor", "policy_versions", "devices", "jobs"] {
            assert!(tables(&db).iter().any(|t| t == table), "v{v}: {table} missing");
        }
        assert_eq!(schema(&db), fresh, "v{v}: the upgraded schema is the fresh one");
    }
}

// ---- watches.db ------------------------------------------------------------------------------

/// A counter that reads 2 now: one `counter.changed` event per change of `n`.
struct Counter;

impl WatchAdapter for Counter {
    fn source(&self) -> &str {
        "counter"
    }
    fn snapshot(&self, _resource: &str, _now: i64) -> Result<Value, SourceError> {
        Ok(json!({"n": 2}))
    }
    fn events(&self, previous: &Value, current: &Value, now: i64) -> Vec<DomainEvent> {
        if previous["n"] == current["n"] {
            return Vec::new();
        }
        vec![DomainEvent {
            key: format!("n:{}", current["n"]),
            kind: "counter.changed".to_owned(),
            at: now,
            data: current.clone(),
            previous: Some(previous.clone()),
            current: Some(current.clone()),
            fallback_text: format!("The counter is {}.", current["n"]),
        }]
    }
    fn default_expiry(&self, _snapshot: &Value, created_at: i64) -> i64 {
        created_at + 3_600
    }
    fn is_terminal(&self, _snapshot: &Value) -> bool {
        false
    }
}

/// Delivers every event with its fallback text.
struct Accept;

impl Delivery for Accept {
    fn compose(&self, event: &QueuedEvent) -> Result<String, String> {
        Ok(event.event.fallback_text.clone())
    }
    fn send(&self, _event: &QueuedEvent, _text: &str) -> Result<(), DeliveryError> {
        Ok(())
    }
}

const RULES: &str = r#"[{"id":"changed","event":"counter.changed"}]"#;

/// Rows a home held at `version` of `watches.db`.
fn watches_rows(c: &rusqlite::Connection, version: usize) {
    let event = json!({"key": "n:5", "type": "counter.changed", "at": 1_700_000_200,
        "data": {"n": 5}, "previous": {"n": 4}, "current": {"n": 5},
        "fallback_text": "The counter is 5."});
    c.execute(
        "INSERT INTO watches (id, source, resource_ref, rules, instruction, chat, status, snapshot,
             created_at, expires_at, last_checked_at, last_error, last_error_at, ended_at)
         VALUES (1, 'counter', 'c-1', ?1, 'tell me when it moves', 'chat-1', 'active', '{\"n\":1}',
                 1700000000, ?2, 1700000100, 'timed out', 1700000100, NULL),
                (2, 'counter', 'c-2', ?1, 'once', NULL, 'completed', '{\"n\":5}',
                 1700000000, ?2, 1700000200, NULL, NULL, 1700000200)",
        params![RULES, LATER],
    )
    .unwrap();
    c.execute(
        "INSERT INTO watch_events (id, event_key, watch_id, event_type, matched_rules, event, status,
             notification, attempts, created_at, delivered_at, last_error, last_error_at)
         VALUES (1, '2:n:5', 2, 'counter.changed', '[\"changed\"]', ?1, 'pending', NULL, 1,
                 1700000200, NULL, 'busy line', 1700000210),
                (2, '2:n:4', 2, 'counter.changed', '[\"changed\"]', ?2, 'delivered', 'It is 4.', 0,
                 1700000150, 1700000160, NULL, NULL)",
        params![event.to_string(), json!({"key": "n:4", "type": "counter.changed", "at": 1_700_000_150,
            "data": {"n": 4}, "fallback_text": "The counter is 4."}).to_string()],
    )
    .unwrap();
    c.execute_batch(
        "INSERT INTO watch_event_rules (event_id, watch_id, rule_id) VALUES (1, 2, 'changed'), (2, 2, 'changed');
         INSERT INTO watch_action_runs (id, action_key, event_id, rule_id, tool, status, started_at,
             finished_at, outcome, error)
         VALUES (1, '1:changed:mail.send', 1, 'changed', 'mail.send', 'succeeded', 1700000300,
             1700000301, NULL, NULL);",
    )
    .unwrap();
    if version >= 2 {
        c.execute_batch(
            "INSERT INTO watch_deliveries (seq, event_id, watch_id, outcome, at)
             VALUES (1, 2, 2, 'delivered', 1700000160);",
        )
        .unwrap();
    }
    if version >= 3 {
        c.execute(
            "INSERT INTO watches (id, source, resource_ref, rules, instruction, chat, status, snapshot,
                 created_at, expires_at, last_checked_at, approval_id, parent_id, attempt, context)
             VALUES (3, 'counter', 'c-3', ?1, 'approved', NULL, 'active', '{\"n\":1}', 1700000400,
                     ?2, NULL, 42, NULL, 1, NULL),
                    (4, 'counter', 'c-4', ?1, 'retry', NULL, 'stopped', '{\"n\":1}', 1700000500,
                     ?2, NULL, 42, 3, 2, '{\"state\":{\"n\":1},\"event\":{\"n\":1}}')",
            params![RULES, LATER],
        )
        .unwrap();
        c.execute_batch(
            "INSERT INTO watch_action_runs (id, action_key, event_id, rule_id, tool, status,
                 started_at, finished_at, outcome, error, watch_id, arguments, child_watch_id)
             VALUES (2, '2:changed:mail.send', 2, 'changed', 'mail.send', 'failed', 1700000600,
                 1700000601, 'not_answered', 'no answer', 3, '{\"to\":[\"sister@example.com\"]}', 4);",
        )
        .unwrap();
    }
}

fn with_counter(home: &Path) -> Steward {
    Steward::builder().home(home).watch_adapter(Arc::new(Counter)).open().unwrap()
}

#[test]
fn every_frozen_watches_db_upgrades_in_place_and_keeps_running() {
    let dir = tempfile::tempdir().unwrap();
    let fresh_home = dir.path().join("fresh");
    with_counter(&fresh_home).watches().unwrap();
    let fresh = schema(&fresh_home.join("watches.db"));
    let latest = version(&fresh_home.join("watches.db"));
    assert!(latest >= WATCHES_VERSIONS.len() as i64, "a migration was added: freeze it here");
    for v in 1..=WATCHES_VERSIONS.len() {
        let home = dir.path().join(format!("v{v}"));
        frozen(&home, "watches.db", &WATCHES_VERSIONS, v, watches_rows);
        let db = home.join("watches.db");
        assert_eq!(version(&db), v as i64);
        let s = with_counter(&home);
        let w = s.watches().unwrap();

        // The old rows, read through the current types.
        let active = w.get(1).unwrap();
        assert_eq!((active.status.as_str(), active.snapshot.clone()), ("active", json!({"n": 1})));
        assert_eq!(active.rules[0].id, "changed", "v{v}");
        assert_eq!(active.rules[0].event.as_deref(), Some("counter.changed"));
        assert_eq!(active.last_error.as_deref(), Some("timed out"));
        assert_eq!((active.approval_id, active.parent_id, active.attempt), (None, None, 1));
        assert_eq!(w.get(2).unwrap().status, "completed");
        let events = w.events(&WatchEventQuery::default()).unwrap();
        assert_eq!(events.iter().map(|e| e.id).collect::<Vec<_>>(), [1, 2], "v{v}");
        assert_eq!((events[0].status.as_str(), events[0].event.key.as_str()), ("pending", "n:5"));
        assert_eq!(events[0].matched_rules, ["changed"]);
        assert_eq!(events[1].notification.as_deref(), Some("It is 4."));
        let runs = w.action_runs(1).unwrap();
        assert_eq!(runs.len(), 1, "v{v}");
        assert_eq!(
            (runs[0].action_key.as_str(), runs[0].tool.as_str(), runs[0].status.as_str()),
            ("1:changed:mail.send", "mail.send", "succeeded")
        );
        let mut active_watches = 1;
        if v >= 3 {
            active_watches = 2;
            let approved = w.get(3).unwrap();
            assert_eq!((approved.approval_id, approved.parent_id), (Some(42), None));
            let child = w.get(4).unwrap();
            assert_eq!(
                (child.parent_id, child.attempt, child.status.as_str()),
                (Some(3), 2, "stopped")
            );
            let later_runs = w.action_runs(2).unwrap();
            let run = &later_runs[0];
            assert_eq!((run.watch_id, run.child_watch_id), (3, Some(4)));
            assert_eq!(run.arguments, json!({"to": ["sister@example.com"]}));
            assert_eq!(run.outcome.as_deref(), Some("not_answered"));
        }
        let fed_before = w.deliveries_after(0, 100).unwrap().len();
        assert_eq!(fed_before, usize::from(v >= 2), "v{v}");

        // Still running: the active watches are polled, the old pending event and the new ones
        // delivered in order, each outcome in the delivery feed.
        let poll = w.poll(NOW).unwrap();
        assert_eq!(
            (poll.checked, poll.failed, poll.queued),
            (active_watches, 0, active_watches),
            "v{v}"
        );
        assert!(w.get(1).unwrap().last_error.is_none(), "a good snapshot clears the error");
        let report = w.deliver(&Accept, 20, NOW).unwrap();
        assert_eq!((report.delivered, report.failed), (1 + active_watches, 0), "v{v}");
        let feed = w.deliveries_after(0, 100).unwrap();
        assert_eq!(feed.len(), fed_before + 1 + active_watches, "v{v}");
        assert_eq!(feed[fed_before].event_id, 1, "v{v}: the old pending event first");
        assert!(feed.iter().all(|d| d.outcome == "delivered"));
        assert_eq!(w.poll(NOW + 60).unwrap().queued, 0, "v{v}: the same state again");
        drop(s);

        assert_eq!(version(&db), latest, "v{v}");
        assert!(tables(&db).iter().any(|t| t == "watch_deliveries"), "v{v}");
        assert_eq!(schema(&db), fresh, "v{v}: the upgraded schema is the fresh one");
    }
}

// ---- chats.db, as each migration shipped (migrations/chats/NNN_*.sql) ----------------------

const CHATS_001_CHATS: &str = r"
-- chats.db v1: conversations with the agent. Primary data (the person's chats); backed up.
CREATE TABLE chats (
    id          TEXT PRIMARY KEY,
    title       TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    deleted_at  INTEGER                      -- tombstone: content purged, id kept
) STRICT;

-- What the model sees next, in order: the person's messages, the assistant's answers and
-- tool calls, and one tool message answering each call.
CREATE TABLE messages (
    id           INTEGER PRIMARY KEY,
    chat_id      TEXT NOT NULL REFERENCES chats(id),
    run_id       TEXT,
    role         TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
    content      TEXT,
    tool_calls   TEXT,                       -- JSON [{id, name, arguments}] on an assistant message
    tool_call_id TEXT,                       -- on a tool message
    created_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX messages_by_chat ON messages(chat_id, id);

-- Every call the model proposed, with the gate's decision and what came of it.
CREATE TABLE tool_calls (
    id           INTEGER PRIMARY KEY,
    chat_id      TEXT NOT NULL REFERENCES chats(id),
    run_id       TEXT NOT NULL,
    call_id      TEXT NOT NULL,              -- the provider's id, answered by a tool message
    tool         TEXT NOT NULL,
    input        TEXT NOT NULL,              -- the arguments as the model wrote them
    input_key    TEXT NOT NULL,              -- tool + SHA-256 of the canonical input
    status       TEXT NOT NULL,
    approval_id  INTEGER,
    result       TEXT,                       -- what the model was told
    detail       TEXT,                       -- JSON: sources, data
    created_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    UNIQUE (chat_id, call_id)
) STRICT;
CREATE INDEX tool_calls_by_approval ON tool_calls(approval_id) WHERE approval_id IS NOT NULL;
CREATE INDEX tool_calls_by_key ON tool_calls(chat_id, input_key);

CREATE TABLE turns (
    run_id        TEXT PRIMARY KEY,
    chat_id       TEXT NOT NULL REFERENCES chats(id),
    status        TEXT NOT NULL CHECK (status IN ('running', 'ended', 'interrupted')),
    end_reason    TEXT,
    model_calls   INTEGER NOT NULL DEFAULT 0,
    tool_calls    INTEGER NOT NULL DEFAULT 0,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    error         TEXT,
    started_at    INTEGER NOT NULL,
    ended_at      INTEGER
) STRICT;
CREATE INDEX turns_by_chat ON turns(chat_id, started_at);

-- The turn events, in order: what a client resumes from with its cursor.
CREATE TABLE events (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id   TEXT NOT NULL,
    chat_id  TEXT NOT NULL,
    event    TEXT NOT NULL,                  -- JSON of the event
    at       INTEGER NOT NULL
) STRICT;
CREATE INDEX events_by_chat ON events(chat_id, seq);
";

const CHATS_002_SUMMARIES: &str = r"
-- chats.db v2: the summary that stands for a chat's oldest messages once they no longer fit the
-- model's context (written by a cheaper model tier; the messages themselves are kept).
CREATE TABLE summaries (
    chat_id     TEXT PRIMARY KEY REFERENCES chats(id),
    upto        INTEGER NOT NULL,            -- the last message id the summary stands for
    text        TEXT NOT NULL,
    model       TEXT NOT NULL,               -- the model that wrote it
    created_at  INTEGER NOT NULL
) STRICT;
";

const CHATS_003_TURN_NEXT_RUN: &str = r"
-- chats.db v3: the run that took the messages a turn ended without applying.
ALTER TABLE turns ADD COLUMN next_run TEXT;
";

const CHATS_VERSIONS: [&str; 3] = [CHATS_001_CHATS, CHATS_002_SUMMARIES, CHATS_003_TURN_NEXT_RUN];

fn chats_rows(c: &rusqlite::Connection, version: usize) {
    c.execute_batch(&format!(
        "INSERT INTO chats (id, title, created_at, updated_at) VALUES ('chat_old', 'Trip', {NOW}, {NOW});
         INSERT INTO messages (chat_id, run_id, role, content, tool_calls, tool_call_id, created_at)
           VALUES ('chat_old', 'run_old', 'user', 'When is my train?', NULL, NULL, {NOW}),
                  ('chat_old', 'run_old', 'assistant', NULL,
                   '[{{\"id\":\"c1\",\"name\":\"trains.next\",\"arguments\":\"{{}}\"}}]', NULL, {NOW}),
                  ('chat_old', 'run_old', 'tool', 'The 9:05 to Milano.', NULL, 'c1', {NOW}),
                  ('chat_old', 'run_old', 'assistant', 'At 9:05.', NULL, NULL, {NOW});
         INSERT INTO tool_calls (chat_id, run_id, call_id, tool, input, input_key, status, result, created_at)
           VALUES ('chat_old', 'run_old', 'c1', 'trains.next', '{{}}', 'trains.next:x', 'ran',
                   'The 9:05 to Milano.', {NOW});
         INSERT INTO turns (run_id, chat_id, status, end_reason, model_calls, tool_calls,
                            input_tokens, output_tokens, started_at, ended_at)
           VALUES ('run_old', 'chat_old', 'ended', 'completed', 2, 1, 300, 20, {NOW}, {NOW});
         INSERT INTO events (run_id, chat_id, event, at)
           VALUES ('run_old', 'chat_old', '{{\"type\":\"turn_ended\",\"reason\":\"completed\",\"error\":null,\"next_run\":\"run_next\"}}', {NOW});"
    ))
    .unwrap();
    if version >= 3 {
        // A v3 home recorded the hand-over with the turn itself.
        c.execute("UPDATE turns SET next_run = 'run_next' WHERE run_id = 'run_old'", []).unwrap();
    }
}

#[test]
fn every_frozen_chats_db_upgrades_in_place_and_keeps_its_conversations() {
    use steward_core::{
        agent::{Agent, AgentConfig, EndReason, TurnEvent},
        tools::Toolbox,
    };
    let open_agent = |home: &Path| {
        let s = Arc::new(Steward::builder().home(home).open().unwrap());
        Agent::open(Arc::new(Toolbox::new(s)), AgentConfig::default()).unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let fresh_home = dir.path().join("fresh");
    drop(open_agent(&fresh_home));
    let fresh = schema(&fresh_home.join("chats.db"));
    let latest = version(&fresh_home.join("chats.db"));
    assert!(latest >= CHATS_VERSIONS.len() as i64, "a migration was added: freeze it here");
    for v in 1..=CHATS_VERSIONS.len() {
        let home = dir.path().join(format!("v{v}"));
        frozen(&home, "chats.db", &CHATS_VERSIONS, v, chats_rows);
        let db = home.join("chats.db");
        let agent = open_agent(&home);
        let chat = agent.chat("chat_old").unwrap();
        assert_eq!(chat.title, "Trip", "v{v}");
        let msgs = agent.messages("chat_old", 0, 50).unwrap();
        assert_eq!(msgs.len(), 4, "v{v}");
        assert_eq!(msgs[1].tool_calls[0].name, "trains.next");
        assert_eq!(msgs[2].tool_call_id.as_deref(), Some("c1"));
        let calls = agent.tool_calls("chat_old").unwrap();
        assert_eq!((calls[0].tool.as_str(), calls[0].status.as_str()), ("trains.next", "ran"));
        let r = agent.result("run_old").unwrap();
        assert_eq!((r.end_reason, r.text.as_str()), (EndReason::Completed, "At 9:05."), "v{v}");
        assert_eq!(
            r.next_run.as_deref(),
            Some("run_next"),
            "v{v}: the hand-over its turn_ended named is carried onto the turn"
        );
        let events = agent.events_after(Some("chat_old"), 0, 10).unwrap();
        assert!(
            matches!(
                events[0].event,
                TurnEvent::TurnEnded { reason: EndReason::Completed, next_run: Some(_), .. }
            ),
            "v{v}: an old event reads as the current type"
        );
        // Still a live chat: it can be renamed and deleted, and the deletion purges it.
        agent.rename_chat("chat_old", "Train").unwrap();
        agent.delete_chat("chat_old").unwrap();
        assert!(agent.messages("chat_old", 0, 50).is_err(), "v{v}");
        drop(agent);
        assert_eq!(version(&db), latest, "v{v}");
        assert!(tables(&db).iter().any(|t| t == "summaries"), "v{v}");
        assert_eq!(schema(&db), fresh, "v{v}: the upgraded schema is the fresh one");
    }
}
