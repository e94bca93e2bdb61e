-- The cards of every address book as read (normalized), and the people merged from them.
CREATE TABLE cards (
    source   TEXT NOT NULL,   -- `<account>/<book>`
    uid      TEXT NOT NULL,   -- the card's UID in that book
    card     TEXT NOT NULL,   -- the normalized card (JSON)
    PRIMARY KEY (source, uid)
);
CREATE TABLE contacts (
    id       TEXT PRIMARY KEY,  -- Steward's id for the person (stable across re-reads)
    name     TEXT NOT NULL,
    contact  TEXT NOT NULL      -- the merged contact (JSON)
);
CREATE TABLE accounts (
    account     TEXT PRIMARY KEY,
    indexed_at  INTEGER NOT NULL,
    cards       INTEGER NOT NULL,
    errors      INTEGER NOT NULL
);
