-- A failed deep pass backs off and resumes (issues 24 item 5, 27 item 2; see
-- src/consolidation/deep/deep_pass.py).
--
-- A phase that raises (an outage, a request the model refuses, a bug) no longer ends
-- the pass as if it were finished: its checkpoint says 'failed' with the error and how
-- many times in a row it failed; the pass row says 'failed', how many attempts of it
-- failed in a row and when the scheduler may resume it (exponential back-off). The
-- next attempt resumes the same pass at the failed phase. A phase that fails
-- `consolidation.deep.phase_max_failures` times in a row is 'skipped' (with a
-- consolidation_failures row) and the pass goes on.
ALTER TABLE consolidation_checkpoints DROP CONSTRAINT consolidation_checkpoints_status_known;
ALTER TABLE consolidation_checkpoints ADD CONSTRAINT consolidation_checkpoints_status_known
    CHECK (status IN ('running', 'done', 'failed', 'skipped'));
ALTER TABLE consolidation_checkpoints
    ADD COLUMN failures INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN error TEXT;

ALTER TABLE consolidation_passes
    ADD COLUMN failures INTEGER NOT NULL DEFAULT 0,     -- failed attempts in a row
    ADD COLUMN failed_phase TEXT,
    ADD COLUMN retry_after TIMESTAMPTZ;                 -- the scheduler resumes it from then

-- Reconsolidation (plan §4.4) stored its insights as source 'consolidation' while every
-- other consolidation writer says 'internal_consolidation': they counted as new
-- experience and woke the questions phase (issue 25). One tag for the mind's own
-- consolidation from now on.
UPDATE memories SET source_tag = 'internal_consolidation' WHERE source_tag = 'consolidation';
