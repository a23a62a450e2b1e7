"""The "skills available" section of a System 1 prompt whose focus is near a skill. Pure.

One line per skill near the focus (src/skills/recall_skill.py picks them),
`label — when_to_use`, nearest first, inside a token cap:
the procedures stay in the database until the model asks for one with
`RECALL_SKILL: <label>`. Skills that do not fit are counted in one closing line
(an unknown label sent to RECALL_SKILL gets the full list back). The fixed wording is
in src/skills/prompts.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from src.skills.prompts import HEADER, INSTRUCTION, more_skills_line
from src.skills.repository import SkillSummary
from src.text import excerpt, without_controls
from src.tokens import count_tokens

CUE_CHARS = 200


def one_line(text: str, limit: int) -> str:
    """For the model's prompt: control characters dropped, then an `excerpt`."""
    return excerpt(without_controls(text), limit)


def skill_line(skill: SkillSummary) -> str:
    return f"- {skill.label} — {one_line(skill.when_to_use, CUE_CHARS)}"


def skills_section(skills: Sequence[SkillSummary], max_tokens: int) -> str:
    """The section for `skills` (already in priority order), at most `max_tokens` tokens.

    Empty when there are no skills or not even one line fits.
    """
    if not skills:
        return ""
    lines = [skill_line(s) for s in skills]
    total = max(len(lines), skills[0].total)
    # a first guess from per-line counts (one pass), then the exact count decides
    used = count_tokens(f"{HEADER}\n{INSTRUCTION}") + count_tokens(more_skills_line(total)) + 1
    shown = 0
    for line in lines:
        used += count_tokens(line) + 1
        if used > max_tokens:
            break
        shown += 1
    shown = min(len(lines), shown + 1)
    while shown > 0:
        rest = total - shown
        tail = [more_skills_line(rest)] if rest else []
        text = "\n".join([HEADER, INSTRUCTION, *lines[:shown], *tail])
        if count_tokens(text) <= max_tokens:
            return text
        shown -= 1
    return ""
