-- ---------------------------------------------------------------------------
-- When a memory happened or was said (issue 37 item 2): its event time, else when it was
-- stored (src/recall/when.py `memory_time`). A question that names a time ("last week",
-- "in May 2024") reads the memories of that period (src/recall/in_time.py); this index finds
-- them without reading the rest. The expression is written out exactly so in the query.
-- ---------------------------------------------------------------------------
CREATE INDEX idx_memories_time ON memories ((COALESCE(event_time, created_at)));
