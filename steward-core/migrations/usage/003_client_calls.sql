-- usage.db v3: the tool calls of outside agents (MCP clients), one row per call, so usage is
-- counted per client as well as per model.
--   agent:   the client's identity (agent:mcp:<name>[@device-N])
--   outcome: 'ran', 'pending', 'declined', 'denied' or 'failed'
CREATE TABLE client_calls (
    id         INTEGER PRIMARY KEY,
    at         INTEGER NOT NULL,
    agent      TEXT NOT NULL,
    tool       TEXT NOT NULL,
    outcome    TEXT NOT NULL,
    latency_ms INTEGER NOT NULL
);
CREATE INDEX client_calls_at ON client_calls (at);
