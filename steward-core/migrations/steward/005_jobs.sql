-- steward.db v5: the background runner's jobs, one row each: the last run and the next one
-- (what `steward jobs status`, the system status and the live feed show).
CREATE TABLE jobs (
    name              TEXT PRIMARY KEY,
    running           INTEGER NOT NULL DEFAULT 0 CHECK (running IN (0, 1)),
    last_started_at   INTEGER,
    last_finished_at  INTEGER,
    last_outcome      TEXT CHECK (last_outcome IN ('ok', 'failed', 'over_budget')),
    last_summary      TEXT,
    last_error        TEXT,
    last_seconds      REAL,
    next_run_at       INTEGER,
    failures          INTEGER NOT NULL DEFAULT 0,
    runs              INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
