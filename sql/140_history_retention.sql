-- Bounded history (issue 24): the history tables keep a retention window (runtime.yaml
-- consolidation.light.retention); what leaves them is rolled up per day first, so totals
-- survive. Cost totals are kept at insert instead: /cost's lifetime line reads a few
-- rows per day here, never the whole ledger.

-- Per day, per (provider, model, purpose): every llm_calls row ever written, counted when
-- it is inserted. Deleting ledger rows (retention) leaves these totals alone.
CREATE TABLE llm_calls_daily (
    day         DATE NOT NULL,
    provider    TEXT NOT NULL,
    model       TEXT NOT NULL,
    purpose     TEXT NOT NULL,
    calls       BIGINT NOT NULL DEFAULT 0,
    failed      BIGINT NOT NULL DEFAULT 0,
    tokens_in   BIGINT NOT NULL DEFAULT 0,
    tokens_out  BIGINT NOT NULL DEFAULT 0,
    cost_usd    NUMERIC(18, 8) NOT NULL DEFAULT 0,
    PRIMARY KEY (day, provider, model, purpose)
);

-- Statement-level with a transition table: one upsert per INSERT statement, however
-- many rows it wrote (the ledger flushes its queue in one statement).
CREATE FUNCTION llm_calls_daily_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO llm_calls_daily AS d (day, provider, model, purpose, calls, failed, tokens_in, tokens_out, cost_usd)
    SELECT (n.at AT TIME ZONE 'UTC')::date, n.provider, n.model, n.purpose, count(*),
           count(*) FILTER (WHERE NOT n.ok), sum(n.tokens_in), sum(n.tokens_out), sum(n.cost_usd)
      FROM new_calls n
     GROUP BY 1, 2, 3, 4
    ON CONFLICT (day, provider, model, purpose) DO UPDATE
       SET calls = d.calls + EXCLUDED.calls, failed = d.failed + EXCLUDED.failed,
           tokens_in = d.tokens_in + EXCLUDED.tokens_in, tokens_out = d.tokens_out + EXCLUDED.tokens_out,
           cost_usd = d.cost_usd + EXCLUDED.cost_usd;
    RETURN NULL;
END $$;

CREATE TRIGGER llm_calls_daily_on_insert AFTER INSERT ON llm_calls
    REFERENCING NEW TABLE AS new_calls FOR EACH STATEMENT EXECUTE FUNCTION llm_calls_daily_add();

INSERT INTO llm_calls_daily (day, provider, model, purpose, calls, failed, tokens_in, tokens_out, cost_usd)
SELECT (at AT TIME ZONE 'UTC')::date, provider, model, purpose, count(*), count(*) FILTER (WHERE NOT ok),
       sum(tokens_in), sum(tokens_out), sum(cost_usd)
  FROM llm_calls GROUP BY 1, 2, 3, 4;

-- Per day, per source table and key: what retention removed (rows, and the table's
-- one summed quantity: applied delta, magnitude, tokens...). Written only by retention.
CREATE TABLE history_daily (
    source      TEXT NOT NULL,
    day         DATE NOT NULL,
    key         TEXT NOT NULL,
    rows        BIGINT NOT NULL,
    amount      DOUBLE PRECISION NOT NULL DEFAULT 0,
    PRIMARY KEY (source, day, key)
);

-- Retention walks each table oldest first by its time column.
CREATE INDEX idx_recall_outcomes_at ON recall_outcomes (at);
CREATE INDEX idx_dmn_items_at ON dmn_items (at);
-- Promotion and alignment look for an actor's rows about a memory.
CREATE INDEX idx_consolidation_log_actor ON consolidation_log (actor, memory_id, at);
