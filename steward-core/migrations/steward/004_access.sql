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
