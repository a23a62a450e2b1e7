-- Every DMN channel ends somewhere (plan §4.7, issue 25). Self-prompts and reviews go to
-- the loop when they are queued; creative associations (channel 2) and identity signals
-- (channel 3) are taken by the next deep pass as questions for its insights
-- (src/consolidation/deep/dmn_inputs.py); what nothing took within `dmn.item_ttl_days`
-- is marked expired by the DMN tick. `outcome` says what came of it (the insight ids).
ALTER TABLE dmn_items ADD COLUMN consumed_by TEXT
    CHECK (consumed_by IN ('loop', 'deep_pass', 'expired'));
ALTER TABLE dmn_items ADD COLUMN outcome JSONB;
UPDATE dmn_items SET consumed_at = at, consumed_by = 'loop' WHERE queued AND consumed_at IS NULL;
UPDATE dmn_items SET consumed_by = 'deep_pass' WHERE consumed_at IS NOT NULL AND consumed_by IS NULL;
ALTER TABLE dmn_items ADD CONSTRAINT dmn_items_consumed_by_whom
    CHECK ((consumed_at IS NULL) = (consumed_by IS NULL));
