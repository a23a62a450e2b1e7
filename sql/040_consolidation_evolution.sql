-- Consolidation, part 2 (plan §4.3–§4.6): promotion and its operator approvals,
-- recall outcomes for utility and Dirichlet evolution, tuned gate parameters,
-- productive contradictions, temporal links in the co-access network.
-- Every table here is written by src/consolidation/evolution_repository.py or
-- approvals.py; an operator reads them with plain SQL.

-- Operator approval queue. `kind` selects the apply function (src/consolidation/
-- approvals.py registry): 'promotion' now, 'skill' later.
CREATE TABLE approvals (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind        TEXT NOT NULL,
    payload     JSONB NOT NULL DEFAULT '{}'::jsonb,
    reason      TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'pending' CONSTRAINT approvals_status_known
                CHECK (status IN ('pending', 'approved', 'rejected', 'failed')),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    decided_at  TIMESTAMPTZ,
    decision    TEXT,               -- what applying it did, or why it was refused
    CONSTRAINT approvals_decided_consistent CHECK ((status = 'pending') = (decided_at IS NULL))
);
CREATE INDEX idx_approvals_pending ON approvals (created_at) WHERE status = 'pending';

-- One row per promotion tier a memory reached (or waits for): a tier is granted once.
CREATE TABLE promotions (
    memory_id   BIGINT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    tier        TEXT NOT NULL CONSTRAINT promotions_tier_known CHECK (tier IN ('goal', 'identity')),
    status      TEXT NOT NULL CONSTRAINT promotions_status_known
                CHECK (status IN ('applied', 'pending_approval', 'blocked', 'rolled_back', 'rejected')),
    at          TIMESTAMPTZ NOT NULL,
    approval_id BIGINT REFERENCES approvals(id) ON DELETE SET NULL,
    reason      TEXT NOT NULL,
    -- Reinforcement still owed: the rate limiter lets a center move 0.10 per pass,
    -- so a large promotion arrives over several passes.
    remaining   DOUBLE PRECISION NOT NULL DEFAULT 0 CHECK (remaining >= 0),
    evidence    JSONB NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (memory_id, tier)
);

-- What recall returned and why: per retrieved memory, each relevance component's
-- contribution (blend weight x component value, COMPONENTS order). Consolidation
-- scores each row once its outcome window has passed (utility, Dirichlet evolution).
CREATE TABLE recall_outcomes (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at              TIMESTAMPTZ NOT NULL,
    memory_id       BIGINT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    rank            SMALLINT NOT NULL,
    contributions   DOUBLE PRECISION[] NOT NULL,
    used            BOOLEAN,                     -- NULL until scored
    scored_at       TIMESTAMPTZ
);
CREATE INDEX idx_recall_outcomes_unscored ON recall_outcomes (at) WHERE scored_at IS NULL;

-- Evolved Dirichlet alphas: a bounded factor per relevance component laid on the
-- maturity schedule of src/recall/relevance.blend_alpha. No row = factor 1.
CREATE TABLE dirichlet_alphas (
    component   TEXT PRIMARY KEY,
    factor      DOUBLE PRECISION NOT NULL CHECK (factor > 0),
    updated_at  TIMESTAMPTZ NOT NULL
);
CREATE TABLE dirichlet_history (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL,
    before      JSONB NOT NULL,
    after       JSONB NOT NULL,
    evidence    JSONB NOT NULL
);

-- Tuned gate parameters (plan §4.5), read by the gates at start and after each pass.
CREATE TABLE gate_tuning (
    param       TEXT PRIMARY KEY,
    value       DOUBLE PRECISION NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL
);
-- Every proposed change, applied or refused by the Two-Gate guardrail, with evidence.
CREATE TABLE gate_tuning_log (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL,
    param       TEXT NOT NULL,
    before      DOUBLE PRECISION NOT NULL,
    proposed    DOUBLE PRECISION NOT NULL,
    applied     BOOLEAN NOT NULL,
    direction   TEXT NOT NULL CHECK (direction IN ('more_permissive', 'more_selective')),
    reason      TEXT NOT NULL,
    evidence    JSONB NOT NULL
);

-- Conflict-aware reconsolidation (plan §4.4): pairs the model judged a productive
-- contradiction, kept side by side; asked about once.
CREATE TABLE productive_contradictions (
    insight_id  BIGINT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    memory_id   BIGINT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    at          TIMESTAMPTZ NOT NULL,
    explanation TEXT NOT NULL,
    PRIMARY KEY (insight_id, memory_id)
);

-- Temporal chain replay (plan §4.4): links between consecutive episodic memories
-- live in the co-access network, flagged, so spreading activation follows them.
ALTER TABLE memory_co_access ADD COLUMN temporal BOOLEAN NOT NULL DEFAULT FALSE;
