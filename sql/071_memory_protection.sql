-- Protection from forgetting (issue 17): the guardian marks a memory protected
-- (/protect ID); decay, demotion and near-miss suppression then skip it at the
-- weight choke point, which writes the skip to consolidation_log
-- (operation 'protected_skip', applied_delta 0). Immutable memories are untouched
-- by every change anyway. A constant default adds the column without a rewrite.
ALTER TABLE memories ADD COLUMN protected BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX idx_memories_protected ON memories (id) WHERE protected;
