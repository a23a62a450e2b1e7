-- Copilot's held items (issue 17), durable: what the exit gate was unsure of and
-- holds for the guardian's decision. A row is written in the flush transaction that
-- holds the item (with the decisions of the rest of its chunk), so a held item
-- survives a crash or a restart and is asked about again whatever the next start's
-- memory mode is. Deciding it deletes the row in the transaction that writes (or
-- drops) the memory, so an answer takes effect exactly once.
--
-- The scratch row stays unflushed while held (its content lives there); the foreign
-- key without cascade keeps anything from deleting it under a held item. The gate's
-- whole evaluation is kept (`evaluation`, `embedding`) so a "keep" writes exactly the
-- decision the guardian was shown, with no new embedding or language-model call;
-- neighbours that were items of the same chunk are resolved to memory ids when held.
CREATE TABLE held_memories (
    scratch_id      BIGINT PRIMARY KEY REFERENCES scratch_buffer(id),
    action          TEXT NOT NULL CONSTRAINT held_memories_action_known
                    CHECK (action IN ('persist', 'persist_flag')),   -- what keeping it writes
    why             TEXT NOT NULL,                                     -- why the gate was unsure
    embed_model     TEXT NOT NULL,
    embedding       vector(768) NOT NULL,
    evaluation      JSONB NOT NULL,
    flush_reason    TEXT NOT NULL,
    held_at         TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_held_memories_held_at ON held_memories (held_at);
