"""The attentional loop (plan §3.4): one pipeline for every source of input.

Each cycle:
    1. attention allocation over everything pending (user, DMN, consolidation, gut,
       scheduled) → one winner; losers stay queued with decayed urgency (§3.10)
    2. recall for the winner's text (hybrid search, spreading, ACT-R; DMN reaches
       2 hops), with context inertia from the previous focus (§3.2)
    3. context assembly: immutable + stochastic identity + situational memories,
       reflection bank corrections (§3.7), the cognitive state report, cost line
    4. System 1 answers; one self-correction retry, then System 2 (§3.5, §3.6) —
       or, in reflex mode, a plain reply saying no model is configured plus recall
    5. output pipeline: the action check on source tags, delivery, the memory gate
       for the mind's own output, the adaptive FIFO (pruned messages go through the
       exit gate first), one `thought_log` row

Inputs enter through `submit`, which passes them through the entry gate at once:
what the gate keeps is in scratch_buffer before any processing. Processing never
looks at the source; only the action check does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from src.context.fifo import AdaptiveFifo
from src.context.tokens import count_tokens
from src.errors import ProviderError
from src.loop.actions import ActionPolicy, checked_tool_actions
from src.loop.aftermath import after_answer, keep_exchange
from src.loop.attention import Candidate, cognitive_state_report
from src.loop.backlog import Backlog
from src.loop.degraded import NoContext, missing_line
from src.loop.outage import DB_ERRORS, Outage, describe
from src.loop.parts import LoopParts
from src.loop.prompts import frame_input, reflex_reply, system_prompt
from src.loop.retry import requeue_failed
from src.loop.thought_log import CycleRecord, log_answered_cycle
from src.loop.tool_protocol import ToolProtocol
from src.loop.triggers import turn_triggers
from src.loop.turns import Turn, take_turn
from src.metacognition.calls import FokSource, fok_once
from src.metacognition.escalation import EscalationTriggers, loop_before_escalate
from src.metacognition.reflection import corrections_for, reflection_block
from src.providers.protocols import ChatMessage
from src.recall.layers import identity_vectors
from src.recall.retrieval import Retrieval
from src.tools.docs_verb import read_doc_verb

if TYPE_CHECKING:   # the loop reads its sections; config never imports the loop
    from src.config import Settings

log = logging.getLogger(__name__)

_DB_ERRORS = DB_ERRORS

Deliver = Callable[[str], Awaitable[None] | None]


class CognitiveLoop:
    """The only consumer of attention. Everything it needs is passed in."""

    def __init__(self, parts: LoopParts, settings: Settings, *, session_id: str, deliver: Deliver,
                 rng: np.random.Generator):
        self.parts = parts
        self.settings = settings
        self.cfg = settings.loop
        self.queue = parts.attention
        self.fifo = AdaptiveFifo(settings.context.budget.conversation_tokens, self._on_pruned, settings.fifo)
        self.actions = ActionPolicy(settings.loop.actions)
        self.docs = parts.docs if parts.docs is not None and parts.docs.settings.enabled else None
        self.tools = ToolProtocol(self.cfg.max_tool_calls)   # more verbs: self.tools.register(...)
        self.tools.register(read_doc_verb(self.docs))
        if parts.inner is not None:   # GOAL_ACHIEVED: <goal> (plan §5.2 milestone 9)
            self.tools.register(parts.inner.goal_verb())
        if parts.skills is not None:
            self.tools.register(parts.skills.verb())
        self.goal_vecs = list(parts.goal_vecs)
        self.session_id = session_id
        self.deliver = deliver
        self.rng = rng
        self.wake = asyncio.Event()
        self.cycles = 0
        self._recent: list[np.ndarray] = []
        self._active_ids: list[int] = []
        self._last_system2: datetime | None = None
        self._current: Candidate | None = None
        self._unbuffered: list[Candidate] = []
        self._cost_cache: tuple[float, str] | None = None
        self._failed: dict[int, int] = {}        # candidate id -> failed cycles (bounded by the queue)
        self.outage = Outage()
        self.backlog = Backlog()     # journal marks and thought_log rows waiting for the database
        # journal ids of user messages (candidate id -> id); on_answered marks them once delivered
        self._refs: dict[int, int] = {}
        self.on_answered: Callable[..., Awaitable[None]] | None = None   # (ids, conn=)
        self._turn: Turn | None = None
        self._failing = 0            # consecutive failed cycles (the backoff's exponent)
        self._missing: list[str] = []
        # candidates the entry gate buffered: their text reaches the exit gate through the
        # scratch flush, so the FIFO must not hand it to the exit gate a second time
        self._buffered: set[int] = set()
        # gut, outcomes, readiness (src/loop/inner_life.py); None: the loop runs without them
        self.inner = parts.inner

    # -- input ---------------------------------------------------------------------
    async def submit(self, source: str, text: str, *, now: datetime | None = None,
                     emotional_charge: float = 0.0, urgency: float | None = None,
                     ref: int | None = None, gated: bool = False) -> Candidate | None:
        """Entry gate first (nothing is lost), then the attention queue. None: skipped.

        `ref` is the input journal id of a user message (its scratch row carries it);
        `gated`: a replayed message the entry gate already kept in an earlier run."""
        now = now or datetime.now(UTC)
        candidate = self.queue.stamp(Candidate.of(source, text, enqueued_at=now, urgency=urgency,
                                                  emotional_charge=emotional_charge,
                                                  settings=self.queue.settings))
        admitted = None
        if ref is not None:
            self._refs[candidate.id] = ref
        try:
            if not gated:
                admitted = await self.parts.gates.admit(text, source_tag=candidate.source_tag,
                                                        source_confidence=candidate.source_confidence,
                                                        exchange=source == "user", metadata=self._meta(candidate))
        except _DB_ERRORS as exc:
            # The database is away (restarting?): hold the input in memory, offer it to the
            # gate again before the next cycle, and let it compete for attention meanwhile.
            self.outage.down("entry gate", exc)
            self._unbuffered.append(candidate)
        else:
            if admitted is not None and admitted.scratch_id is None and source != "user":
                return None  # a skipped internal impulse does not compete for attention
        if gated or (admitted is not None and admitted.scratch_id is not None):
            self._buffered.add(candidate.id)
        evicted = self.queue.push(candidate)
        if evicted is not None:
            log.info("attention queue full: dropped %s candidate %r", evicted.source, evicted.text[:60])
            self._buffered.discard(evicted.id)
        self.wake.set()
        return candidate

    # -- running -------------------------------------------------------------------
    async def run(self, *, max_cycles: int | None = None, burst: bool = False,
                  stop: asyncio.Event | None = None, drain: asyncio.Event | None = None) -> int:
        """Cycle until `stop`, `max_cycles`, or (burst, or once `drain` is set) an empty
        queue; return cycles run."""
        ran = 0
        while not (stop and stop.is_set()) and (max_cycles is None or ran < max_cycles):
            if not len(self.queue) and not self._unbuffered:
                if burst or (drain is not None and drain.is_set()):
                    break
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), self.cfg.idle_wait_s)
                except TimeoutError:
                    pass
                continue
            if not len(self.queue):      # only held input: wait for the database, then gate it
                await self._rebuffer()
                if self._unbuffered and not len(self.queue):
                    await self._pause(self.cfg.retry_backoff_max_s, stop)
                continue
            try:
                await self.cycle()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one bad cycle must not end the mind
                if isinstance(exc, _DB_ERRORS):
                    self.outage.down("cognitive cycle", exc)   # expected: no traceback
                else:
                    log.exception("cognitive cycle failed; the loop goes on")
                self._failing += 1
                # back off before the input is retried (also when the cycle failed before it
                # took an input: a failing database must not make the loop spin)
                if await requeue_failed(self, exc):
                    await self._pause(min(self.cfg.retry_backoff_max_s,
                                          self.cfg.retry_backoff_s * 2 ** (self._failing - 1)), stop)
            else:
                self._failing = 0
            ran += 1
        return ran

    async def _pause(self, seconds: float, stop: asyncio.Event | None) -> None:
        if stop is None:
            await asyncio.sleep(seconds)
            return
        try:
            await asyncio.wait_for(stop.wait(), seconds)
        except TimeoutError:
            pass

    async def cycle(self, now: datetime | None = None) -> CycleRecord | None:
        started = time.perf_counter()
        now = now or datetime.now(UTC)
        timings: dict[str, float] = {}
        self._missing = []
        await self._rebuffer()
        if self.parts.layers is not None:   # values/goals files edited while running take effect now
            self.parts.retriever.layer_vecs, self.goal_vecs = await identity_vectors(self.parts.layers)
            if self.inner is not None:
                await self.inner.refresh_layers(self.parts.layers)
        await self._embed_pending()
        if self.inner is not None:
            self.inner.charge_candidates(self.queue)
        allocation = self.queue.allocate(self._recent or None, self.goal_vecs or None)
        if allocation is None or allocation.winner is None:
            return None
        self.cycles += 1
        turn = self._turn = take_turn(allocation.winner, self.queue, self.cfg.combine_max)
        winner = self._current = turn.candidate
        report = f"{cognitive_state_report(allocation, self.queue.settings)}\n{self.parts.gates.mode.report_line()}"
        if self.inner is not None:
            self.inner.feel(winner.embedding, self._recent, cycle=self.cycles, now=now)

        t = time.perf_counter()
        retrieval = None
        if winner.embedding is not None:
            focus = self.parts.assembler.focus(winner.embedding)
            context_vecs = [focus.vector]
            self.parts.gates.exit.set_attention([winner.embedding, *self._recent[-2:]])
        else:
            context_vecs = []
        try:
            retrieval = await self.parts.retriever.retrieve(
                winner.text, rng=self.rng, now=now, context_vecs=context_vecs,
                active_ids=self._active_ids, hops=self.cfg.dmn_hops if winner.source == "dmn" else 1,
                query_vec=winner.embedding)
        except (ProviderError, *_DB_ERRORS) as exc:
            self._degraded("memories", exc)
        timings["recall"] = _ms(t)

        t = time.perf_counter()
        assembled = await self._assemble(retrieval, now)
        block, cost = await self._reflection(winner), await self._cost_line()
        memories = "\n\n".join(x for x in (assembled.text, missing_line(self._missing)) if x)
        skills = await self.parts.skills.section() if self.parts.skills is not None else ""
        system = system_prompt(self.settings.agent.name, memories, report, block, cost,
                               gut=self.inner.gut_summary() if self.inner is not None else "", skills=skills)
        user_text = frame_input(winner.source, winner.text)
        history = [ChatMessage("user" if m.role == "user" else "assistant", m.content)
                   # the skills section lives inside the context budget: the conversation gives way
                   for m in self.fifo.window(assembled.conversation_budget - count_tokens(skills))]
        messages = [*history, ChatMessage("user", user_text)]
        timings["assembly"] = _ms(t)

        t = time.perf_counter()
        try:   # one deadline for all model work of the cycle, retries included
            async with asyncio.timeout(self.cfg.cycle_deadline_s):
                answer, confidence, escalated, path, outcome, tool_actions = await self._think(
                    winner, messages, system, retrieval)
        except TimeoutError:
            log.warning("model work exceeded the cycle deadline of %g s", self.cfg.cycle_deadline_s)
            because = f"the language model did not answer within {self.cfg.cycle_deadline_s:g} s"
            answer, confidence, escalated, path, outcome, tool_actions = (
                self._reflex_reply(retrieval, because=because), None, False, "deadline", None, [])
        timings["think"] = _ms(t)

        kind = "communicate"
        allowed, why = self.actions.allows(kind, winner.source_tag, winner.source_confidence, confidence)
        actions = [{"kind": kind, "allowed": allowed, "reason": why},
                   *checked_tool_actions(self.actions, tool_actions, winner.source_tag, winner.source_confidence,
                                         confidence)]
        if answer and allowed:
            result = self.deliver(turn.frame_reply(answer))
            if asyncio.iscoroutine(result):
                await result
        # Delivered: from here on a failure must not re-run the cycle (the user would get
        # the same reply twice and the window would hold it twice).
        self._current = self._turn = None
        for part in turn.parts:
            self._failed.pop(part.id, None)
        record = CycleRecord(self.cycles, winner, answer, bool(answer and allowed), actions, confidence,
                             escalated, path, retrieval, _ms(started), timings)
        try:
            await self._after_delivery(record, turn, user_text, outcome, allocation, assembled, now)
        except (ProviderError, *_DB_ERRORS) as exc:
            self.outage.down("after delivery (gating the answer, FIFO, thought_log)", exc)
        else:
            self.outage.up("cognitive cycle")
        return record

    async def _after_delivery(self, record: CycleRecord, turn: Turn, user_text: str, outcome,
                              allocation, assembled, now: datetime) -> None:
        """Mark the journal, gate the answer, keep the window, log the cycle."""
        refs = [self._refs.pop(p.id) for p in turn.parts if p.id in self._refs]
        mark = partial(self.on_answered, refs) if refs and self.on_answered is not None else None
        try:
            await after_answer(self, record.winner, record.delivered, by_model=outcome is not None)
            await keep_exchange(self, record, turn, user_text, outcome, allocation, now)
            if self.inner is not None:
                await self.inner.after_cycle(
                    cycle=record.cycle, winner=record.winner, answer=record.output, path=record.path,
                    actions=record.actions, correction_id=getattr(outcome, "correction_id", None),
                    retrieval=record.retrieval, now=now)
        finally:   # the row is written even when gating or pruning failed; with the journal's
            # "answered" in one transaction, so a crash leaves both or neither
            self.backlog.add(f"thought_log cycle {record.cycle}",
                             partial(log_answered_cycle, self.parts.pool, mark, self.session_id, record, allocation,
                                     assembled, since=now, also=self.inner.cycle_writes(record) if self.inner else ()))
            await self.backlog.flush()

    async def _assemble(self, retrieval: Retrieval | None, now: datetime):
        """Context assembly; when it fails the cycle goes on without memories (said so)."""
        try:
            assembled = await self.parts.assembler.assemble(
                retrieval, rng=self.rng, now=now, session=self.parts.manifest,
                refresh_identity=self.fifo.needs_identity_reinjection)
        except _DB_ERRORS as exc:
            self._degraded("context assembly", exc)
            return NoContext(self.settings.context.budget, missing_line(self._missing))
        if self.fifo.needs_identity_reinjection:
            self.fifo.identity_reinjected()
        self._active_ids = assembled.ids_by_track.get("situational", [])
        return assembled

    async def _reflection(self, winner: Candidate) -> str:
        reflection = self.settings.escalation.reflection
        try:
            corrections = await corrections_for(self.parts.pool, self.parts.providers.embedder, winner.text,
                                                focus_vec=winner.embedding, settings=reflection)
        except (ProviderError, *_DB_ERRORS) as exc:
            self._degraded("reflection corrections", exc)
            return ""
        return reflection_block(corrections, field_chars=reflection.block_field_chars) if corrections else ""

    def _degraded(self, what: str, exc: BaseException) -> None:
        """Something the cycle needs is unavailable: note it for the reply, warn once."""
        self._missing.append(f"{what} ({describe(exc)})")
        if isinstance(exc, _DB_ERRORS):
            self.outage.down(what, exc)
        else:
            log.warning("%s unavailable this cycle: %s", what, exc)

    async def _cost_line(self) -> str:
        """The §4.8 cost line; its totals scan all of llm_calls, so it is refreshed at most
        every `cost_line_refresh_s`, not every cycle."""
        now = time.monotonic()
        if self._cost_cache is None or now - self._cost_cache[0] >= self.cfg.cost_line_refresh_s:
            try:
                self._cost_cache = (now, await self.parts.providers.ledger.summary_line())
            except _DB_ERRORS as exc:
                self._degraded("cost line", exc)
                return self._cost_cache[1] if self._cost_cache else "[COST] unavailable this cycle"
        return self._cost_cache[1]

    async def _rebuffer(self) -> None:
        """Inputs that arrived while the database was away go through the entry gate now."""
        while self._unbuffered:
            c = self._unbuffered[0]
            try:
                admitted = await self.parts.gates.admit(c.text, source_tag=c.source_tag,
                                                        source_confidence=c.source_confidence,
                                                        exchange=c.source == "user", metadata=self._meta(c))
            except _DB_ERRORS as exc:
                self.outage.down("entry gate", exc)
                return
            if admitted.scratch_id is not None:
                self._buffered.add(c.id)
            self._unbuffered.pop(0)

    def _meta(self, candidate: Candidate) -> dict | None:
        ref = self._refs.get(candidate.id)
        return None if ref is None else {"journal_id": ref}

    # -- steps -----------------------------------------------------------------------
    async def _embed_pending(self) -> None:
        pending = [c for c in self.queue.pending() if c.embedding is None]
        if not pending:
            return
        try:
            vecs = await self.parts.providers.embedder.embed([c.text for c in pending], "RETRIEVAL_QUERY")
        except ProviderError as exc:
            log.warning("could not embed %d attention candidates (salience without novelty): %s",
                        len(pending), exc)
            return
        self.queue.attach_embeddings({c.id: v for c, v in zip(pending, vecs, strict=True)})

    async def _think(self, winner: Candidate, messages: list[ChatMessage], system: str,
                     retrieval: Retrieval | None):
        """(answer, confidence, escalated, path, outcome, tool actions). Tool calls run in
        src/loop/tool_protocol.py; a protocol line is never the answer."""
        system1 = self.parts.providers.system1
        if not system1.configured:
            return self._reflex_reply(retrieval), None, False, "reflex", None, []
        reading = await self.parts.threshold.current()

        fok = fok_once(self.parts.providers.meta or system1, winner.text, settings=self.settings.metacognition)

        triggers = turn_triggers(self, winner, retrieval)   # §3.6, once per turn

        async def answer(msgs: list[ChatMessage], prompt: str):   # tool rounds share the FOK call
            return await self._escalating_answer(winner, msgs, prompt, reading.threshold, fok, triggers)

        try:
            rounds = await self.tools.rounds(answer, lambda o: o.answer, messages, system=system,
                                             focus=winner.text)
        except ProviderError as exc:
            # rate limit, outage, open breaker, malformed output: say so, keep the loop going
            log.warning("System 1 failed this cycle: %s", exc)
            return (self._reflex_reply(retrieval, because=f"the language model failed: {exc}"),
                    None, False, "system1_failed", None, [])
        tool_actions = [r.action() for r in rounds.results]
        outcome = rounds.answer
        if outcome is None:
            return (self._reflex_reply(retrieval, because="the language model answered with a tool call "
                                       "instead of words, even when asked to answer without tools"),
                    None, False, "tool_protocol_failed", None, tool_actions)
        if outcome.escalated:
            self._last_system2 = datetime.now(UTC)
        return (outcome.answer, outcome.confidence.composite, outcome.escalated, outcome.path, outcome,
                tool_actions)

    async def _escalating_answer(self, winner: Candidate, messages: list[ChatMessage], system: str,
                                 threshold: float, fok: FokSource, triggers: EscalationTriggers):
        return await loop_before_escalate(
            self.parts.providers.system1, self.parts.providers.system2, messages, focus=winner.text, threshold=threshold,
            meta=self.parts.providers.meta, system=system, triggers=triggers,
            store=self.parts.store, source_tag=winner.source_tag, settings=self.settings.escalation,
            metacognition=self.settings.metacognition, keep_corrections=not self.parts.gates.mode.off,
            fok_source=fok)

    def _reflex_reply(self, retrieval: Retrieval | None, because: str | None = None) -> str:
        # the immutable boundaries are in every context anyway: they are not "brought back"
        learned = [r for r in retrieval.memories if not r.hit.immutable] if retrieval else []
        recalled = learned[: self.cfg.reflex_recall_lines]
        return reflex_reply([r.hit.compressed or r.hit.content for r in recalled],
                            said=getattr(self.parts.providers.system1, "reason", None), because=because,
                            missing=missing_line(self._missing))

    async def _on_pruned(self, messages) -> None:
        """Pruned messages get the exit gate before they leave the window (§3.3)."""
        by_tag: dict[str, list] = {}
        for m in messages:
            if not m.metadata.get("gated"):  # a retry after a partial failure skips what passed
                by_tag.setdefault(m.source_tag, []).append(m)
        for tag, group in by_tag.items():
            await self.parts.gates.prune([m.content for m in group], source_tag=tag)
            for m in group:
                m.metadata["gated"] = True


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
