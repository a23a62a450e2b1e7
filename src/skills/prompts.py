"""What the skills say to a model (issue 17).

- Drafting (src/skills/drafting.py): `DRAFT_SYSTEM` is the system prompt (or, in an
  isolated meta call, the head of the question: `isolated_draft_question`); the
  material is `conversation_material` (`/skill save`) or `procedures_material` (deep
  consolidation's proposals, src/skills/proposal.py), with the guardian's hint added by
  `draft_request`; the model fills `SkillDraft`, whose field descriptions instruct it.
- The "skills available" section of a System 1 prompt whose focus is near a skill
  (src/skills/prompt.py renders it inside its token cap): `HEADER`, `INSTRUCTION`, one line per skill, `more_skills_line`.
- `RECALL_SKILL_WHEN`: when the `RECALL_SKILL` verb is to be used (src/skills/recall_skill.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

DRAFT_SYSTEM = (
    "You turn a worked example into a reusable procedure (a skill) for a future agent. "
    "Keep only what generalises: the steps, the decisions and their reasons, the pitfalls met. "
    "Write the procedure as numbered instructions to the agent, not as a story of what happened.")


class SkillDraft(BaseModel):
    """The structured output of a drafting call; the descriptions instruct the model."""

    model_config = ConfigDict(extra="ignore")

    label: str = Field(description="snake_case identifier, 2-4 words, captures the essence (e.g. csv_summary)")
    name: str = Field(description="short human-readable display name (e.g. 'CSV summary')")
    when_to_use: str = Field(description="ONE sentence saying when this skill applies: the cue a future "
                                         "agent sees, when a message is near this skill, to decide whether to recall it")
    procedure: str = Field(description="numbered steps, specific decisions and pitfalls, written as "
                                       "instructions for a future agent (not a retrospective)")


def conversation_material(transcript: str) -> str:
    """`/skill save`: the recent conversation (`role: text` lines) to distil."""
    return ("Here is the recent conversation between the guardian (user) and you (assistant). "
            "Distil the procedure it worked out into a skill.\n\n" + transcript)


def procedures_material(memories: Sequence[Mapping[str, Any]], memory_chars: int) -> str:
    """A deep pass's proposal: the recurring procedural memories (`id`, `content`) to distil."""
    return ("These instructions were learned on separate occasions and recur. Distil the one "
            "procedure they share into a skill.\n\n"
            + "\n\n".join(f"[memory {r['id']}] {r['content'][:memory_chars]}" for r in memories))


def draft_request(material: str, hint: str = "") -> str:
    """The material, with the guardian's hint when there is one."""
    return material + (f"\n\nThe guardian's hint for this skill: {hint}" if hint else "")


def isolated_draft_question(request: str) -> str:
    """An isolated meta call has no system prompt of ours: the instructions lead the question."""
    return f"{DRAFT_SYSTEM}\n\n{request}"


HEADER = "[PROCEDURAL MEMORY — skills available]"
INSTRUCTION = ("Procedures you have learned, one per line: label — when to use it. Recall one "
               "(RECALL_SKILL) only when it fits the task at hand.")


def more_skills_line(rest: int) -> str:
    """The closing line counting the skills that did not fit."""
    return f"- … {rest} more skill{'s' if rest != 1 else ''} not listed"


RECALL_SKILL_WHEN = "When one of the skills listed under [PROCEDURAL MEMORY] fits the task: read its steps."
