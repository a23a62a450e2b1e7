-- Skills offered only near the focus (issue 38 item 5): each skill's cue — its label in
-- words, name, when_to_use and the start of its procedure (src/skills/repository.py
-- `CUE`) — embedded by the memories' embedder, so the loop compares the focus with every
-- skill in one statement and lists only the skills near it. Filled lazily by the loop
-- (src/skills/recall_skill.py) for rows whose cue has no vector of the current model.
ALTER TABLE skills ADD COLUMN cue_embedding halfvec(768),
                   ADD COLUMN cue_embed_model TEXT;

-- A vector is of the text it was made from: any change of that text (an edit, a forget
-- scrubbing the words, sql/156) drops it in the same statement, so no vector of words
-- that are gone outlives them; the loop embeds the new text at its next cycle.
CREATE FUNCTION skills_cue_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.cue_embedding := NULL;
    NEW.cue_embed_model := NULL;
    RETURN NEW;
END $$;

CREATE TRIGGER skills_cue_changed BEFORE UPDATE OF label, name, when_to_use, procedure ON skills
    FOR EACH ROW WHEN ((OLD.label, OLD.name, OLD.when_to_use, OLD.procedure)
                       IS DISTINCT FROM (NEW.label, NEW.name, NEW.when_to_use, NEW.procedure))
    EXECUTE FUNCTION skills_cue_changed();
