-- Each address book's version as its source last showed it (a CardDAV listing's digest): a
-- book whose version has not changed is not downloaded again.
CREATE TABLE book_versions (
    source   TEXT PRIMARY KEY,  -- `<account>/<book>`
    version  TEXT NOT NULL
);

-- Bumped by every write that changes the events (or people): readers keep a parsed copy in
-- memory until it moves.
CREATE TABLE generation (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n  INTEGER NOT NULL
);
INSERT INTO generation (id, n) VALUES (1, 0);
