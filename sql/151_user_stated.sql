-- The user's own statements (issue 35 item 4): a question about the user ("What do I do for
-- a living?") is answered by what the user said, yet in a store of other people's imported
-- chat and of the mind's own lines the user's facts are a few rows among thousands, and a
-- fact asked in other words ranks 60th–360th by cosine among them all while it ranks 1st–3rd
-- among the user's own lines. Recall's `own` arm (src/recall/search.py) compares the newest
-- of these rows exactly; this partial index finds them without reading the others.
--
-- Who said a row is src/recall/speakers.speaker_of: a `metadata.speaker` string names the
-- speaker ("user", case and surrounding whitespace aside, is the user), else the source tag
-- does (`external_user`). The predicate is written out in the search exactly as here, so the
-- planner can use the index.
CREATE INDEX idx_memories_user_stated ON memories (id)
    WHERE CASE WHEN jsonb_typeof(metadata -> 'speaker') = 'string'
                    AND btrim(metadata ->> 'speaker', E' \t\n\r') <> ''
               THEN lower(btrim(metadata ->> 'speaker', E' \t\n\r')) = 'user'
               ELSE source_tag = 'external_user' END;
