-- issue 24: whose work a model call was, for the background budget (src/providers/budget.py).
-- NULL: the user's turns; 'dmn', 'gut', 'consolidation': internal work, which the budget
-- counts. The budget is seeded at start from the last 24 hours of these rows: the partial
-- index keeps that a range scan over internal calls only, never the whole ledger.
ALTER TABLE llm_calls ADD COLUMN caller TEXT;
CREATE INDEX idx_llm_calls_background ON llm_calls (at) WHERE caller IS NOT NULL;
