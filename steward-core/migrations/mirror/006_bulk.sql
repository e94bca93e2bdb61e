-- mirror.db v6: why a message's headers mark it as bulk or automated mail (List-Unsubscribe,
-- List-Id, Precedence, Auto-Submitted), for the deterministic prefilters of memory promotion
-- and the Action Center. NULL: not marked (or mirrored before v6; a changed message is
-- marked when read again).
ALTER TABLE messages ADD COLUMN bulk TEXT;
