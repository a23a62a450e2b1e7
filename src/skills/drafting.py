"""Drafting a skill with System 1's structured output.

`/skill save [hint]` sends the recent conversation and asks the model only to order the
guardian's own steps and name the skill (`SavedSkillDraft`); the draft is then held
against the guardian's lines (src/skills/fidelity.py): a draft that lost or changed one
of their steps or numbers is saved as their own steps, in their words and order, and
steps nobody gave are left out. Deep consolidation sends a cluster of procedural
memories (src/skills/proposal.py) and the model fills `SkillDraft`. The field
descriptions are the model's instructions (the texts: src/skills/prompts.py). Without a
language model (reflex mode) drafting is refused with a message that says how to enable
it: a skill written by no one would be a stub.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from src.errors import ProviderError
from src.providers.context_window import most_that_fit
from src.providers.protocols import ChatMessage, LanguageModel
from src.skills import repository as repo
from src.skills.fidelity import Fidelity, keep_users_steps, users_lines
from src.skills.labels import slugify
from src.skills.prompts import (
    DRAFT_SYSTEM,
    SAVE_SYSTEM,
    SavedSkillDraft,
    SkillDraft,
    conversation_material,
    draft_request,
    isolated_draft_question,
)
from src.skills.repository import SkillError
from src.text import cut

OFFLINE_REFUSAL = ("cannot draft a skill: no language model is configured (reflex mode). Drafting needs "
                   "System 1 — set GEMINI_API_KEY, or providers.llm.base_url for a local "
                   "OpenAI-compatible server, and restart")
NO_STEPS = ("nothing to save: the draft holds no steps and your lines in the conversation give none; "
            "say the steps in your own words, then /skill save")

def transcript(messages: Sequence[Any], *, max_messages: int, message_chars: int) -> str:
    """The last `max_messages` messages as `role: text` lines (objects with role/content)."""
    recent = list(messages)[-max_messages:]
    return "\n\n".join(f"{m.role}: {cut(m.content, message_chars)}" for m in recent)


async def draft(llm: LanguageModel, material: str, *, purpose: str, hint: str = "",
                max_tokens: int = 1024, isolated: bool = False, system: str = DRAFT_SYSTEM,
                schema: type[SkillDraft] = SkillDraft) -> SkillDraft:
    """Ask System 1 for a `schema` draft from `material`; SkillError when it cannot.

    `isolated`: an isolated meta call (no identity, no history; consolidation's calls),
    the drafting instructions then lead the question instead of the system prompt
    `system`.
    """
    if not getattr(llm, "configured", True):
        raise SkillError(OFFLINE_REFUSAL)
    ask = draft_request(material, hint)
    try:
        if isolated:
            structured = await llm.meta_call_structured(isolated_draft_question(ask), schema,
                                                        purpose=purpose, max_tokens=max_tokens)
        else:
            structured = await llm.generate_structured(
                [ChatMessage("user", ask)], schema, purpose=purpose, system=system, max_tokens=max_tokens)
    except ProviderError as exc:
        raise SkillError(f"cannot draft a skill: the language model failed ({exc}); try again later") from exc
    return structured.value


async def save_draft(db: repo.Executor, value: SkillDraft, provenance: Mapping[str, Any]) -> repo.Skill:
    """Store a draft under a free label (the model's label, slugified)."""
    return await repo.create(db, label=slugify(value.label or value.name), name=value.name,
                             when_to_use=value.when_to_use, procedure=value.procedure,
                             provenance=provenance)


async def save_from_conversation(db: repo.Executor, llm: LanguageModel, messages: Sequence[Any], *,
                                 hint: str = "", session_id: str | None = None, max_messages: int = 20,
                                 message_chars: int = 2000, max_tokens: int = 1024) -> tuple[repo.Skill, Fidelity]:
    """`/skill save [hint]`: draft a skill from the recent conversation and save it, its
    procedure the guardian's own steps (see the module doc); with what was kept and dropped."""
    if not getattr(llm, "configured", True):
        raise SkillError(OFFLINE_REFUSAL)
    recent = list(messages)[-max_messages:]

    def material(k: int) -> str:   # the newest k messages
        return conversation_material(transcript(recent[len(recent) - k:], max_messages=max(k, 1),
                                                message_chars=message_chars))

    # as many of the newest messages as System 1's context window holds (issue 27)
    shown = max(1, most_that_fit(llm, len(recent), lambda k: draft_request(material(k), hint),
                                 system=SAVE_SYSTEM, schema=SavedSkillDraft, max_tokens=max_tokens))
    said = recent[len(recent) - shown:]
    text = transcript(said, max_messages=shown, message_chars=message_chars)
    if not text.strip():
        raise SkillError("nothing to draft from: the conversation is empty; work through the task "
                         "with the mind first, then /skill save")
    value = await draft(llm, conversation_material(text), purpose="skill_draft", hint=hint, max_tokens=max_tokens,
                        system=SAVE_SYSTEM, schema=SavedSkillDraft)
    kept = keep_users_steps(users_lines(said), value.procedure, about=f"{value.name}. {value.when_to_use}")
    if not kept.procedure.strip():
        raise SkillError(NO_STEPS)
    skill = await save_draft(db, value.model_copy(update={"procedure": kept.procedure}), {
        "origin": "conversation", "session_id": session_id, "messages": min(shown, len(recent)),
        "hint": hint or None, "fidelity": kept.provenance()})
    return skill, kept
