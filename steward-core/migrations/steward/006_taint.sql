-- steward.db v6: an approval names the fields of its input that were copied from untrusted
-- content (mail, attachments, outside services) and where they came from (JSON; NULL: none).
ALTER TABLE approvals ADD COLUMN taint TEXT;
