-- Usefulness from outside recall (plan §5.3, issue 25): what the mind's answers drew on
-- and what the user and the guardian said about it. Re-access alone is not use: recall
-- records its own accesses, so a memory recalled often looked useful however little
-- the answers used it. One row per memory per piece of evidence:
--   reflected   the answer of (session_id, cycle) drew on it: `share` of its own content
--               words (those the question did not already hold) are in the answer
--               (src/outcomes/use.py); valence 0
--   restated    the user's message of (session_id, cycle) said it again (`share` of its words);
--               valence 0
--   good, bad   the guardian's /good, /bad (src/outcomes/feedback.py); valence +1 / -1
--   confirmed, corrected   the user's plain feedback on an answer that drew on it; +1 / -1
-- A recall outcome is scored from these rows and the user's lines at the exit gate
-- (src/recall/outcomes.py); the feedback kinds are also folded into the memory's utility
-- once each (`folded`, src/consolidation/evolution/utility.py).
CREATE TABLE memory_uses (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL,
    memory_id   BIGINT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL CHECK (kind IN ('reflected', 'restated', 'good', 'bad', 'confirmed', 'corrected')),
    valence     DOUBLE PRECISION NOT NULL CHECK (valence BETWEEN -1 AND 1),
    session_id  TEXT,
    cycle       INTEGER,
    share       DOUBLE PRECISION CHECK (share BETWEEN 0 AND 1),
    evidence    JSONB NOT NULL DEFAULT '{}'::jsonb,
    folded      BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX idx_memory_uses_memory ON memory_uses (memory_id, at);
CREATE INDEX idx_memory_uses_cycle ON memory_uses (session_id, cycle);
CREATE INDEX idx_memory_uses_unfolded ON memory_uses (id) WHERE NOT folded AND valence <> 0;

-- A scored recall the user or guardian said was wrong to rely on (/bad, a correction, a
-- contradicting line): utility's -1 even when it was used. `used` is the Dirichlet flag.
ALTER TABLE recall_outcomes ADD COLUMN wrong BOOLEAN;

-- Demotion passes the Two-Gate guardrail; one it refused is tried again only after
-- `demotion_every_days` (src/consolidation/evolution/forgetting.py reads these rows).
CREATE INDEX idx_safety_events_two_gate ON safety_events (memory_id) WHERE ceiling = 'two_gate';
