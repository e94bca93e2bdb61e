-- mirror.db v1: the normalized, rebuildable record of mail.
CREATE TABLE accounts (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL
);

CREATE TABLE mailboxes (
    id          INTEGER PRIMARY KEY,
    account_id  INTEGER NOT NULL REFERENCES accounts(id),
    name        TEXT NOT NULL,
    role        TEXT NOT NULL CHECK (role IN
                  ('inbox','sent','drafts','trash','junk','archive','all_mail','other')),
    UNIQUE (account_id, name)
);

CREATE TABLE threads (
    id              INTEGER PRIMARY KEY,
    account_id      INTEGER NOT NULL REFERENCES accounts(id),
    norm_subject    TEXT NOT NULL,
    gm_thread_id    TEXT,
    participants    TEXT NOT NULL DEFAULT '',   -- lowercased addresses, one per line, bounded
    first_activity  INTEGER,
    last_activity   INTEGER,
    message_count   INTEGER NOT NULL DEFAULT 0  -- messages not soft-deleted
);
CREATE INDEX threads_subject ON threads (account_id, norm_subject);
CREATE UNIQUE INDEX threads_gm ON threads (account_id, gm_thread_id) WHERE gm_thread_id IS NOT NULL;

CREATE TABLE messages (
    id              INTEGER PRIMARY KEY,
    account_id      INTEGER NOT NULL REFERENCES accounts(id),
    identity        TEXT NOT NULL,     -- normalized Message-ID, or 'surrogate:<sha256>'
    rfc_message_id  TEXT,              -- Message-ID without angle brackets
    thread_id       INTEGER NOT NULL REFERENCES threads(id),
    mailbox_id      INTEGER NOT NULL REFERENCES mailboxes(id),
    subject         TEXT NOT NULL DEFAULT '',
    from_name       TEXT,
    from_addr       TEXT,
    date            INTEGER,           -- Date header, unix seconds
    received_at     INTEGER,           -- delivery time when the source records one
    flags           INTEGER NOT NULL DEFAULT 0,  -- 1 seen, 2 answered, 4 flagged, 8 draft, 16 deleted
    body_state      TEXT NOT NULL CHECK (body_state IN ('full','partial','none')),
    size            INTEGER NOT NULL,
    attachment_count INTEGER NOT NULL DEFAULT 0,
    content_hash    TEXT NOT NULL,     -- sha256 of the RFC 822 bytes
    deleted_at      INTEGER,           -- soft delete: no physical path remains
    ingested_at     INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    UNIQUE (account_id, identity)
);
CREATE INDEX messages_rfc ON messages (account_id, rfc_message_id);
CREATE INDEX messages_thread ON messages (thread_id);
CREATE INDEX messages_date ON messages (date);

CREATE TABLE message_bodies (
    message_id  INTEGER PRIMARY KEY REFERENCES messages(id),
    body_text   TEXT NOT NULL
);

CREATE TABLE message_addresses (
    message_id  INTEGER NOT NULL REFERENCES messages(id),
    field       TEXT NOT NULL CHECK (field IN ('from','to','cc','bcc')),
    position    INTEGER NOT NULL,
    name        TEXT,
    address     TEXT NOT NULL,
    PRIMARY KEY (message_id, field, position)
) WITHOUT ROWID;
CREATE INDEX message_addresses_address ON message_addresses (address);

CREATE TABLE message_refs (
    message_id  INTEGER NOT NULL REFERENCES messages(id),
    position    INTEGER NOT NULL,      -- 0 = In-Reply-To, then References in header order
    ref         TEXT NOT NULL,
    PRIMARY KEY (message_id, position)
) WITHOUT ROWID;
CREATE INDEX message_refs_ref ON message_refs (ref);

CREATE TABLE source_files (
    id            INTEGER PRIMARY KEY,
    account_id    INTEGER NOT NULL REFERENCES accounts(id),
    path          TEXT NOT NULL,
    mailbox_id    INTEGER NOT NULL REFERENCES mailboxes(id),
    mtime_ns      INTEGER NOT NULL,
    size          INTEGER NOT NULL,
    error_code    TEXT,
    error_message TEXT,
    UNIQUE (account_id, path)
);

CREATE TABLE message_paths (
    file_id     INTEGER NOT NULL REFERENCES source_files(id) ON DELETE CASCADE,
    ordinal     INTEGER NOT NULL,      -- position inside the file (mbox); 0 otherwise
    message_id  INTEGER NOT NULL REFERENCES messages(id),
    mailbox_id  INTEGER NOT NULL REFERENCES mailboxes(id),
    offset      INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    flags       INTEGER NOT NULL,
    PRIMARY KEY (file_id, ordinal)
) WITHOUT ROWID;
CREATE INDEX message_paths_message ON message_paths (message_id);

CREATE TABLE blobs (
    sha256  TEXT PRIMARY KEY,
    size    INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE attachments (
    message_id  INTEGER NOT NULL REFERENCES messages(id),
    position    INTEGER NOT NULL,
    name        TEXT,
    mime_type   TEXT NOT NULL,
    size        INTEGER NOT NULL,
    sha256      TEXT REFERENCES blobs(sha256),   -- NULL when the bytes are not on disk (partial)
    PRIMARY KEY (message_id, position)
) WITHOUT ROWID;
CREATE INDEX attachments_sha ON attachments (sha256);
