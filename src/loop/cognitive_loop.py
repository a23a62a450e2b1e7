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
from src.errors import ProviderError
from src.loop.actions import ActionPolicy, checked_tool_actions
from src.loop.aftermath import after_answer, gate_pruned, keep_exchange
from src.loop.attention import Candidate, cognitive_state_report
from src.loop.backlog import Backlog
from src.loop.outage import DB_ERRORS, Outage, describe
from src.loop.parts import LoopParts
from src.loop.prompting import build_prompt
from src.loop.retry import requeue_failed
from src.loop.thinking import think_within_deadline
from src.loop.thought_log import CycleRecord, log_answered_cycle
from src.loop.tool_protocol import ToolProtocol
from src.loop.turns import Turn, take_turn
from src.recall.layers import identity_vectors
from src.tools.docs_verb import docs_verbs

if TYPE_CHECKING:   # the loop reads its sections; config never imports the loop
    from src.config import Settings

log = logging.getLogger(__name__)


Deliver = Callable[[str], Awaitable[None] | None]


class CognitiveLoop:
    """The only consumer of attention. Everything it needs is passed in."""

    def __init__(self, parts: LoopParts, settings: Settings, *, session_id: str, deliver: Deliver,
                 rng: np.random.Generator):
        self.parts = parts
        self.settings = settings
        self.cfg = settings.loop
        self.queue = parts.attention
        self.fifo = AdaptiveFifo(settings.context.budget.conversation_tokens, partial(gate_pruned, self),
                                 settings.fifo)
        self.actions = ActionPolicy(settings.loop.actions)
        self.docs = parts.docs if parts.docs is not None and parts.docs.settings.enabled else None
        self.tools = ToolProtocol(self.cfg.max_tool_calls)   # more verbs: self.tools.register(...)
        for verb in docs_verbs(self.docs):
            self.tools.register(verb)
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
        # candidate id -> its scratch row: the exit gate judges the row against the focus
        # of the cycle that attends to it (ExitGate.note_focus), not the focus at flush time
        self._scratch_ids: dict[int, int] = {}
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
        except DB_ERRORS as exc:
            # The database is away (restarting?): hold the input in memory, offer it to the
            # gate again before the next cycle, and let it compete for attention meanwhile.
            self.outage.down("entry gate", exc)
            self._unbuffered.append(candidate)
        else:
            if admitted is not None and admitted.scratch_id is None and source != "user":
                return None  # a skipped internal impulse does not compete for attention
        if gated or (admitted is not None and admitted.scratch_id is not None):
            self._buffered.add(candidate.id)
        if admitted is not None and admitted.scratch_id is not None:
            self._scratch_ids[candidate.id] = admitted.scratch_id
        evicted = self.queue.push(candidate)
        if evicted is not None:
            log.info("attention queue full: dropped %s candidate %r", evicted.source, evicted.text[:60])
            self._buffered.discard(evicted.id)
            self._scratch_ids.pop(evicted.id, None)
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
                if isinstance(exc, DB_ERRORS):
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

    def user_messages_waiting(self) -> int:
        """User messages not answered yet: queued, held for the entry gate, or in this cycle."""
        in_cycle = self._turn.parts if self._turn is not None else []
        return (self.queue.counts()["user"] + sum(c.source == "user" for c in self._unbuffered)
                + sum(p.source == "user" for p in in_cycle))

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
        scratch_ids = [self._scratch_ids.pop(p.id, None) for p in turn.parts]
        if winner.embedding is not None:
            focus = self.parts.assembler.focus(winner.embedding)
            context_vecs = [focus.vector]
            self.parts.gates.exit.set_attention([winner.embedding, *self._recent[-2:]])
            self.parts.gates.exit.note_focus(scratch_ids)
        else:
            context_vecs = []
        try:
            retrieval = await self.parts.retriever.retrieve(
                winner.text, rng=self.rng, now=now, context_vecs=context_vecs,
                active_ids=self._active_ids, hops=self.cfg.dmn_hops if winner.source == "dmn" else 1,
                query_vec=winner.embedding, exclude_scratch=[i for i in scratch_ids if i is not None])
        except (ProviderError, *DB_ERRORS) as exc:
            self.degraded("memories", exc)
        timings["recall"] = _ms(t)

        t = time.perf_counter()
        prompt = await build_prompt(self, winner, retrieval, report, now)
        timings["assembly"] = _ms(t)

        t = time.perf_counter()
        thought = await think_within_deadline(self, winner, prompt.messages, prompt.system, retrieval)
        timings["think"] = _ms(t)

        answer, confidence = thought.answer, thought.confidence
        kind = "communicate"
        allowed, why = self.actions.allows(kind, winner.source_tag, winner.source_confidence, confidence)
        actions = [{"kind": kind, "allowed": allowed, "reason": why},
                   *checked_tool_actions(self.actions, thought.tool_actions, self.tools.kind, winner.source_tag,
                                         winner.source_confidence, confidence)]
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
                             thought.escalated, thought.path, retrieval, _ms(started), timings)
        try:
            await self._after_delivery(record, turn, prompt.user_text, thought.outcome, allocation,
                                       prompt.assembled, now)
        except (ProviderError, *DB_ERRORS) as exc:
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

    def degraded(self, what: str, exc: BaseException) -> None:
        """Something the cycle needs is unavailable: note it for the reply, warn once."""
        self._missing.append(f"{what} ({describe(exc)})")
        if isinstance(exc, DB_ERRORS):
            self.outage.down(what, exc)
        else:
            log.warning("%s unavailable this cycle: %s", what, exc)

    async def _rebuffer(self) -> None:
        """Inputs that arrived while the database was away go through the entry gate now."""
        while self._unbuffered:
            c = self._unbuffered[0]
            try:
                admitted = await self.parts.gates.admit(c.text, source_tag=c.source_tag,
                                                        source_confidence=c.source_confidence,
                                                        exchange=c.source == "user", metadata=self._meta(c))
            except DB_ERRORS as exc:
                self.outage.down("entry gate", exc)
                return
            if admitted.scratch_id is not None:
                self._buffered.add(c.id)
                self._scratch_ids[c.id] = admitted.scratch_id
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

def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
