-- watches.db v2: a durable feed of delivery outcomes (delivered, or given up), written in the
-- same transaction as the event's status, so a live frontend can follow them by position.
CREATE TABLE watch_deliveries (
    seq       INTEGER PRIMARY KEY,
    event_id  INTEGER NOT NULL REFERENCES watch_events (id),
    watch_id  INTEGER NOT NULL REFERENCES watches (id),
    outcome   TEXT NOT NULL CHECK (outcome IN ('delivered','failed')),
    at        INTEGER NOT NULL
);
