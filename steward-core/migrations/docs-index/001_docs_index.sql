-- The documents under the roots cut into passages for search across them. Derived from the
-- files (through docs.db's extractions) and rebuilt by indexing again; nothing here is the truth.
CREATE TABLE doc_files (
    path    TEXT PRIMARY KEY,      -- canonical
    sha256  TEXT NOT NULL,         -- of the bytes indexed
    kind    TEXT NOT NULL,         -- pdf, docx, …; '' when the file gave no text
    unit    TEXT NOT NULL,         -- page, slide, sheet, part
    outcome TEXT NOT NULL          -- 'ok' or the error code of its extraction
);

CREATE TABLE chunks (
    id     INTEGER PRIMARY KEY,
    path   TEXT NOT NULL REFERENCES doc_files (path) ON DELETE CASCADE,
    unit   INTEGER NOT NULL,       -- 0-based page, slide or sheet
    name   TEXT,                   -- the sheet's name
    start  INTEGER NOT NULL,       -- byte offset in the unit's text
    text   TEXT NOT NULL
);
CREATE INDEX chunks_path ON chunks (path);

CREATE VIRTUAL TABLE chunks_fts USING fts5(
    text,
    content = 'chunks', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
