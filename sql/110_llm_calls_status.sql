-- issue 27: what became of each model attempt. ok: answered; failed: an error came back;
-- timeout: no answer within its provider's timeout (providers.llm.timeout_s); cancelled: the
-- mind ended it (a user's turn needed the endpoint, the cycle deadline, shutdown). Before
-- this a cancelled attempt left no row. NULL: a row written without one (by hand): read `ok`.
ALTER TABLE llm_calls ADD COLUMN status TEXT;
UPDATE llm_calls
   SET status = CASE WHEN ok THEN 'ok' WHEN error LIKE 'ProviderTimeout:%' THEN 'timeout' ELSE 'failed' END;
ALTER TABLE llm_calls
    ADD CONSTRAINT llm_calls_status_known CHECK (status IN ('ok', 'failed', 'timeout', 'cancelled')),
    ADD CONSTRAINT llm_calls_status_matches_ok CHECK (status IS NULL OR (status = 'ok') = ok);
