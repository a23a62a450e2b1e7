"""Compose the prompt (plan §3.4, step 3): what the model sees for the winner.

(The texts themselves are src/loop/prompts.py, as every package's prompts.py holds its
model texts; this module puts a cycle's prompt together from them.)

The system prompt holds what stays the same from turn to turn (the bootstrap prompt, the
immutable boundaries, the ask for a confidence); context assembly (identity tracks and
situational memories, §3.2), the reflection bank's corrections (§3.7), the skills section,
the cognitive state report, the gut line (§5.1) and the cost line (§4.8) go with the input,
after the conversation (src/loop/turn_context.py: the layout a server's prompt cache
keeps). Any part that fails is left out and named in the prompt (issue 11: a failing part
degrades the cycle, it does not stop it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

import asyncpg
import numpy as np

from src.context.assembly import AssembledContext, ContextAssembler, IdentityRows
from src.context.fifo import Message
from src.context.request import Request, TurnInput, fit_turn
from src.context.settings import ContextBudget
from src.db.deferred import Deferred
from src.errors import ProviderError
from src.loop.attending import Attended
from src.loop.conversation import Conversation
from src.loop.degraded import NoContext, Shortfalls
from src.loop.outage import DB_ERRORS
from src.loop.prompts import frame_input, system_prompt
from src.loop.turn_context import TurnContext, contexts_of, listed_in, turn_context
from src.loop.turn_tasks import TurnTasks
from src.loop.turns import combined_texts
from src.metacognition.reflection import PastCorrection, corrections_for, reflection_block
from src.metacognition.settings import ReflectionSettings
from src.providers.protocols import ChatMessage
from src.recall.retrieval import Retrieval
from src.recall.scoring import about_user
from src.recall.when import now_line
from src.skills.recall_skill import SkillRecall

if TYPE_CHECKING:
    from src.db.manifest import Manifest
    from src.loop.inner_life import InnerLife
    from src.providers.factory import Providers


@dataclass(frozen=True)
class Prompt:
    """What thinking sends: the system prompt and the messages (window + framed input)."""

    assembled: AssembledContext | NoContext   # NoContext: assembly failed this cycle
    system: str
    user_text: str                            # the input as framed for the model (and the window)
    messages: list[ChatMessage]
    context: TurnContext = TurnContext("", frozenset())   # what the model read ahead of the input

    @property
    def writes(self) -> tuple[Deferred, ...]:
        """The context's co-access, not yet written (src/db/deferred.py)."""
        return self.assembled.writes


class PromptReads(NamedTuple):
    """The prompt's three reads, started early (`Composing.start_reads`). The corrections are
    read as rows and put into words by `build`, which has the cycle's `now` for their dates."""

    identity: asyncio.Future[IdentityRows]
    corrections: asyncio.Future[list[PastCorrection]]
    skills: asyncio.Future[str]


@dataclass(frozen=True)
class PromptSettings:
    """What shapes the prompt: the agent's name, the context budget, the reflection bank's
    settings and how often the cost line is re-read."""

    agent_name: str
    budget: ContextBudget
    reflection: ReflectionSettings
    cost_line_refresh_s: float


@dataclass(frozen=True)
class PromptSources:
    """Where the prompt's parts are read: the database, the providers (System 1's window, the
    embedder, the ledger), and the optional skills, inner life and session manifest."""

    pool: asyncpg.Pool
    providers: Providers
    skills: SkillRecall | None = None
    inner: InnerLife | None = None
    manifest: Manifest | None = None


