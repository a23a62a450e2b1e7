-- Issue 27: who said what, and internal text kept internal — what earlier runs stored.
--
-- No column is added: a memory's speaker is its source_tag (external_user the user,
-- internal_self what the mind said, internal_thought what it only thought, ...) or the
-- name in metadata.speaker (src/recall/speakers.py). Two things earlier runs stored need
-- mending:
--
-- 1. The mind's answer to a thought of its own (DMN, consolidation, gut, scheduled) was
--    kept as internal_self, "I said", although the action check kept it internal. Such
--    an answer is a thought: internal_thought. Found by its text in thought_log: the
--    output of a cycle that was not the user's and was not spoken, and never spoken by
--    any cycle (the same words said to the user elsewhere stay "said").
-- 2. Failure and reflex notices ("(I cannot answer in words right now: ...)", "(reflex
--    mode — ...)") and a model's copies of them were kept as the mind's own words. They
--    are the loop's, not the mind's: deleted from memories (their links and co-access go
--    with them, logs keep a NULL), and an unflushed scratch row holding one is marked
--    flushed so the exit gate never stores it. The words are src/loop/degraded.py's
--    FAILURE_NOTICE; only internal rows (the user's own lines are never touched).

CREATE TEMPORARY TABLE unsaid_outputs ON COMMIT DROP AS
SELECT DISTINCT output
  FROM thought_log t
 WHERE t.output IS NOT NULL
   AND t.source_tag IS DISTINCT FROM 'external_user'
   AND NOT COALESCE((t.actions -> 0 ->> 'allowed')::boolean, false)
EXCEPT
SELECT output
  FROM thought_log t
 WHERE t.output IS NOT NULL
   AND COALESCE((t.actions -> 0 ->> 'allowed')::boolean, false);

UPDATE memories m
   SET source_tag = 'internal_thought'
  FROM unsaid_outputs u
 WHERE m.source_tag = 'internal_self' AND m.content = u.output;

UPDATE scratch_buffer s
   SET source_tag = 'internal_thought'
  FROM unsaid_outputs u
 WHERE s.source_tag = 'internal_self' AND s.content = u.output AND s.flushed_at IS NULL;

DELETE FROM memories
 WHERE source_tag LIKE 'internal\_%'
   AND NOT immutable
   AND content ~* '(cannot answer in words|reflex mode —|no language model is configured|language model (did not answer within|failed:|answered with a tool call)|could not process your message|database is still unavailable)';

UPDATE scratch_buffer s
   SET flushed_at = now()
 WHERE s.flushed_at IS NULL
   AND s.source_tag LIKE 'internal\_%'
   AND s.content ~* '(cannot answer in words|reflex mode —|no language model is configured|language model (did not answer within|failed:|answered with a tool call)|could not process your message|database is still unavailable)'
   AND NOT EXISTS (SELECT 1 FROM held_memories h WHERE h.scratch_id = s.id);
