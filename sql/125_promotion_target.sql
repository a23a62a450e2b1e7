-- A promotion leads to a center (issue 25, plan §4.3): the tier's range, reached over
-- passes at most `safety.max_center_change_per_cycle` apiece (src/consolidation/evolution/
-- promotion.py). `remaining` keeps meaning "reinforcement still owed": the amount that
-- would take the memory from its weight after the last step to `target_center`.
-- Rows written before this column have no target; promotion uses its tier's target.
ALTER TABLE promotions
    ADD COLUMN target_center DOUBLE PRECISION
        CONSTRAINT promotions_target_center_range CHECK (target_center > 0 AND target_center < 1);
