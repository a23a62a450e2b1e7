-- ---------------------------------------------------------------------------
-- The memories an update superseded (sql/153), found without reading the derivation links:
-- recall reads each hit's successor (src/recall/search.py), and consolidation's decay,
-- promotion and merges leave superseded memories out (src/consolidation/deep/
-- supersedes_repository.py `SUPERSEDED_BY_UPDATE`). Update links are few beside the merge
-- and insight links of a consolidated store.
-- ---------------------------------------------------------------------------
CREATE INDEX idx_supersedes_update ON memory_supersedes (source_id, insight_id) WHERE via = 'update';
