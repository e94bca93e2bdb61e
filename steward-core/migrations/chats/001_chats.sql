-- chats.db v1: conversations with the agent. Primary data (the person's chats); backed up.
CREATE TABLE chats (
    id          TEXT PRIMARY KEY,
    title       TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    deleted_at  INTEGER                      -- tombstone: content purged, id kept
) STRICT;

-- What the model sees next, in order: the person's messages, the assistant's answers and
-- tool calls, and one tool message answering each call.
CREATE TABLE messages (
    id           INTEGER PRIMARY KEY,
    chat_id      TEXT NOT NULL REFERENCES chats(id),
    run_id       TEXT,
    role         TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
    content      TEXT,
    tool_calls   TEXT,                       -- JSON [{id, name, arguments}] on an assistant message
    tool_call_id TEXT,                       -- on a tool message
    created_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX messages_by_chat ON messages(chat_id, id);

-- Every call the model proposed, with the gate's decision and what came of it.
CREATE TABLE tool_calls (
    id           INTEGER PRIMARY KEY,
    chat_id      TEXT NOT NULL REFERENCES chats(id),
    run_id       TEXT NOT NULL,
    call_id      TEXT NOT NULL,              -- the provider's id, answered by a tool message
    tool         TEXT NOT NULL,
    input        TEXT NOT NULL,              -- the arguments as the model wrote them
    input_key    TEXT NOT NULL,              -- tool + SHA-256 of the canonical input
    status       TEXT NOT NULL,
    approval_id  INTEGER,
    result       TEXT,                       -- what the model was told
    detail       TEXT,                       -- JSON: sources, data
    created_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    UNIQUE (chat_id, call_id)
) STRICT;
CREATE INDEX tool_calls_by_approval ON tool_calls(approval_id) WHERE approval_id IS NOT NULL;
CREATE INDEX tool_calls_by_key ON tool_calls(chat_id, input_key);

CREATE TABLE turns (
    run_id        TEXT PRIMARY KEY,
    chat_id       TEXT NOT NULL REFERENCES chats(id),
    status        TEXT NOT NULL CHECK (status IN ('running', 'ended', 'interrupted')),
    end_reason    TEXT,
    model_calls   INTEGER NOT NULL DEFAULT 0,
    tool_calls    INTEGER NOT NULL DEFAULT 0,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    error         TEXT,
    started_at    INTEGER NOT NULL,
    ended_at      INTEGER
) STRICT;
CREATE INDEX turns_by_chat ON turns(chat_id, started_at);

-- The turn events, in order: what a client resumes from with its cursor.
CREATE TABLE events (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id   TEXT NOT NULL,
    chat_id  TEXT NOT NULL,
    event    TEXT NOT NULL,                  -- JSON of the event
    at       INTEGER NOT NULL
) STRICT;
CREATE INDEX events_by_chat ON events(chat_id, seq);
