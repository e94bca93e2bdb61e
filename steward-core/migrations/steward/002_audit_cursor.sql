-- steward.db v2: how far approval events have been copied to the audit trail.
CREATE TABLE audit_cursor (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    seq  INTEGER NOT NULL
);
INSERT INTO audit_cursor (id, seq) VALUES (1, 0);
