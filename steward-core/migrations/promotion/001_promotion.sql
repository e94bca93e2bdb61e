-- Mail -> memory promotion: one row per mail thread, the outcome for the thread as it was
-- (its canonical hash: the ordered message identities and content hashes). A thread whose hash
-- is unchanged costs nothing on the next pass; a new reply changes the hash and the thread is
-- considered again. Holds no mail text.
CREATE TABLE threads (
    thread_id   INTEGER PRIMARY KEY,
    hash        TEXT NOT NULL,
    outcome     TEXT NOT NULL CHECK (outcome IN ('filtered', 'skipped', 'proposed', 'deferred', 'failed')),
    -- Deferrals of this hash so far; at MAX_PROMOTION_ATTEMPTS the outcome becomes failed.
    attempts    INTEGER NOT NULL DEFAULT 0,
    -- A deferred thread is not tried before this time (Unix seconds).
    next_at     INTEGER,
    -- Why (a prefilter rule, the model's error), never the mail's words.
    reason      TEXT,
    proposals   INTEGER NOT NULL DEFAULT 0,
    updated_at  INTEGER NOT NULL
) STRICT;
