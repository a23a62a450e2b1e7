"""Step 3 of a cycle (plan §3.4): the prompt the model sees for the winner.

Context assembly (identity tracks and situational memories, §3.2), the reflection
bank's corrections (§3.7), the skills section, the cognitive state report, the gut line
(§5.1) and the cost line (§4.8) go into the system prompt; the conversation window
gives the rest of the budget. Any part that fails is left out and named in the prompt
(issue 11: a failing part degrades the cycle, it does not stop it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from src.context.tokens import count_tokens
from src.errors import ProviderError
from src.loop.attention import Candidate
from src.loop.degraded import NoContext, missing_line
from src.loop.outage import DB_ERRORS
from src.loop.prompts import frame_input, system_prompt
from src.metacognition.reflection import corrections_for, reflection_block
from src.providers.protocols import ChatMessage
from src.recall.retrieval import Retrieval


@dataclass(frozen=True)
class Prompt:
    """What step 4 sends: the system prompt and the messages (window + framed input)."""

    assembled: Any              # AssembledContext, or NoContext when assembly failed
    system: str
    user_text: str
    messages: list[ChatMessage]


async def build_prompt(loop, winner: Candidate, retrieval: Retrieval | None, report: str,
                       now: datetime) -> Prompt:
    """The whole prompt for this cycle's winner."""
    assembled = await assemble(loop, retrieval, now)
    block, cost = await reflection(loop, winner), await cost_line(loop)
    memories = "\n\n".join(x for x in (assembled.text, missing_line(loop._missing)) if x)
    skills = await loop.parts.skills.section() if loop.parts.skills is not None else ""
    gut = loop.inner.gut_summary() if loop.inner is not None else ""
    system = system_prompt(loop.settings.agent.name, memories, report, block, cost, gut=gut, skills=skills)
    user_text = frame_input(winner.source, winner.text)
    history = [ChatMessage("user" if m.role == "user" else "assistant", m.content)
               # the skills section lives inside the context budget: the conversation gives way
               for m in loop.fifo.window(assembled.conversation_budget - count_tokens(skills))]
    return Prompt(assembled, system, user_text, [*history, ChatMessage("user", user_text)])


async def assemble(loop, retrieval: Retrieval | None, now: datetime):
    """Context assembly; when it fails the cycle goes on without memories (said so)."""
    try:
        assembled = await loop.parts.assembler.assemble(
            retrieval, rng=loop.rng, now=now, session=loop.parts.manifest,
            refresh_identity=loop.fifo.needs_identity_reinjection)
    except DB_ERRORS as exc:
        loop.degraded("context assembly", exc)
        return NoContext(loop.settings.context.budget, missing_line(loop._missing))
    if loop.fifo.needs_identity_reinjection:
        loop.fifo.identity_reinjected()
    loop._active_ids = assembled.ids_by_track.get("situational", [])
    return assembled


async def reflection(loop, winner: Candidate) -> str:
    """The reflection bank's corrections near this input (§3.7), or "" when none or unavailable."""
    settings = loop.settings.escalation.reflection
    try:
        corrections = await corrections_for(loop.parts.pool, loop.parts.providers.embedder, winner.text,
                                            focus_vec=winner.embedding, settings=settings)
    except (ProviderError, *DB_ERRORS) as exc:
        loop.degraded("reflection corrections", exc)
        return ""
    return reflection_block(corrections, field_chars=settings.block_field_chars) if corrections else ""


async def cost_line(loop) -> str:
    """The §4.8 cost line; its totals scan all of llm_calls, so it is refreshed at most
    every `cost_line_refresh_s`, not every cycle."""
    now = time.monotonic()
    cache = loop._cost_cache
    if cache is None or now - cache[0] >= loop.cfg.cost_line_refresh_s:
        try:
            loop._cost_cache = (now, await loop.parts.providers.ledger.summary_line())
        except DB_ERRORS as exc:
            loop.degraded("cost line", exc)
            return cache[1] if cache else "[COST] unavailable this cycle"
    return loop._cost_cache[1]
