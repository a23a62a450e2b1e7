"""Skills: procedural memory the mind retrieves on purpose (issue 17).

A skill is a whole procedure with a retrieval cue. Every System 1 prompt carries
one line per skill (`label — when_to_use`, src/skills/prompt.py); the model asks
for the procedure with `RECALL_SKILL: <label>` (src/skills/recall_skill.py); the
guardian drafts, lists, shows and removes skills (src/skills/commands.py,
src/skills/drafting.py). Rows live in PostgreSQL (src/skills/repository.py).
"""
