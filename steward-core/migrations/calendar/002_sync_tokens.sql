-- A collection's sync token (RFC 6578 sync-collection), when its source gives one: the next
-- sync asks only for what changed since. NULL: list the whole collection.
ALTER TABLE calendars ADD COLUMN sync_token TEXT;
