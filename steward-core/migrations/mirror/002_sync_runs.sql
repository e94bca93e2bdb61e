-- mirror.db v2: a record of every sync run, so derived indexes can compare watermarks and a person
-- can see when each source was last reconciled and what it found.
CREATE TABLE sync_runs (
    id              INTEGER PRIMARY KEY,
    account_id      INTEGER NOT NULL REFERENCES accounts(id),
    mode            TEXT NOT NULL CHECK (mode IN ('backfill','reconcile')),
    started_at      INTEGER NOT NULL,
    finished_at     INTEGER,
    files_scanned   INTEGER NOT NULL DEFAULT 0,
    added           INTEGER NOT NULL DEFAULT 0,
    updated         INTEGER NOT NULL DEFAULT 0,
    paths_removed   INTEGER NOT NULL DEFAULT 0,
    soft_deleted    INTEGER NOT NULL DEFAULT 0,
    errors          INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sync_runs_account ON sync_runs (account_id, id);
