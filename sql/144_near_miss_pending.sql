-- Near-miss suppression (plan §3.8: ranks keep+1 … limit get contradict(0.05)) waits here
-- for the light ticker, which applies it through the weight choke point in batches, summed
-- per memory (src/recall/mutation.py apply_near_misses). Applied in the cycle it was 15
-- weight changes of the 20 a retrieval makes: 15 memory row versions, their center and
-- standing trigger work and 15 audit rows a cycle, ~1 ms of a ~27 ms cycle at 100k
-- (notes.md, "Near misses"). One row per retrieval; rows are deleted as they are applied.
-- No foreign key on the ids: a memory gone by then is skipped by the choke point.
CREATE TABLE near_miss_pending (
    id          BIGSERIAL PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL,
    memory_ids  BIGINT[] NOT NULL,
    amount      DOUBLE PRECISION NOT NULL CHECK (amount >= 0),
    query       TEXT NOT NULL DEFAULT ''
);
