-- The operator CLI (python -m src.memory, issue 12).
--
-- import_key: sha256 of what makes an imported line the same memory (cleaned content,
-- memory type, source tag, event time, and created_at when the line carries one).
-- Set only by `import`; NULL for what the mind stores itself. The unique index makes
-- re-running a file (or a concurrent second import of it) insert nothing twice:
-- INSERT ... ON CONFLICT (import_key) DO NOTHING.
ALTER TABLE memories ADD COLUMN import_key TEXT;
CREATE UNIQUE INDEX idx_memories_import_key ON memories (import_key) WHERE import_key IS NOT NULL;

-- reindex: where a re-embedding run got to, so a crashed run resumes instead of
-- starting over (`--all` cannot tell done rows from pending ones by embed_model).
CREATE TABLE reindex_runs (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    embed_model  TEXT NOT NULL,
    scope        TEXT NOT NULL CONSTRAINT reindex_runs_scope CHECK (scope IN ('stale', 'all')),
    last_id      BIGINT NOT NULL DEFAULT 0,
    done         BIGINT NOT NULL DEFAULT 0,
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at  TIMESTAMPTZ
);
CREATE INDEX idx_reindex_runs_open ON reindex_runs (embed_model, scope) WHERE finished_at IS NULL;
