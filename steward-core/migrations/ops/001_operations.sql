-- ops.db v1: the write journal. Primary, sensitive data: the complete executable input of every
-- side-effecting operation (the audit copy is the redacted one). Never deleted or rebuilt.
CREATE TABLE operations (
    id                     INTEGER PRIMARY KEY,
    kind                   TEXT NOT NULL,          -- mail.send, mail.reply, mail.send_later, …
    idempotency_key        TEXT NOT NULL UNIQUE,
    input                  TEXT NOT NULL,          -- canonical JSON, complete
    input_sha256           TEXT NOT NULL,
    expected               TEXT NOT NULL,          -- the observable outcome to confirm (JSON)
    approval_id            INTEGER,
    state                  TEXT NOT NULL CHECK (state IN ('scheduled','started','backend_returned',
                                   'unknown','failed','confirmed','needs_review','retry_exhausted')),
    attempts               INTEGER NOT NULL DEFAULT 0,
    confirmation_attempts  INTEGER NOT NULL DEFAULT 0,
    scheduled_for          INTEGER,                -- Unix seconds, for scheduled sends
    attempted_at           INTEGER,
    backend_result         TEXT,                   -- JSON
    error                  TEXT,
    evidence               TEXT,                   -- JSON
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL
);
CREATE INDEX operations_state ON operations (state, updated_at);
CREATE INDEX operations_due ON operations (scheduled_for) WHERE state = 'scheduled';

-- Every transition, in order.
CREATE TABLE operation_events (
    seq           INTEGER PRIMARY KEY,
    operation_id  INTEGER NOT NULL REFERENCES operations (id),
    from_state    TEXT,
    to_state      TEXT NOT NULL,
    at            INTEGER NOT NULL
);
CREATE INDEX operation_events_op ON operation_events (operation_id, seq);
