-- watches.db v3: watches with grants. `approval_id` is the person's approval of the authority
-- (a child inherits its parent's); `parent_id`, `attempt` and `context` (the parent event's
-- state and data, JSON) make a continuation's child watch. An action run carries its watch,
-- the checked arguments and the child it scheduled.
ALTER TABLE watches ADD COLUMN approval_id INTEGER;
ALTER TABLE watches ADD COLUMN parent_id INTEGER REFERENCES watches (id);
ALTER TABLE watches ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
ALTER TABLE watches ADD COLUMN context TEXT;
-- One watch per approval (a retried activation finds it).
CREATE UNIQUE INDEX watches_approval ON watches (approval_id)
    WHERE approval_id IS NOT NULL AND parent_id IS NULL;
ALTER TABLE watch_action_runs ADD COLUMN watch_id INTEGER REFERENCES watches (id);
ALTER TABLE watch_action_runs ADD COLUMN arguments TEXT;
ALTER TABLE watch_action_runs ADD COLUMN child_watch_id INTEGER REFERENCES watches (id);
CREATE INDEX watch_action_runs_rule ON watch_action_runs (watch_id, rule_id, tool);
