-- The update trigger of the center summary (080) without its join of old and new rows.
--
-- 080 matched old_rows to new_rows by id to skip rows whose weight did not change. The
-- planner knows nothing about transition tables, and on a wide 20,000-row update (the
-- deep pass's decay at 100k: rows carry embeddings and tsvectors, so both tables spill
-- to disk) the join made that one UPDATE take 106 s instead of a few. The join is not
-- needed: a row whose weight did not change adds the same NUMERIC terms with both signs,
-- they cancel exactly, and memory_center_record's HAVING writes nothing for them. Now
-- each side is read once, only its two weight columns.

CREATE OR REPLACE FUNCTION memory_center_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE oa DOUBLE PRECISION[]; ob DOUBLE PRECISION[]; na DOUBLE PRECISION[]; nb DOUBLE PRECISION[];
BEGIN
    SELECT array_agg(depth_weight_alpha), array_agg(depth_weight_beta) INTO oa, ob FROM old_rows;
    SELECT array_agg(depth_weight_alpha), array_agg(depth_weight_beta) INTO na, nb FROM new_rows;
    IF oa IS NOT NULL THEN
        PERFORM memory_center_record(oa, ob, na, nb);
    END IF;
    RETURN NULL;
END $$;
