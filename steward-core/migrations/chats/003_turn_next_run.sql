-- chats.db v3: the run that took the messages a turn ended without applying, recorded in the
-- same write as the turn's end (a client that saw the end also sees where its message went).
ALTER TABLE turns ADD COLUMN next_run TEXT;
-- Carried over from each ended turn's last `turn_ended` event, in one pass over the events
-- (a damaged event row is skipped, not fatal).
UPDATE turns SET next_run = ended.next_run FROM (
    SELECT run_id,
           CASE WHEN json_valid(event) THEN json_extract(event, '$.next_run') END AS next_run,
           max(seq)
    FROM events
    WHERE CASE WHEN json_valid(event) THEN json_extract(event, '$.type') END = 'turn_ended'
    GROUP BY run_id
) AS ended
WHERE ended.run_id = turns.run_id AND turns.status != 'running';
