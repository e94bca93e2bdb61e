-- mirror.db v4: browsing by size ("the ten largest attachments since June") walks an index
-- instead of sorting every message.
CREATE INDEX messages_size ON messages (size);
