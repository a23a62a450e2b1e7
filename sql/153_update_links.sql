-- ---------------------------------------------------------------------------
-- What is current (issue 37 item 3). A newer statement that updates an older one about the
-- same subject (a move, a new job, a rescheduled appointment) supersedes it: a
-- `memory_supersedes` row with insight_id = the newer memory, source_id = the older, via
-- 'update'. The older stays stored and findable; recall ranks the newer first and the model's
-- context shows the older marked as earlier (src/gates/updates.py finds the links,
-- src/recall/current.py reads them). Unlike the other kinds, an update link is no derivation:
-- the newer memory was said, not built from the older.
-- ---------------------------------------------------------------------------
ALTER TABLE memory_supersedes DROP CONSTRAINT memory_supersedes_via_known;
ALTER TABLE memory_supersedes ADD CONSTRAINT memory_supersedes_via_known
    CHECK (via IN ('insight', 'merge', 'narrative', 'update'));
