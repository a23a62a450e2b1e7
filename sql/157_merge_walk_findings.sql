-- ---------------------------------------------------------------------------
-- Issue 40 items 3 and 6.
-- consolidation_walks: where a resumable walk over the store stands, one row per walk.
--   The merge phase (src/consolidation/deep/merge.py) looks at the newest memories and at
--   one window of older ones each pass, walking (created_at, id) downward from where the
--   last pass stopped; at the end of the store it starts over. `pass_id` is the pass that
--   took the window [start, stop]: a resumed pass takes the same window again.
-- consolidation_findings.consumed_*: a light-ticker contradiction finding is consumed by
--   the next deep pass's reconsolidation phase, marked in the same transaction as what the
--   pass wrote from it (src/consolidation/deep/reconsolidation.py run_findings).
-- ---------------------------------------------------------------------------
CREATE TABLE consolidation_walks (
    name            TEXT PRIMARY KEY,
    pass_id         BIGINT,
    start_at        TIMESTAMPTZ,            -- the window began below (start_at, start_id); NULL = the top
    start_id        BIGINT,
    stop_at         TIMESTAMPTZ,            -- the window's last row; NULL = it reached the end
    stop_id         BIGINT,
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

ALTER TABLE consolidation_findings
    ADD COLUMN consumed_at TIMESTAMPTZ,
    ADD COLUMN consumed_pass BIGINT,
    ADD COLUMN outcome TEXT;
CREATE INDEX idx_consolidation_findings_open ON consolidation_findings (kind, id) WHERE consumed_at IS NULL;
