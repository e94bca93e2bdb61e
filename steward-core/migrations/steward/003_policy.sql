-- steward.db v3: the person's tool policy, one row per version. Primary data (not
-- rebuildable): version 0 is the built-in default and has no row; every change appends.
CREATE TABLE policy_versions (
    version      INTEGER PRIMARY KEY,
    policy       TEXT NOT NULL,      -- the whole policy after the change (JSON)
    change       TEXT NOT NULL,      -- the change (JSON)
    changed_by   TEXT NOT NULL,      -- the person
    approval_id  INTEGER,            -- the approval that authorized an agent's proposal
    at           INTEGER NOT NULL
);
-- An approved proposal is applied once: replaying the approval later cannot undo a newer change.
CREATE UNIQUE INDEX policy_versions_approval ON policy_versions (approval_id)
    WHERE approval_id IS NOT NULL;
