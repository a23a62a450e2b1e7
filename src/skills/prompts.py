"""What the skills say to a model (issue 17).

- Drafting (src/skills/drafting.py): `/skill save` sends `SAVE_SYSTEM` as the system
  prompt and `conversation_material`, and the model fills `SavedSkillDraft`: it only
  orders the guardian's own steps and names the skill (src/skills/fidelity.py holds the
  draft to that). Deep consolidation's proposals (src/skills/proposal.py) and the CLI's
  `skills draft` send `DRAFT_SYSTEM` (in an isolated meta call, the head of the question:
  `isolated_draft_question`) with `procedures_material` or a transcript, and the model
  fills `SkillDraft`. The guardian's hint is added by `draft_request`; the schemas' field
  descriptions instruct the model.
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


SAVE_SYSTEM = (
    "You file the guardian's own procedure as a skill for a future agent. The steps come only from the "
    "guardian's lines (user:), never from yours (assistant:) nor from what you know. Keep each of the "
    "guardian's steps in their own words, with every number and unit exactly as written (\"exactly 3 "
    "minutes\" stays \"exactly 3 minutes\"). Your part is only to put the steps in the order they are "
    "done, one per numbered line, and to name the skill. Add nothing: no steps, tips, variations or "
    "ingredients of your own.")


class SavedSkillDraft(SkillDraft):
    """`/skill save`'s structured output: the guardian's steps, ordered and named."""

    procedure: str = Field(description="the guardian's own steps, one per numbered line, in their words and "
                                       "in the order they are done; every number and unit as they wrote it; "
                                       "nothing added")


def conversation_material(transcript: str) -> str:
    """`/skill save`: the recent conversation (`role: text` lines), the guardian's steps in it."""
    return ("Here is the recent conversation between the guardian (user) and you (assistant). File the "
            "procedure the guardian gave in their lines as a skill.\n\n" + transcript)


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
