-- steward.db v7: a request an outside agent (an MCP client) asked for runs when that agent
-- makes the same call after a person approved it, once: the first such call consumes it.
ALTER TABLE approvals ADD COLUMN consumed_at INTEGER;
CREATE INDEX approvals_requester ON approvals (requested_by, tool, id);
