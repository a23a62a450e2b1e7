-- MoltBot schema: the plan's §9 written as fresh tables, plus the log tables the
-- operator reads. One file, one transaction (see src/db/migrations.py).

CREATE EXTENSION IF NOT EXISTS vector;

-- ---------------------------------------------------------------------------
-- memories: the one store everything competes in (plan §2.3, §2.5, §9)
-- ---------------------------------------------------------------------------
CREATE TABLE memories (
    id                      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    content                 TEXT NOT NULL
                            CONSTRAINT memories_content_not_empty CHECK (length(btrim(content)) > 0),
    memory_type             TEXT NOT NULL DEFAULT 'episodic'
                            CONSTRAINT memories_memory_type_known CHECK (memory_type IN (
                                'episodic', 'semantic', 'procedural', 'preference',
                                'reflection', 'correction', 'narrative', 'tension')),
    embedding               halfvec(768),
    -- Beta(alpha, beta) depth weight; Beta(1, 4) = blank-slate memory, center 0.2
    depth_weight_alpha      DOUBLE PRECISION NOT NULL DEFAULT 1.0
                            CONSTRAINT memories_alpha_positive CHECK (depth_weight_alpha > 0),
    depth_weight_beta       DOUBLE PRECISION NOT NULL DEFAULT 4.0
                            CONSTRAINT memories_beta_positive CHECK (depth_weight_beta > 0),
    immutable               BOOLEAN NOT NULL DEFAULT FALSE,
    source_tag              TEXT NOT NULL DEFAULT 'external_user',
    source_confidence       DOUBLE PRECISION NOT NULL DEFAULT 1.0
                            CONSTRAINT memories_source_confidence_range
                            CHECK (source_confidence >= 0 AND source_confidence <= 1),
    compressed              TEXT,
    -- ACT-R presentations (plan §2.7); bounded by the store, see notes.md
    access_count            INTEGER NOT NULL DEFAULT 0,
    last_accessed           TIMESTAMPTZ,
    access_timestamps       TIMESTAMPTZ[] NOT NULL DEFAULT '{}',
    content_contextualized  TEXT,
    -- Full text over the first 100k characters: a tsvector is capped at 1 MB, and a
    -- megabyte message must still be storable.
    content_tsv             tsvector GENERATED ALWAYS AS (
                                to_tsvector('english',
                                            left(COALESCE(content_contextualized, content), 100000))
                            ) STORED,
    event_time              TIMESTAMPTZ,
    created_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Which model produced `embedding`; vectors of different models are never compared.
    embed_model             TEXT,
    utility_score           DOUBLE PRECISION NOT NULL DEFAULT 0.0,
    metadata                JSONB NOT NULL DEFAULT '{}'::jsonb
);

CREATE INDEX idx_memories_embedding ON memories
    USING hnsw (embedding halfvec_cosine_ops) WITH (m = 16, ef_construction = 128);
CREATE INDEX idx_memories_fts ON memories USING GIN (content_tsv);
CREATE INDEX idx_memories_created_at ON memories (created_at DESC);
CREATE INDEX idx_memories_immutable ON memories (id) WHERE immutable;

-- ---------------------------------------------------------------------------
-- scratch_buffer: everything the entry gate keeps lands here before any
-- processing, so a crash loses nothing (plan §2.9)
-- ---------------------------------------------------------------------------
CREATE TABLE scratch_buffer (
    id                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    content             TEXT NOT NULL,
    source_tag          TEXT NOT NULL DEFAULT 'external_user',
    source_confidence   DOUBLE PRECISION NOT NULL DEFAULT 1.0
                        CHECK (source_confidence >= 0 AND source_confidence <= 1),
    tags                TEXT[] NOT NULL DEFAULT '{}',
    metadata            JSONB NOT NULL DEFAULT '{}'::jsonb,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at          TIMESTAMPTZ NOT NULL DEFAULT now() + INTERVAL '24 hours',
    flushed_at          TIMESTAMPTZ
);
CREATE INDEX idx_scratch_unflushed ON scratch_buffer (created_at) WHERE flushed_at IS NULL;

-- ---------------------------------------------------------------------------
-- Hebbian co-access (plan §3.1); one row per unordered pair, a < b
-- ---------------------------------------------------------------------------
CREATE TABLE memory_co_access (
    memory_id_a         BIGINT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    memory_id_b         BIGINT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    co_access_count     INTEGER NOT NULL DEFAULT 1 CHECK (co_access_count > 0),
    last_co_accessed    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (memory_id_a, memory_id_b),
    CONSTRAINT memory_co_access_ordered CHECK (memory_id_a < memory_id_b)
);
-- spreading activation looks pairs up from either side
CREATE INDEX idx_co_access_b ON memory_co_access (memory_id_b, memory_id_a);

