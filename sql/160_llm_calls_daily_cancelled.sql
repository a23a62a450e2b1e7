-- /cost tells a cancelled call from a failed one (issue 38): the mind ended it (a user's
-- turn took the endpoint, shutdown, the cycle deadline), the provider did not fail. The
-- daily roll-up counts them apart; rows from before keep them in `failed` except where the
-- ledger still holds the rows to count them again.
ALTER TABLE llm_calls_daily ADD COLUMN cancelled BIGINT NOT NULL DEFAULT 0;

UPDATE llm_calls_daily d
   SET cancelled = c.n, failed = GREATEST(0, d.failed - c.n)
  FROM (SELECT (at AT TIME ZONE 'UTC')::date AS day, provider, model, purpose, count(*) AS n
          FROM llm_calls WHERE status = 'cancelled' GROUP BY 1, 2, 3, 4) c
 WHERE d.day = c.day AND d.provider = c.provider AND d.model = c.model AND d.purpose = c.purpose;

CREATE OR REPLACE FUNCTION llm_calls_daily_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO llm_calls_daily AS d (day, provider, model, purpose, calls, failed, cancelled, tokens_in,
                                      tokens_out, cost_usd)
    SELECT (n.at AT TIME ZONE 'UTC')::date, n.provider, n.model, n.purpose, count(*),
           count(*) FILTER (WHERE NOT n.ok AND n.status IS DISTINCT FROM 'cancelled'),
           count(*) FILTER (WHERE n.status = 'cancelled'),
           sum(n.tokens_in), sum(n.tokens_out), sum(n.cost_usd)
      FROM new_calls n
     GROUP BY 1, 2, 3, 4
    ON CONFLICT (day, provider, model, purpose) DO UPDATE
       SET calls = d.calls + EXCLUDED.calls, failed = d.failed + EXCLUDED.failed,
           cancelled = d.cancelled + EXCLUDED.cancelled,
           tokens_in = d.tokens_in + EXCLUDED.tokens_in, tokens_out = d.tokens_out + EXCLUDED.tokens_out,
           cost_usd = d.cost_usd + EXCLUDED.cost_usd;
    RETURN NULL;
END $$;
