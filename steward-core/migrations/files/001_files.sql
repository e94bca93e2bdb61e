-- The paths under the person's file roots, as the last walk found them: regular files only
-- (links are not followed; secrets and the Steward home are never listed). Rebuilt by walking
-- again; nothing here is the truth, the folders are.
CREATE TABLE files (
    path    TEXT PRIMARY KEY,      -- canonical
    root    TEXT NOT NULL,         -- the canonical root it was found under
    name    TEXT NOT NULL,         -- the file name as written
    folded  TEXT NOT NULL,         -- the name lowercased (NFKC), for name matches
    ext     TEXT NOT NULL,         -- the extension, lowercase, without the dot ('' when none)
    size    INTEGER NOT NULL,
    mtime   INTEGER NOT NULL,      -- Unix seconds
    seen    INTEGER NOT NULL       -- the walk that last found it
);
CREATE INDEX files_root ON files (root, seen);

-- Bumped by every walk that changed the list: readers keep a copy in memory until it moves.
CREATE TABLE generation (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n  INTEGER NOT NULL
);
INSERT INTO generation (id, n) VALUES (1, 0);
