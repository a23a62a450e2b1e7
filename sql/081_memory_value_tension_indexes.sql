-- The few rows the CBA coherence monitor reads every light tick (plan §3.9 Phase C,
-- src/consolidation/monitors.py): value/goal memories (value axis, action axis) and
-- tensions (action axis). Without these the monitor's query is a full scan of memories.
-- Partial indexes over columns that only deep-pass steps change (metadata, memory_type):
-- retrieval's and the weight choke point's updates stay HOT. The goal-budget query of
-- the weight choke point (metadata->>'kind' = 'goal') can use the first one too.
CREATE INDEX idx_memories_value_goal ON memories (id) WHERE metadata->>'kind' IN ('value', 'goal');
CREATE INDEX idx_memories_tension ON memories (id) WHERE memory_type = 'tension';
