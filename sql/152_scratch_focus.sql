-- ---------------------------------------------------------------------------
-- The attention focus a scratch row was said under (issue 36 item 1). The exit gate judges
-- an item's relevance against the conversation in which it was said, never the focus at
-- flush time (issue 22). The loop stores that focus with the row — the user's message when
-- attention takes it into a turn, the mind's answer when the entry gate admits it — as a
-- two-dimensional array: one row per focus vector (the turn's input, then the two foci
-- before it). NULL: no focus was known (a row from before this column, a pruned message,
-- an input without a vector); the exit gate then judges it against its window.
-- ---------------------------------------------------------------------------
ALTER TABLE scratch_buffer ADD COLUMN focus REAL[];
