-- A UID the source rewrote after Steward wrote the event (some servers assign their own): the
-- id Steward handed out for the UID it wrote keeps naming the event under the new one.
CREATE TABLE uid_aliases (
    alias_id    TEXT PRIMARY KEY,      -- Steward's id of the event under the UID it wrote
    calendar_id TEXT NOT NULL,
    alias       TEXT NOT NULL,         -- the UID Steward wrote
    uid         TEXT NOT NULL,         -- the UID the source keeps
    created_at  INTEGER NOT NULL
);
