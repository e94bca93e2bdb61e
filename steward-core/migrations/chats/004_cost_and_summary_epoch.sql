-- chats.db v4: what a turn's model calls cost, millionths of a USD (`[llm.rates]`; bounded per
-- turn), and a chat's summary epoch: bumped when a decision changes a message a summary may
-- stand for, so a summary written from the older text is not stored over it.
ALTER TABLE turns ADD COLUMN cost_micros INTEGER NOT NULL DEFAULT 0;
ALTER TABLE chats ADD COLUMN summary_epoch INTEGER NOT NULL DEFAULT 0;
