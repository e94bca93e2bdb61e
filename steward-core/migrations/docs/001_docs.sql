-- Documents' text as extracted, by the SHA-256 of the file's bytes, and which bytes each path
-- held when it was last read (so an unchanged file is never read whole again). A cache: bounded
-- by [limits] docs_cache_mb, least recently used first out; deleting it loses nothing.
CREATE TABLE extractions (
    sha256  TEXT PRIMARY KEY,
    outcome TEXT NOT NULL,         -- JSON: {"ok": Extracted} or {"err": ExtractError}
    bytes   INTEGER NOT NULL,      -- length of outcome
    used    INTEGER NOT NULL       -- a counter: higher is more recent
);
CREATE INDEX extractions_used ON extractions (used);

CREATE TABLE paths (
    path     TEXT PRIMARY KEY,     -- canonical
    size     INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    sha256   TEXT NOT NULL
);
