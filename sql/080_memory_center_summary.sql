-- A bucketed summary of the memories' weight centers, kept by triggers (plan §3.9
-- Phase C entropy monitor, §4.1 light ticker; the web overview's histogram).
--
-- The entropy monitor, the CBA coherence's epistemic axis and the overview page all
-- need the distribution of center = alpha / (alpha + beta) over every memory. Scanning
-- `memories` for it (a ~340 MB heap at 100k rows, fillfactor 50) took ~1.4 s a tick.
-- An expression index on the center is no way out: it would make every weight change a
-- non-HOT update (see 002). So the distribution is summed as it changes.
--
-- Every row of memory_center_summary is a contribution to one of 20 equal center
-- buckets (the overview's bins); the truth for a bucket is the SUM of its rows. The
-- statement triggers below only INSERT rows (never update one), so concurrent writers
-- never wait on each other; src/weights/center_summary.py folds the rows into one per
-- bucket (under an advisory lock) and can rebuild them from `memories`.
--
-- sum_center and sum_c_ln_c are NUMERIC: each row's term is a float8 rounded the same
-- way every time and NUMERIC sums are exact, so the incrementally kept sums equal a fresh
-- aggregate digit for digit (the consistency check compares them with =). With
-- S = sum of centers and T = sum of c·ln(c), the entropy of the memories' shares
-- c / S is log2(S) − T / (S·ln 2), exactly what a per-row scan computes.

CREATE TABLE memory_center_summary (
    bucket      INTEGER NOT NULL CONSTRAINT memory_center_summary_bucket CHECK (bucket BETWEEN 1 AND 20),
    memories    BIGINT  NOT NULL,
    sum_center  NUMERIC NOT NULL,
    sum_c_ln_c  NUMERIC NOT NULL,
    uninformed  BIGINT  NOT NULL,   -- alpha < 2 and beta < 2 (src/weights/stochastic.py)
    contested   BIGINT  NOT NULL    -- alpha > 5 and beta > 5
);

-- One memory's bucket: the overview's LEAST(width_bucket(center, 0, 1, 20), 20).
CREATE FUNCTION memory_center_bucket(a DOUBLE PRECISION, b DOUBLE PRECISION) RETURNS INTEGER
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN LEAST(width_bucket(a / (a + b), 0.0::float8, 1.0::float8, 20), 20);

-- One memory's entropy term c·ln(c); 0 for a center that underflows to 0 (as the scan's w > 0).
CREATE FUNCTION memory_center_c_ln_c(a DOUBLE PRECISION, b DOUBLE PRECISION) RETURNS NUMERIC
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN a / (a + b) > 0 THEN ((a / (a + b)) * ln(a / (a + b)))::numeric ELSE 0 END;

-- Record the rows that left (old) and arrived (new) in one INSERT, grouped by bucket.
-- Rows whose weight did not change cancel exactly and write nothing.
CREATE FUNCTION memory_center_record(old_a DOUBLE PRECISION[], old_b DOUBLE PRECISION[],
                                     new_a DOUBLE PRECISION[], new_b DOUBLE PRECISION[]) RETURNS VOID
    LANGUAGE sql AS $$
    INSERT INTO memory_center_summary (bucket, memories, sum_center, sum_c_ln_c, uninformed, contested)
    SELECT memory_center_bucket(a, b), sum(sign), sum(sign * (a / (a + b))::numeric),
           sum(sign * memory_center_c_ln_c(a, b)),
           sum(CASE WHEN a < 2 AND b < 2 THEN sign ELSE 0 END),
           sum(CASE WHEN a > 5 AND b > 5 THEN sign ELSE 0 END)
      FROM (SELECT -1 AS sign, a, b FROM unnest(old_a, old_b) AS o(a, b)
            UNION ALL
            SELECT 1, a, b FROM unnest(new_a, new_b) AS n(a, b)) AS rows
     GROUP BY 1
    HAVING sum(sign) <> 0 OR sum(sign * (a / (a + b))::numeric) <> 0 OR sum(sign * memory_center_c_ln_c(a, b)) <> 0
        OR sum(CASE WHEN a < 2 AND b < 2 THEN sign ELSE 0 END) <> 0
        OR sum(CASE WHEN a > 5 AND b > 5 THEN sign ELSE 0 END) <> 0
$$;

CREATE FUNCTION memory_center_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE na DOUBLE PRECISION[]; nb DOUBLE PRECISION[];
BEGIN
    SELECT array_agg(depth_weight_alpha), array_agg(depth_weight_beta) INTO na, nb FROM new_rows;
    IF na IS NOT NULL THEN
        PERFORM memory_center_record('{}', '{}', na, nb);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION memory_center_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE oa DOUBLE PRECISION[]; ob DOUBLE PRECISION[]; na DOUBLE PRECISION[]; nb DOUBLE PRECISION[];
BEGIN
    -- only rows whose weight changed: an update of anything else (access bookkeeping,
    -- embeddings, metadata) records nothing
    SELECT array_agg(o.depth_weight_alpha), array_agg(o.depth_weight_beta),
           array_agg(n.depth_weight_alpha), array_agg(n.depth_weight_beta)
      INTO oa, ob, na, nb
      FROM old_rows o JOIN new_rows n USING (id)
     WHERE (o.depth_weight_alpha, o.depth_weight_beta) IS DISTINCT FROM (n.depth_weight_alpha, n.depth_weight_beta);
    IF oa IS NOT NULL THEN
        PERFORM memory_center_record(oa, ob, na, nb);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION memory_center_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE oa DOUBLE PRECISION[]; ob DOUBLE PRECISION[];
BEGIN
    SELECT array_agg(depth_weight_alpha), array_agg(depth_weight_beta) INTO oa, ob FROM old_rows;
    IF oa IS NOT NULL THEN
        PERFORM memory_center_record(oa, ob, '{}', '{}');
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION memory_center_on_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- the fold's and rebuild's lock (src/weights/center_summary.py SUMMARY_LOCK_KEY)
    PERFORM pg_advisory_xact_lock(x'6D6373756D6D7279'::bigint);
    DELETE FROM memory_center_summary;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_center_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_center_on_insert();
CREATE TRIGGER memory_center_update AFTER UPDATE ON memories
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_center_on_update();
CREATE TRIGGER memory_center_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_center_on_delete();
CREATE TRIGGER memory_center_truncate AFTER TRUNCATE ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION memory_center_on_truncate();

-- The memories already stored (this file runs in one transaction).
INSERT INTO memory_center_summary (bucket, memories, sum_center, sum_c_ln_c, uninformed, contested)
SELECT memory_center_bucket(depth_weight_alpha, depth_weight_beta), count(*),
       COALESCE(sum((depth_weight_alpha / (depth_weight_alpha + depth_weight_beta))::numeric), 0),
       COALESCE(sum(memory_center_c_ln_c(depth_weight_alpha, depth_weight_beta)), 0),
       count(*) FILTER (WHERE depth_weight_alpha < 2 AND depth_weight_beta < 2),
       count(*) FILTER (WHERE depth_weight_alpha > 5 AND depth_weight_beta > 5)
  FROM memories GROUP BY 1;
