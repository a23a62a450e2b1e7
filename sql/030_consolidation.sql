-- Consolidation (plan §4.1, §4.2): the deep pass's checkpoints and log, what the light
-- ticker found, and the bookkeeping that makes both idempotent. Read with plain SQL:
--   SELECT id, trigger, status, started_at, finished_at, llm_calls, counts, skipped
--     FROM consolidation_passes ORDER BY id DESC LIMIT 5;
--   SELECT * FROM consolidation_failures ORDER BY at DESC;

-- One row per deep pass: 'running' until every phase is done. A process that dies
-- mid-pass leaves it 'running'; the next pass (under the advisory lock) resumes it.
CREATE TABLE consolidation_passes (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    trigger         TEXT NOT NULL,              -- timer | importance | manual
    status          TEXT NOT NULL DEFAULT 'running'
                    CONSTRAINT consolidation_passes_status_known
                    CHECK (status IN ('running', 'done', 'failed')),
    started_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at     TIMESTAMPTZ,
    resumed         INTEGER NOT NULL DEFAULT 0, -- how many times a crashed run was resumed
    importance      DOUBLE PRECISION,           -- cumulative importance when it was triggered
    llm_calls       INTEGER NOT NULL DEFAULT 0,
    llm_budget      INTEGER NOT NULL DEFAULT 0,
    tokens_in       INTEGER NOT NULL DEFAULT 0,
    tokens_out      INTEGER NOT NULL DEFAULT 0,
    counts          JSONB NOT NULL DEFAULT '{}'::jsonb,   -- per phase: what it wrote
    skipped         JSONB NOT NULL DEFAULT '{}'::jsonb,   -- step -> why it was skipped
    error           TEXT
);
CREATE INDEX idx_consolidation_passes_status ON consolidation_passes (status, id);

-- A checkpoint per pass and phase; 'done' phases are not run again on resume.
CREATE TABLE consolidation_checkpoints (
    pass_id     BIGINT NOT NULL REFERENCES consolidation_passes(id) ON DELETE CASCADE,
    phase       TEXT NOT NULL,
    status      TEXT NOT NULL CONSTRAINT consolidation_checkpoints_status_known
                CHECK (status IN ('running', 'done')),
    started_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at TIMESTAMPTZ,
    result      JSONB NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (pass_id, phase)
);

-- Units of work inside a phase (a question, a cluster, a value), written in the same
-- transaction as what the unit produced: a resumed phase skips them.
CREATE TABLE consolidation_units (
    pass_id     BIGINT NOT NULL REFERENCES consolidation_passes(id) ON DELETE CASCADE,
    phase       TEXT NOT NULL,
    key         TEXT NOT NULL,
    at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- a model's validated answer kept before anything is written from it, so a resumed
    -- pass writes from the same answer instead of asking again
    payload     JSONB,
    PRIMARY KEY (pass_id, phase, key)
);

-- Structured LLM output that could not be used even after its repair round and after
-- splitting the batch: never silently dropped.
CREATE TABLE consolidation_failures (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    pass_id     BIGINT REFERENCES consolidation_passes(id) ON DELETE SET NULL,
    phase       TEXT NOT NULL,
    error       TEXT NOT NULL,
    items       JSONB NOT NULL DEFAULT '[]'::jsonb
);
CREATE INDEX idx_consolidation_failures_at ON consolidation_failures (at);

-- What the light ticker noticed: contradicting pairs, emerging themes (for the deep pass).
CREATE TABLE consolidation_findings (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    kind        TEXT NOT NULL CONSTRAINT consolidation_findings_kind_known
                CHECK (kind IN ('contradiction', 'theme')),
    fingerprint TEXT NOT NULL,                  -- sorted member ids, hashed: found once
    memory_ids  BIGINT[] NOT NULL,
    details     JSONB NOT NULL DEFAULT '{}'::jsonb,
    UNIQUE (kind, fingerprint)
);
CREATE INDEX idx_consolidation_findings_at ON consolidation_findings (kind, at);

-- A merged cluster is merged once, whatever passes, crashes and restarts follow.
CREATE TABLE consolidation_clusters (
    fingerprint TEXT PRIMARY KEY,
    insight_id  BIGINT REFERENCES memories(id) ON DELETE SET NULL,
    pass_id     BIGINT REFERENCES consolidation_passes(id) ON DELETE SET NULL,
    member_ids  BIGINT[] NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Light decay: when each unused memory was last nudged (at most once per decay period).
-- A side table, not a column: memories rows are rewritten by retrieval every cycle and
-- must stay HOT-updatable.
CREATE TABLE memory_decay_marks (
    memory_id   BIGINT PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
    decayed_at  TIMESTAMPTZ NOT NULL
);

-- Co-access upkeep halves an idle pair's count once per idle period: when it last did.
ALTER TABLE memory_co_access ADD COLUMN decayed_at TIMESTAMPTZ;

-- Which consolidation step made a supersedes link: a merge, a question's insight, a narrative.
ALTER TABLE memory_supersedes ADD COLUMN via TEXT NOT NULL DEFAULT 'insight'
    CONSTRAINT memory_supersedes_via_known CHECK (via IN ('insight', 'merge', 'narrative'));
