-- The memory index: derived from the note files under <home>/memory/notes (the truth), rebuilt
-- by reconcile. Opened with secure_delete, so a forgotten note's rows do not linger in freed
-- pages.
CREATE TABLE notes (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    file TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    subject TEXT,
    valid_from INTEGER,
    valid_to INTEGER,
    created INTEGER NOT NULL,
    -- When Steward knew it as a note: its review (acceptance), else its creation.
    known_at INTEGER NOT NULL,
    superseded_at INTEGER,
    -- From when the note that replaced it holds: until then this one still answers.
    replaced_from INTEGER,
    content_hash TEXT NOT NULL,
    -- The file as last read: a reconcile reads again only what changed.
    file_sha TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    meta TEXT NOT NULL,
    body TEXT NOT NULL
) STRICT;
CREATE INDEX notes_subject ON notes (subject);

-- BM25 over the fact and its subject (English stems: "work" finds "works"); external content,
-- so the text lives once (in notes).
CREATE VIRTUAL TABLE notes_fts USING fts5 (
    body, subject, content = 'notes', content_rowid = 'rowid',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER notes_ai AFTER INSERT ON notes BEGIN
    INSERT INTO notes_fts (rowid, body, subject)
    VALUES (new.rowid, new.body, coalesce(new.subject, ''));
END;
CREATE TRIGGER notes_ad AFTER DELETE ON notes BEGIN
    INSERT INTO notes_fts (notes_fts, rowid, body, subject)
    VALUES ('delete', old.rowid, old.body, coalesce(old.subject, ''));
END;
CREATE TRIGGER notes_au AFTER UPDATE ON notes BEGIN
    INSERT INTO notes_fts (notes_fts, rowid, body, subject)
    VALUES ('delete', old.rowid, old.body, coalesce(old.subject, ''));
    INSERT INTO notes_fts (rowid, body, subject)
    VALUES (new.rowid, new.body, coalesce(new.subject, ''));
END;
