-- A collection's sync token (RFC 6578 sync-collection), when its source gives one: the next
-- sync asks only for what changed since. NULL: list the whole collection.
ALTER TABLE calendars ADD COLUMN sync_token TEXT;

-- Bumped by every write that changes the events (or people): readers keep a parsed copy in
-- memory until it moves.
CREATE TABLE generation (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n  INTEGER NOT NULL
);
INSERT INTO generation (id, n) VALUES (1, 0);
