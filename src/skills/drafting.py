"""Drafting a skill with System 1's structured output.

`/skill save [hint]` sends the recent conversation; deep consolidation sends a
cluster of procedural memories (src/skills/proposal.py). Either way the model fills
`SkillDraft`, whose field descriptions are its instructions (the texts: src/skills/prompts.py). Without a language
model (reflex mode) drafting is refused with a message that says how to enable it:
a skill written by no one would be a stub.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from src.errors import ProviderError
from src.providers.context_window import most_that_fit
from src.providers.protocols import ChatMessage, LanguageModel
from src.skills import repository as repo
from src.skills.labels import slugify
from src.skills.prompts import (
    DRAFT_SYSTEM,
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

def transcript(messages: Sequence[Any], *, max_messages: int, message_chars: int) -> str:
    """The last `max_messages` messages as `role: text` lines (objects with role/content)."""
    recent = list(messages)[-max_messages:]
    return "\n\n".join(f"{m.role}: {cut(m.content, message_chars)}" for m in recent)


async def draft(llm: LanguageModel, material: str, *, purpose: str, hint: str = "",
                max_tokens: int = 1024, isolated: bool = False) -> SkillDraft:
    """Ask System 1 for a SkillDraft from `material`; SkillError when it cannot.

    `isolated`: an isolated meta call (no identity, no history; consolidation's calls),
    the drafting instructions then lead the question instead of the system prompt.
    """
    if not getattr(llm, "configured", True):
        raise SkillError(OFFLINE_REFUSAL)
    ask = draft_request(material, hint)
    try:
        if isolated:
            structured = await llm.meta_call_structured(isolated_draft_question(ask), SkillDraft,
                                                        purpose=purpose, max_tokens=max_tokens)
        else:
            structured = await llm.generate_structured(
                [ChatMessage("user", ask)], SkillDraft, purpose=purpose, system=DRAFT_SYSTEM,
                max_tokens=max_tokens)
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
                                 message_chars: int = 2000, max_tokens: int = 1024) -> repo.Skill:
    """`/skill save [hint]`: draft a skill from the recent conversation and save it."""
    if not getattr(llm, "configured", True):
        raise SkillError(OFFLINE_REFUSAL)
    recent = list(messages)[-max_messages:]

    def material(k: int) -> str:   # the newest k messages
        return conversation_material(transcript(recent[len(recent) - k:], max_messages=max(k, 1),
                                                message_chars=message_chars))

    # as many of the newest messages as System 1's context window holds (issue 27)
    shown = max(1, most_that_fit(llm, len(recent), lambda k: draft_request(material(k), hint),
                                 system=DRAFT_SYSTEM, schema=SkillDraft, max_tokens=max_tokens))
    text = transcript(recent[len(recent) - shown:], max_messages=shown, message_chars=message_chars)
    if not text.strip():
        raise SkillError("nothing to draft from: the conversation is empty; work through the task "
                         "with the mind first, then /skill save")
    value = await draft(llm, conversation_material(text), purpose="skill_draft", hint=hint, max_tokens=max_tokens)
    shown = min(shown, len(recent))
    return await save_draft(db, value, {"origin": "conversation", "session_id": session_id,
                                        "messages": shown, "hint": hint or None})
