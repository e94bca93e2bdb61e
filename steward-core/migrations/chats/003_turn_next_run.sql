-- chats.db v3: the run that took the messages a turn ended without applying, recorded in the
-- same write as the turn's end (a client that saw the end also sees where its message went).
ALTER TABLE turns ADD COLUMN next_run TEXT;
UPDATE turns SET next_run = (
    SELECT json_extract(e.event, '$.next_run') FROM events e
    WHERE e.run_id = turns.run_id AND e.chat_id = turns.chat_id
      AND json_extract(e.event, '$.type') = 'turn_ended'
    ORDER BY e.seq DESC LIMIT 1
) WHERE status != 'running';
