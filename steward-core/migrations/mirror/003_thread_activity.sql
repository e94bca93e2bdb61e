-- mirror.db v3: the subject fallback looks for threads with the same normalized subject whose
-- activity span comes within the window of a date. Common subjects ("Invoice", "Meeting") have
-- thousands of threads, so both ends of the span are indexed and each is range-scanned.
DROP INDEX threads_subject;
CREATE INDEX threads_subject_first ON threads (account_id, norm_subject, first_activity);
CREATE INDEX threads_subject_last ON threads (account_id, norm_subject, last_activity);
-- Parents are found by identity (the normalized Message-ID, same string), already indexed.
DROP INDEX messages_rfc;
