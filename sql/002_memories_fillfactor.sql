-- Retrieval rewrites every retrieved row (access_count, access_timestamps, alpha/beta).
-- With ~1.7 KB rows packed four to a page those updates cannot be HOT, so each one
-- re-inserts into the HNSW index: measured 315 ms p50 for a 20-row write-back at 100k
-- rows. Leaving half of each page free keeps the new version on the same page (HOT,
-- no index insert): 0.95 ms p50 in the same run. Cost: the heap is twice as large.
ALTER TABLE memories SET (fillfactor = 50);
