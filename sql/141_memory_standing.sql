-- A narrow side table of every memory's center and last use (issue 24: no full scan on the
-- hot paths). The identity track's top-N by center, the escalation threshold's identity
-- density, the light decay's longest-unused walk and the contradiction scan's recently
-- used memories read it through its two indexes instead of scanning `memories`.
--
-- Why not expression indexes on `memories`: an index over the weight or last_accessed
-- makes every weight change and every retrieval touch a non-HOT update, which inserts
-- into every index of the row, the HNSW graph included. Here the row is four columns
-- and two btrees.
CREATE TABLE memory_standing (
    id          BIGINT PRIMARY KEY,
    center      DOUBLE PRECISION NOT NULL,       -- alpha / (alpha + beta)
    last_seen   TIMESTAMPTZ NOT NULL,            -- COALESCE(last_accessed, created_at): the mind's clock
    immutable   BOOLEAN NOT NULL
);
CREATE INDEX idx_memory_standing_center ON memory_standing (center DESC, id);
CREATE INDEX idx_memory_standing_last_seen ON memory_standing (last_seen, id);

CREATE FUNCTION memory_standing_upsert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Rows whose standing did not change (a content edit, a re-embedding) are not written.
    INSERT INTO memory_standing AS s (id, center, last_seen, immutable)
    SELECT id, depth_weight_alpha / (depth_weight_alpha + depth_weight_beta),
           COALESCE(last_accessed, created_at), immutable
      FROM new_rows
    ON CONFLICT (id) DO UPDATE
       SET center = EXCLUDED.center, last_seen = EXCLUDED.last_seen, immutable = EXCLUDED.immutable
     WHERE (s.center, s.last_seen, s.immutable) IS DISTINCT FROM (EXCLUDED.center, EXCLUDED.last_seen, EXCLUDED.immutable);
    RETURN NULL;
END $$;

CREATE FUNCTION memory_standing_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_standing s USING old_rows o WHERE s.id = o.id;
    RETURN NULL;
END $$;

CREATE FUNCTION memory_standing_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE memory_standing;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_standing_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_standing_upsert();
CREATE TRIGGER memory_standing_update AFTER UPDATE ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_standing_upsert();
CREATE TRIGGER memory_standing_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_standing_delete();
CREATE TRIGGER memory_standing_truncate AFTER TRUNCATE ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION memory_standing_truncate();

INSERT INTO memory_standing (id, center, last_seen, immutable)
SELECT id, depth_weight_alpha / (depth_weight_alpha + depth_weight_beta), COALESCE(last_accessed, created_at), immutable
  FROM memories;
