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
