-- Each address book's version as its source last showed it (a CardDAV listing's digest): a
-- book whose version has not changed is not downloaded again.
CREATE TABLE book_versions (
    source   TEXT PRIMARY KEY,  -- `<account>/<book>`
    version  TEXT NOT NULL
);
