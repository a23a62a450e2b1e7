-- Every line the operator types is journaled before the reader takes the next one
-- (issue 11): a SIGKILL loses no line the process has read, and a restart answers
-- what the last run never answered.
CREATE TABLE input_journal (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id   TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('message', 'command')),
    line         TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'answered', 'done', 'skipped')),
    received_at  TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    finished_at  TIMESTAMPTZ
);
-- replay at start-up reads only the open rows
CREATE INDEX idx_input_journal_open ON input_journal (id) WHERE state = 'pending';
