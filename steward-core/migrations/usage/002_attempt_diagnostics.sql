-- usage.db v2: per attempt, how the answer was asked for and how long the headers took.
--   stream_mode: 'none' (a whole answer was asked for), 'native' (an SSE stream), 'synthetic'
--                (a stream was asked for and a whole answer came back, or was fetched after the
--                target refused to stream, and was re-emitted to the caller as deltas)
--   headers_ms:  from sending the request to the response's headers (absent without a response)
ALTER TABLE attempts ADD COLUMN stream_mode TEXT NOT NULL DEFAULT 'none';
ALTER TABLE attempts ADD COLUMN headers_ms INTEGER;
