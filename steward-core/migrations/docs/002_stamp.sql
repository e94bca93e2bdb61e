-- A path's stamp also holds its inode and status-change time: a rewrite of the same size within
-- the time's granularity, or a copy that keeps the old modification time (cp -p, rsync -t),
-- still changes those.
ALTER TABLE paths ADD COLUMN ino INTEGER NOT NULL DEFAULT 0;
ALTER TABLE paths ADD COLUMN ctime_ns INTEGER NOT NULL DEFAULT 0;
