-- Calendars as their sources hold them: collections, their items (one file or resource each,
-- with the tag that says whether it changed) and the events read from them, soft-deleted when
-- their item vanishes. Times are UTC seconds; floating and all-day times are placed in the
-- person's zone at index time, and windows are widened by a day when they are asked about.
CREATE TABLE calendars (
    id          TEXT PRIMARY KEY,      -- `<account>/<collection>`
    account     TEXT NOT NULL,
    name        TEXT,                  -- displayname
    color       TEXT,
    updated_at  INTEGER NOT NULL
);
CREATE TABLE items (
    calendar_id TEXT NOT NULL REFERENCES calendars(id),
    href        TEXT NOT NULL,         -- the file's name in its collection
    etag        TEXT NOT NULL,         -- size and mtime of the file (vdirsyncer's filesystem tag)
    deleted_at  INTEGER,
    PRIMARY KEY (calendar_id, href)
);
CREATE TABLE events (
    rowid        INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE, -- Steward's id: calendar, UID and recurrence id
    calendar_id  TEXT NOT NULL REFERENCES calendars(id),
    href         TEXT NOT NULL,
    uid          TEXT NOT NULL,
    recurrence_id TEXT NOT NULL DEFAULT '',
    summary      TEXT NOT NULL,
    location     TEXT NOT NULL DEFAULT '',
    description  TEXT NOT NULL DEFAULT '',
    attendees    TEXT NOT NULL DEFAULT '',  -- names and addresses, organizer first
    start_utc    INTEGER NOT NULL,     -- the earliest time it can take (an override: its own
    end_utc      INTEGER,              -- start or the occurrence it moves); NULL: no known end
    event        TEXT NOT NULL,        -- the event (JSON)
    deleted_at   INTEGER
);
CREATE INDEX events_window ON events (start_utc, end_utc) WHERE deleted_at IS NULL;
CREATE INDEX events_item ON events (calendar_id, href);
CREATE INDEX events_uid ON events (calendar_id, uid);
CREATE VIRTUAL TABLE events_fts USING fts5(
    summary, location, description, attendees,
    content = 'events', content_rowid = 'rowid',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER events_ai AFTER INSERT ON events BEGIN
    INSERT INTO events_fts (rowid, summary, location, description, attendees)
    VALUES (new.rowid, new.summary, new.location, new.description, new.attendees);
END;
CREATE TRIGGER events_ad AFTER DELETE ON events BEGIN
    INSERT INTO events_fts (events_fts, rowid, summary, location, description, attendees)
    VALUES ('delete', old.rowid, old.summary, old.location, old.description, old.attendees);
END;
CREATE TRIGGER events_au AFTER UPDATE ON events BEGIN
    INSERT INTO events_fts (events_fts, rowid, summary, location, description, attendees)
    VALUES ('delete', old.rowid, old.summary, old.location, old.description, old.attendees);
    INSERT INTO events_fts (rowid, summary, location, description, attendees)
    VALUES (new.rowid, new.summary, new.location, new.description, new.attendees);
END;
