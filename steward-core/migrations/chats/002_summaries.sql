-- chats.db v2: the summary that stands for a chat's oldest messages once they no longer fit the
-- model's context (written by a cheaper model tier; the messages themselves are kept).
CREATE TABLE summaries (
    chat_id     TEXT PRIMARY KEY REFERENCES chats(id),
    upto        INTEGER NOT NULL,            -- the last message id the summary stands for
    text        TEXT NOT NULL,
    model       TEXT NOT NULL,               -- the model that wrote it
    created_at  INTEGER NOT NULL
) STRICT;
