-- Which cycle answered a journaled message (issue 41): the HTTP API reads a reply by the
-- message's id from the thought_log row of that cycle, also after a restart.
ALTER TABLE input_journal ADD COLUMN answered_session TEXT, ADD COLUMN answered_cycle INTEGER;
