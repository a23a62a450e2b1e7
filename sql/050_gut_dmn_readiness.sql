-- The mind between messages: the gut's delta log and axes (plan §5.1), DMN output
-- (§4.7), readiness events (§5.2) and outcome tracking (§5.3).

-- Every gut reading the loop takes: the 768-d delta (attention − subconscious), what
-- the mind was attending to and what it did. The outcome is linked later through
-- outcome_links (subject_kind 'gut_delta'); PCA in the deep pass reads this table.
CREATE TABLE gut_deltas (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    session_id  TEXT,
    cycle       INTEGER,
    delta       halfvec(768) NOT NULL,
    magnitude   DOUBLE PRECISION NOT NULL CHECK (magnitude >= 0),
    context     TEXT NOT NULL,          -- the attention focus of the cycle
    action      JSONB NOT NULL DEFAULT '[]'::jsonb,
    source_tag  TEXT
);
CREATE INDEX idx_gut_deltas_at ON gut_deltas (at);

-- The gut's principal axes from the last deep pass; a name once an axis means something.
CREATE TABLE gut_axes (
    id                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    computed_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    rank                SMALLINT NOT NULL CHECK (rank >= 1),
    component           halfvec(768) NOT NULL,
    explained_variance  DOUBLE PRECISION NOT NULL,
    outcome_correlation DOUBLE PRECISION,   -- Pearson r of the projection with outcome valence
    outcomes_seen       INTEGER NOT NULL DEFAULT 0,
    samples             INTEGER NOT NULL,
    name                TEXT
);
CREATE INDEX idx_gut_axes_computed ON gut_axes (computed_at DESC, rank);

-- What the DMN produced: self-prompts (queued to the loop), creative associations
-- (for consolidation), identity signals (for identity evaluation), metacognitive reviews.
CREATE TABLE dmn_items (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    channel     TEXT NOT NULL CHECK (channel IN ('self_prompt', 'creative', 'identity', 'review')),
    memory_ids  BIGINT[] NOT NULL DEFAULT '{}',
    text        TEXT NOT NULL,
    detail      JSONB NOT NULL DEFAULT '{}'::jsonb,
    queued      BOOLEAN NOT NULL DEFAULT FALSE,   -- submitted to the loop's attention queue
    consumed_at TIMESTAMPTZ                        -- consolidation / identity evaluation took it
);
CREATE INDEX idx_dmn_items_channel ON dmn_items (channel, at) WHERE consumed_at IS NULL;

-- The ten bootstrap readiness milestones: when each was first reached and the event
-- that reached it (ids of the memories, cycles, outcomes involved). Written once.
CREATE TABLE readiness_events (
    milestone   SMALLINT PRIMARY KEY CHECK (milestone BETWEEN 1 AND 10),
    reached_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    event       JSONB NOT NULL
);

-- Outcomes as they become apparent (a correction, explicit feedback, a goal achieved,
-- a tension resolved), and the earlier decisions they are linked back to.
CREATE TABLE outcomes (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    kind        TEXT NOT NULL CHECK (kind IN ('correction', 'feedback', 'goal_achieved',
                                              'tension_resolved')),
    valence     DOUBLE PRECISION NOT NULL CHECK (valence BETWEEN -1 AND 1),
    description TEXT NOT NULL,
    evidence    JSONB NOT NULL DEFAULT '{}'::jsonb
);
CREATE TABLE outcome_links (
    outcome_id   BIGINT NOT NULL REFERENCES outcomes(id) ON DELETE CASCADE,
    subject_kind TEXT NOT NULL CHECK (subject_kind IN ('gate_decision', 'gut_delta', 'promotion',
                                                       'memory', 'thought')),
    subject_id   BIGINT NOT NULL,
    PRIMARY KEY (subject_kind, subject_id, outcome_id)
);
CREATE INDEX idx_outcome_links_outcome ON outcome_links (outcome_id);
