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
