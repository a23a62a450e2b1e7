-- Every decision of the entry and exit gates (plan §2.8, §2.9), so consolidation can
-- tune the gate (§4.5) and an operator can ask "why was this dropped?" with plain SQL:
--   SELECT at, gate, action, reason, cell_relevance, cell_novelty, s_i, relevance,
--          novelty_similarity, random_draw, noise_fired
--     FROM gate_decisions WHERE content_preview LIKE 'I moved to%' ORDER BY at;

CREATE TABLE gate_decisions (
    id                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at                  TIMESTAMPTZ NOT NULL DEFAULT now(),
    gate                TEXT NOT NULL CONSTRAINT gate_decisions_gate_known
                        CHECK (gate IN ('entry', 'exit')),
    -- No foreign key: scratch rows are deleted once their TTL has passed, the
    -- decision (and the preview below) stays.
    scratch_id          BIGINT,
    -- The memory the action wrote or touched: the new row for persist / persist_flag,
    -- the reinforced row for reinforce.
    memory_id           BIGINT REFERENCES memories(id) ON DELETE SET NULL,
    source_tag          TEXT NOT NULL,
    content_preview     TEXT NOT NULL,          -- first 200 characters
    rule                TEXT,                   -- entry gate: short | mechanical | content
    cell_relevance      TEXT CONSTRAINT gate_decisions_relevance_known
                        CHECK (cell_relevance IN ('core', 'peripheral', 'irrelevant')),
    cell_novelty        TEXT CONSTRAINT gate_decisions_novelty_known
                        CHECK (cell_novelty IN ('confirming', 'novel', 'contradicting')),
    s_i                 DOUBLE PRECISION,       -- spreading activation (plan §2.7)
    relevance           DOUBLE PRECISION,       -- max(S_i, bootstrap floor): the relevance axis
    bootstrap_floor     DOUBLE PRECISION,
    activation          DOUBLE PRECISION,       -- A_i = B_i + S_i + P_i + noise
    base_level          DOUBLE PRECISION,
    novelty_similarity  DOUBLE PRECISION,       -- cosine to the nearest memory (same embed model)
    nearest_memory_id   BIGINT,
    contradiction_layer TEXT,                   -- which layer decided: negation | embedding | llm | ...
    opposition          DOUBLE PRECISION,       -- projection on the learned negation direction
    emotional_charge    DOUBLE PRECISION,
    cell_action         TEXT,                   -- what the matrix says for the cell
    action              TEXT NOT NULL CONSTRAINT gate_decisions_action_known
                        CHECK (action IN ('buffer', 'skip', 'reinforce', 'persist',
                                          'persist_flag', 'drop')),
    random_draw         DOUBLE PRECISION,       -- the uniform draw that decided (NULL: rule had none)
    noise_rate          DOUBLE PRECISION,
    noise_fired         BOOLEAN NOT NULL DEFAULT FALSE,
    round               INTEGER NOT NULL DEFAULT 1 CHECK (round >= 1),
    embed_model         TEXT,
    reason              TEXT NOT NULL,
    details             JSONB NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX idx_gate_decisions_at ON gate_decisions (at);
CREATE INDEX idx_gate_decisions_scratch ON gate_decisions (scratch_id);
CREATE INDEX idx_gate_decisions_memory ON gate_decisions (memory_id);
-- A buffered item becomes a memory at most once, whatever crashes in between: the
-- persist and this row are written in one transaction.
CREATE UNIQUE INDEX idx_gate_decisions_persisted_once ON gate_decisions (scratch_id)
    WHERE gate = 'exit' AND action IN ('persist', 'persist_flag');

-- The learned negation direction per embed model (contradiction layer 2, plan §2.8):
-- the mean difference of the embeddings of fixed statement / negation pairs, learned
-- once per model and pair list (pairs_sha256), with its calibrated decision band.
CREATE TABLE negation_directions (
    embed_model     TEXT NOT NULL,
    pairs_sha256    TEXT NOT NULL,
    direction       vector NOT NULL,
    no_below        DOUBLE PRECISION NOT NULL,
    yes_above       DOUBLE PRECISION NOT NULL,
    n_pairs         INTEGER NOT NULL,
    details         JSONB NOT NULL DEFAULT '{}'::jsonb,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (embed_model, pairs_sha256)
);
