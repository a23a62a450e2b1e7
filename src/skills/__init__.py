"""Skills: procedural memory the mind retrieves on purpose (issue 17).

A skill is a whole procedure with a retrieval cue. A System 1 prompt whose focus is
near a skill carries one line per such skill (`label — when_to_use`,
src/skills/prompt.py; nearness: src/skills/recall_skill.py); the model asks
for the procedure with `RECALL_SKILL: <label>` (src/skills/recall_skill.py); the
guardian drafts, lists, shows and removes skills (src/skills/commands.py,
src/skills/drafting.py). Rows live in PostgreSQL (src/skills/repository.py).
"""
