-- A calendar its source no longer lists is retired (its items and events soft-deleted, its
-- sync token dropped); listed again, it comes back whole.
ALTER TABLE calendars ADD COLUMN retired_at INTEGER;
