-- usage.db v1: one terminal row per model request (and, later, per tool timing), with the
-- attempts it took kept separately so nothing is counted twice.
CREATE TABLE requests (
    id                INTEGER PRIMARY KEY,
    at                INTEGER NOT NULL,          -- Unix seconds, when it started
    kind              TEXT NOT NULL DEFAULT 'llm',
    service           TEXT NOT NULL,             -- 'unknown' when the caller gave none
    action            TEXT NOT NULL,
    attributed        INTEGER NOT NULL,          -- 0 when service or action was missing
    capability        TEXT NOT NULL,
    target            TEXT,                      -- the target that answered (or the last tried)
    model             TEXT,
    outcome           TEXT NOT NULL CHECK (outcome IN ('ok','failed','interrupted','deadline')),
    streamed          INTEGER NOT NULL,
    input_tokens      INTEGER NOT NULL DEFAULT 0,
    output_tokens     INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    cost_micros       INTEGER NOT NULL DEFAULT 0, -- millionths of a USD, from the rates table
    priced            INTEGER NOT NULL DEFAULT 0, -- 0 when the model has no configured rates
    latency_ms        INTEGER NOT NULL,
    attempts          INTEGER NOT NULL,
    error             TEXT
);
CREATE INDEX requests_at ON requests (at);

CREATE TABLE attempts (
    request_id  INTEGER NOT NULL REFERENCES requests (id),
    n           INTEGER NOT NULL,               -- 1-based, in order
    target      TEXT NOT NULL,
    model       TEXT NOT NULL,
    status      INTEGER,                        -- HTTP status, when one came back
    outcome     TEXT NOT NULL,                  -- ok, failed
    latency_ms  INTEGER NOT NULL,
    error       TEXT,
    PRIMARY KEY (request_id, n)
) WITHOUT ROWID;
