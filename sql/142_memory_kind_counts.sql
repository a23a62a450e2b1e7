-- How many memories of each type and source, without scanning memories (issue 24: every
-- web page within 300 ms at 1M). The overview's "memories by type" and the /memories
-- form's source list read these counts; a GROUP BY over `memories` took ~0.5 s at 1M.
--
-- Same shape as memory_center_summary (sql/080): the statement triggers only INSERT
-- contribution rows (+n for rows that arrived, -n for rows that left), so concurrent
-- writers never wait on each other; the truth for a (type, source) is the SUM of its rows.
-- src/recall/kind_counts.py folds the rows into one per pair each light tick, and the
-- deep pass checks them against `memories` and rebuilds them if a write bypassed the
-- triggers.

CREATE TABLE memory_kind_counts (
    memory_type TEXT   NOT NULL,
    source_tag  TEXT   NOT NULL,
    memories    BIGINT NOT NULL
);

CREATE FUNCTION memory_kind_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_kind_counts (memory_type, source_tag, memories)
    SELECT memory_type, source_tag, count(*) FROM new_rows GROUP BY 1, 2;
    RETURN NULL;
END $$;

-- A retag or a reclassification is rare; weight changes and access bookkeeping, the
-- common updates, must not pay for this trigger. So it is a row trigger whose WHEN the
-- executor checks without calling the function (a statement trigger would join the
-- transition tables of every update).
CREATE FUNCTION memory_kind_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_kind_counts (memory_type, source_tag, memories)
    VALUES (OLD.memory_type, OLD.source_tag, -1), (NEW.memory_type, NEW.source_tag, 1);
    RETURN NULL;
END $$;

CREATE FUNCTION memory_kind_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_kind_counts (memory_type, source_tag, memories)
    SELECT memory_type, source_tag, -count(*) FROM old_rows GROUP BY 1, 2;
    RETURN NULL;
END $$;

CREATE FUNCTION memory_kind_on_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- the fold's and rebuild's lock (src/recall/kind_counts.py KIND_LOCK_KEY)
    PERFORM pg_advisory_xact_lock(x'6D6B696E64636E74'::bigint);
    DELETE FROM memory_kind_counts;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_kind_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_kind_on_insert();
CREATE TRIGGER memory_kind_update AFTER UPDATE OF memory_type, source_tag ON memories
    FOR EACH ROW WHEN ((OLD.memory_type, OLD.source_tag) IS DISTINCT FROM (NEW.memory_type, NEW.source_tag))
    EXECUTE FUNCTION memory_kind_on_update();
CREATE TRIGGER memory_kind_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_kind_on_delete();
CREATE TRIGGER memory_kind_truncate AFTER TRUNCATE ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION memory_kind_on_truncate();

-- The memories already stored (this file runs in one transaction).
INSERT INTO memory_kind_counts (memory_type, source_tag, memories)
SELECT memory_type, source_tag, count(*) FROM memories GROUP BY 1, 2;
