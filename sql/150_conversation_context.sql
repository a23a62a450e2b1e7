-- Conversation context (issue 35; plan §4.6's aim, extractive, without a model): a turn of a
-- conversation often answers the turn before it ("What did you do last weekend?" / "Went
-- hiking with Mel."), so the question a user later asks shares its words with the turn before
-- the answer, not with the answer. `conversation_context` holds the turns before a memory in
-- its conversation ("<speaker>: <words>" lines, src/recall/conversation.py); it is for
-- finding the memory, never shown: what the user and the model read stay the turn itself.
--
-- The full-text document becomes two parts of one tsvector: the memory's own text at weight
-- A, its context (and a model's §4.6 preamble, which adds to it) at weight D. The search
-- scores a lexeme matched in the A part fully and one matched only in the D part at the
-- context weight (src/recall/search.py, `w_context`); anything that matched `content_tsv`
-- before still matches it (every lexeme of the content is in it, at weight A).
ALTER TABLE memories ADD COLUMN conversation_context TEXT;

ALTER TABLE memories ALTER COLUMN content_tsv SET EXPRESSION AS (
    setweight(to_tsvector('english', left(content, 100000)), 'A')
    || setweight(to_tsvector('english',
                             left(COALESCE(conversation_context, '') || ' '
                                  || COALESCE(content_contextualized, ''), 100000)), 'D')
);
