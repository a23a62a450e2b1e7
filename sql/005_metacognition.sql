-- Loop before escalate (plan §3.5, §3.6): one row per confidence decision, so the
-- retry success rate and the escalation rate are plain SQL, and consolidation can
-- tune the threshold from evidence:
--   SELECT avg(retry_succeeded::int), count(*) FROM escalations WHERE retried;
--   SELECT at, path, confidence_before, confidence_after_retry, threshold, triggers, reason
--     FROM escalations WHERE escalated ORDER BY at DESC LIMIT 20;

CREATE TABLE escalations (
    id                      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at                      TIMESTAMPTZ NOT NULL DEFAULT now(),
    attention_focus         TEXT NOT NULL,          -- first 500 characters
    source_tag              TEXT,
    threshold               DOUBLE PRECISION NOT NULL
                            CHECK (threshold >= 0 AND threshold <= 1),
    confidence_before       DOUBLE PRECISION NOT NULL
                            CHECK (confidence_before >= 0 AND confidence_before <= 1),
    confidence_after_retry  DOUBLE PRECISION
                            CHECK (confidence_after_retry >= 0 AND confidence_after_retry <= 1),
    retried                 BOOLEAN NOT NULL,
    retry_succeeded         BOOLEAN,
    escalated               BOOLEAN NOT NULL,       -- the decision to consult System 2 was taken
    triggers                JSONB NOT NULL DEFAULT '[]'::jsonb,   -- names of the triggers that fired
    system2_ok              BOOLEAN,                -- System 2 answered (NULL: not escalated)
    path                    TEXT NOT NULL CONSTRAINT escalations_path_known
                            CHECK (path IN ('system1', 'retry', 'system2', 'system1_fallback')),
    correction_id           BIGINT REFERENCES memories(id) ON DELETE SET NULL,
    reason                  TEXT NOT NULL,
    details                 JSONB NOT NULL DEFAULT '{}'::jsonb,
    CONSTRAINT escalations_retry_consistent
        CHECK ((retried AND retry_succeeded IS NOT NULL)
               OR (NOT retried AND retry_succeeded IS NULL AND confidence_after_retry IS NULL)),
    CONSTRAINT escalations_system2_consistent
        CHECK (escalated OR system2_ok IS NULL)
);
CREATE INDEX idx_escalations_at ON escalations (at);

-- The reflection bank (plan §3.7) reads only correction memories; their number
-- grows with escalations, not with the store, so they are found through this
-- small partial index and ranked exactly (src/memory/reflection.py).
CREATE INDEX idx_memories_corrections ON memories (id) WHERE memory_type = 'correction';
