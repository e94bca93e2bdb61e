-- mirror.db v5: a running sync records how far it is, in the same transaction as each batch, so
-- another process (the server's live feed, a status screen) can follow an ingest it did not start.
ALTER TABLE sync_runs ADD COLUMN files_total INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sync_runs ADD COLUMN files_done INTEGER NOT NULL DEFAULT 0;