class Composing:
    """Builds each cycle's prompt; keeps the cost line between refreshes."""

    def __init__(self, assembler: ContextAssembler, conversation: Conversation, sources: PromptSources, *,
                 settings: PromptSettings, rng: np.random.Generator):
        self.assembler = assembler
        self.conversation = conversation
        self.sources = sources
        self.settings = settings
        self.rng = rng
        self._cost: tuple[float, str] | None = None    # (monotonic time, line)
        # the first window message last sent with its context (src/context/request.py)
        self._context_anchor: Message | None = None

    def start_reads(self, attended: Attended, shortfalls: Shortfalls, tasks: TurnTasks) -> PromptReads:
        """Start the prompt's three independent reads (identity rows, corrections, skills),
        side by side, as tasks of the turn: the cycle starts them as recall's search returns,
        so their round trips pass while recall scores. Not beside the search itself: on two
        cores the search's backend then lost more than assembly gained (notes.md)."""
        refresh = self.conversation.window.needs_identity_reinjection
        return PromptReads(tasks.spawn(self.assembler.read_identity(refresh=refresh), "identity read"),
                           tasks.spawn(self.corrections(attended, shortfalls), "corrections read"),
                           tasks.spawn(self.skills_section(attended), "skills read"))

    async def build(self, attended: Attended, retrieval: Retrieval | None, now: datetime,
                    shortfalls: Shortfalls, reads: PromptReads | None = None) -> Prompt:
        """The whole prompt for this cycle's winner (its reads started by `start_reads`, or here):
        the stable system prompt, the conversation, then this input after its context
        (src/loop/turn_context.py)."""
        winner, window = attended.winner, self.conversation.window
        assembled, corrections, skills = await asyncio.gather(
            self.assemble(retrieval, now, shortfalls, reads.identity if reads else None,
                          users_question=winner.text if winner.source == "user" and about_user(winner.text) else ""),
            reads.corrections if reads else self.corrections(attended, shortfalls),
            reads.skills if reads else self.skills_section(attended))
        block = reflection_block(corrections, field_chars=self.settings.reflection.block_field_chars, now=now)
        cost = await self.cost_line(shortfalls)
        inner = self.sources.inner
        gut = inner.gut_summary() if inner is not None else ""
        boundaries = next((s.text for s in assembled.sections if s.name == "immutable"), "")
        system = system_prompt(self.settings.agent_name, boundaries)
        user_text = frame_input(winner.source, winner.text)
        beside = [shortfalls.line(), skills, attended.report, attended.mode_line, gut, block, cost]
        # the whole prompt is measured against System 1's window (issue 27, src/context/request.py)
        parts = [p.text for p in attended.turn.parts] if attended.turn.combined else []
        history = window.messages
        anchor = next((k for k, m in enumerate(history) if m is self._context_anchor), 0)

        def fit(context: TurnContext, start: int) -> Request:
            said = TurnInput(user_text, context.text, parts, lambda texts: frame_input(winner.source, combined_texts(texts)))
            return fit_turn(self.sources.providers.system1, assembled.budget, system, history, said,
                            limit=assembled.conversation_budget, context_from=start)

        context = turn_context(assembled.sections, listed_in(history[anchor:]), beside, now=now_line(now),
                               said_before=contexts_of(history[anchor:]))
        turn = fit(context, anchor)
        if turn.context_from != anchor:   # older contexts are not sent: what they listed may be listed here
            context = turn_context(assembled.sections, listed_in(history[turn.context_from:]), beside,
                                   now=now_line(now), said_before=contexts_of(history[turn.context_from:]))
            turn = fit(context, turn.context_from)
        self._context_anchor = history[turn.context_from] if turn.context_from < len(history) else None
        return Prompt(assembled, system, user_text, turn.messages, context)

    async def assemble(self, retrieval: Retrieval | None, now: datetime, shortfalls: Shortfalls,
                       identity: Awaitable[IdentityRows] | None = None, *,
                       users_question: str = "") -> AssembledContext | NoContext:
        """Context assembly; when it fails the cycle goes on without memories (said so).
        Its situational memories seed the next cycle's spreading (`active_ids`).
        `users_question`: the user's message when it asks about the user (src/context/situational.py)."""
        window = self.conversation.window
        try:
            assembled = await self.assembler.assemble(
                retrieval, rng=self.rng, now=now, session=self.sources.manifest, identity=identity,
                refresh_identity=window.needs_identity_reinjection, users_question=users_question)
        except DB_ERRORS as exc:
            shortfalls.note("context assembly", exc)
            return NoContext(self.settings.budget, shortfalls.line())
        if window.needs_identity_reinjection:
            window.identity_reinjected()
        self.conversation.active_ids = assembled.ids_by_track.get("situational", [])
        return assembled

    async def skills_section(self, attended: Attended) -> str:
        """The "skills available" section: the skills near the winner (src/skills/recall_skill.py),
        "" when none is or without a skills store."""
        skills, winner = self.sources.skills, attended.winner
        return await skills.section(winner.text, winner.embedding) if skills is not None else ""

    async def corrections(self, attended: Attended, shortfalls: Shortfalls) -> list[PastCorrection]:
        """The reflection bank's corrections near this input (§3.7); none when unavailable."""
        winner = attended.winner
        try:
            return await corrections_for(self.sources.pool, self.sources.providers.embedder, winner.text,
                                         focus_vec=winner.embedding, settings=self.settings.reflection)
        except (ProviderError, *DB_ERRORS) as exc:
            shortfalls.note("reflection corrections", exc)
            return []

    async def cost_line(self, shortfalls: Shortfalls) -> str:
        """The §4.8 cost line; its totals scan all of llm_calls, so it is refreshed at most
        every `cost_line_refresh_s`, not every cycle."""
        now, cache = time.monotonic(), self._cost
        if cache is None or now - cache[0] >= self.settings.cost_line_refresh_s:
            try:
                self._cost = (now, await self.sources.providers.ledger.summary_line())
            except DB_ERRORS as exc:
                shortfalls.note("cost line", exc)
                return cache[1] if cache else "[COST] unavailable this cycle"
        return self._cost[1]

