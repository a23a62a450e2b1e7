-- Issue 26: a key per input line, made by the client before its first insert, so a
-- line is stored once however often it is offered. An insert that committed as the
-- connection dropped was stored again from the spill file, and a crash between the
-- spill's insert and its unlink stored the same lines again at the next start: both
-- now meet this index (ON CONFLICT) and get the row that exists. Rows written before
-- this migration have no key (NULLs never conflict).
ALTER TABLE input_journal ADD COLUMN line_key UUID;
CREATE UNIQUE INDEX idx_input_journal_line_key ON input_journal (line_key);
