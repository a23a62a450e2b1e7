-- Spreading activation reads each seed's top-k co-access partners every cycle
-- (src/recall/co_access.py fetch_partners). Memories injected every cycle (identity,
-- values) become hubs: a few hundred cycles gave them 1,700 partners, and ranking all of
-- a hub's edges made the two partner queries ~3 ms a cycle at 100k, growing with the
-- mind's age. Ordered by count inside the index, each seed reads only its top k.
--
-- The cost: co_access_count is now indexed, so an increment is no longer a HOT update
-- (a cycle upserts ~10-50 pairs). The old (memory_id_b, memory_id_a) index is replaced;
-- the new one still leads with memory_id_b for the cascade from memories.
CREATE INDEX idx_co_access_a_top ON memory_co_access (memory_id_a, co_access_count DESC, memory_id_b);
CREATE INDEX idx_co_access_b_top ON memory_co_access (memory_id_b, co_access_count DESC, memory_id_a);
DROP INDEX idx_co_access_b;