-- insight -> the memories it was consolidated from (plan §4.2)
CREATE TABLE memory_supersedes (
    insight_id  BIGINT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    source_id   BIGINT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (insight_id, source_id),
    CONSTRAINT memory_supersedes_not_self CHECK (insight_id <> source_id)
);
CREATE INDEX idx_supersedes_source ON memory_supersedes (source_id);

-- ---------------------------------------------------------------------------
-- consolidation_log: every weight change with its evidence (plan §3.9 audit trail)
-- ---------------------------------------------------------------------------
CREATE TABLE consolidation_log (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    memory_id       BIGINT REFERENCES memories(id) ON DELETE SET NULL,
    operation       TEXT NOT NULL,          -- reinforce, contradict, decay, promote, ...
    actor           TEXT NOT NULL,          -- retrieval, exit_gate, light_consolidation, ...
    reason          TEXT,
    requested_delta DOUBLE PRECISION,
    applied_delta   DOUBLE PRECISION,
    alpha_before    DOUBLE PRECISION,
    beta_before     DOUBLE PRECISION,
    alpha_after     DOUBLE PRECISION,
    beta_after      DOUBLE PRECISION,
    evidence        JSONB NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX idx_consolidation_log_memory ON consolidation_log (memory_id, at);
CREATE INDEX idx_consolidation_log_at ON consolidation_log (at);

-- safety ceilings that failed a check, enforced or in shadow mode (plan §3.9)
CREATE TABLE safety_events (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    ceiling     TEXT NOT NULL,
    phase       TEXT,
    memory_id   BIGINT REFERENCES memories(id) ON DELETE SET NULL,
    action      JSONB NOT NULL DEFAULT '{}'::jsonb,
    reason      TEXT NOT NULL,
    enforced    BOOLEAN NOT NULL
);
CREATE INDEX idx_safety_events_at ON safety_events (at);

-- ---------------------------------------------------------------------------
-- llm_calls: the energy-cost ledger (plan §4.8); failed calls too
-- ---------------------------------------------------------------------------
CREATE TABLE llm_calls (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    session_id  TEXT,
    provider    TEXT NOT NULL,
    model       TEXT NOT NULL,
    purpose     TEXT NOT NULL,
    tokens_in   INTEGER NOT NULL DEFAULT 0 CHECK (tokens_in >= 0),
    tokens_out  INTEGER NOT NULL DEFAULT 0 CHECK (tokens_out >= 0),
    cost_usd    NUMERIC(14, 8) NOT NULL DEFAULT 0 CHECK (cost_usd >= 0),
    latency_ms  DOUBLE PRECISION,
    ok          BOOLEAN NOT NULL,
    error       TEXT
);
CREATE INDEX idx_llm_calls_at ON llm_calls (at);
CREATE INDEX idx_llm_calls_session ON llm_calls (session_id);

-- one row per cognitive cycle (plan §3.4); the operator reads the mind here
CREATE TABLE thought_log (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    session_id      TEXT,
    cycle           INTEGER NOT NULL,
    source_tag      TEXT,
    attention_focus TEXT,
    candidates      JSONB NOT NULL DEFAULT '[]'::jsonb,   -- [{source, text, salience}]
    winner          JSONB,
    context_summary JSONB NOT NULL DEFAULT '{}'::jsonb,
    output          TEXT,
    actions         JSONB NOT NULL DEFAULT '[]'::jsonb,
    confidence      DOUBLE PRECISION,
    escalated       BOOLEAN NOT NULL DEFAULT FALSE,
    tokens_in       INTEGER NOT NULL DEFAULT 0,
    tokens_out      INTEGER NOT NULL DEFAULT 0,
    cost_usd        NUMERIC(14, 8) NOT NULL DEFAULT 0,
    duration_ms     DOUBLE PRECISION
);
CREATE INDEX idx_thought_log_at ON thought_log (at);
CREATE INDEX idx_thought_log_session ON thought_log (session_id, cycle);

-- the agent's sense of its own continuity (plan §4.9); exactly one row
CREATE TABLE agent_manifest (
    id                  SMALLINT PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    times_restarted     INTEGER NOT NULL DEFAULT 0,
    uptime_total_hours  DOUBLE PRECISION NOT NULL DEFAULT 0,
    last_started_at     TIMESTAMPTZ,
    last_shutdown_at    TIMESTAMPTZ,
    current_session_id  TEXT,
    embed_model         TEXT,
    metadata            JSONB NOT NULL DEFAULT '{}'::jsonb
);
