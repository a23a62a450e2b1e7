-- ---------------------------------------------------------------------------
-- The guardian's right to erase (issue 39; src/erasure/). Decay forgets by weight and never
-- deletes (plan §4.4); this is the other forgetting: a memory, and every trace of its words,
-- removed on the guardian's request.
--
-- forget_receipts: one row a forget, the audit trail — when, who asked (the prompt's
--   command, the CLI, a request in conversation confirmed at the prompt), and how many rows
--   of each table it removed or scrubbed. Never a word of what was forgotten. A running
--   mind reads the newest id each cycle: a forget by another process (the CLI) makes it
--   drop what it holds in memory (src/erasure/caches.py).
-- forgotten_contents: the sha256 of each forgotten memory's text, so that an import or a
--   replay never brings it back silently (src/recall/bulk_import.py skips such a line unless
--   the guardian imports with --include-forgotten). A digest, not the text.
-- scrub_json: a JSON value with every string that contains one of `needles` (compared
--   case-insensitively) replaced by the placeholder of that string's size
--   (src/erasure/placeholder.py writes the same words). Keys are kept; they are the
--   project's own names, never a user's words.
-- A correction by the guardian supersedes the corrected memory (via 'correction'), as a
-- user's update does (via 'update', sql/153): the older stays stored as earlier.
-- ---------------------------------------------------------------------------
CREATE TABLE forget_receipts (
    id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    who       TEXT NOT NULL CONSTRAINT forget_receipts_who_known
                  CHECK (who IN ('guardian command', 'cli', 'conversation', 'correction')),
    memories  INTEGER NOT NULL,             -- memories removed (the chosen and their derivations)
    counts    JSONB NOT NULL                -- {table: {"deleted": n, "scrubbed": n}}
);

CREATE TABLE forgotten_contents (
    digest      BYTEA PRIMARY KEY,          -- sha256 of the memory's content (UTF-8)
    receipt_id  BIGINT NOT NULL REFERENCES forget_receipts(id) ON DELETE CASCADE,
    at          TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE FUNCTION forgotten_placeholder(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT '[forgotten: ' || n || CASE WHEN n = 1 THEN ' word]' ELSE ' words]' END
      FROM (SELECT COALESCE(array_length(regexp_split_to_array(btrim(t), '\s+'), 1), 0)
                   - CASE WHEN btrim(t) = '' THEN 1 ELSE 0 END AS n) c
$$;

CREATE FUNCTION scrub_json(j jsonb, needles text[]) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    out jsonb;
BEGIN
    CASE jsonb_typeof(j)
    WHEN 'string' THEN
        IF EXISTS (SELECT 1 FROM unnest(needles) n WHERE strpos(lower(j #>> '{}'), lower(n)) > 0) THEN
            RETURN to_jsonb(forgotten_placeholder(j #>> '{}'));
        END IF;
        RETURN j;
    WHEN 'object' THEN
        SELECT COALESCE(jsonb_object_agg(key, scrub_json(value, needles)), '{}'::jsonb)
          INTO out FROM jsonb_each(j);
        RETURN out;
    WHEN 'array' THEN
        SELECT COALESCE(jsonb_agg(scrub_json(value, needles) ORDER BY ord), '[]'::jsonb)
          INTO out FROM jsonb_array_elements(j) WITH ORDINALITY AS e(value, ord);
        RETURN out;
    ELSE
        RETURN j;
    END CASE;
END $$;

ALTER TABLE memory_supersedes DROP CONSTRAINT memory_supersedes_via_known;
ALTER TABLE memory_supersedes ADD CONSTRAINT memory_supersedes_via_known
    CHECK (via IN ('insight', 'merge', 'narrative', 'update', 'correction'));
DROP INDEX idx_supersedes_update;
CREATE INDEX idx_supersedes_update ON memory_supersedes (source_id, insight_id)
    WHERE via IN ('update', 'correction');
