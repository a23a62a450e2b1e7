"""The attentional loop (plan §3.4): one pipeline for every source of input.

`cycle()` reads as the plan's steps, one part each:

    take input      held inputs through the entry gate, candidates embedded  intake.py
    attend          one winner among everything pending (§3.10), the turn     attending.py
    recall          for the winner's text, with context inertia (§3.2)         recalling.py
    compose         the prompt: identity, memories, corrections, state report  composing.py
    think           System 1 with tools, self-correction, System 2 (§3.5-§3.6) thinking.py
    act             the action check on source tags                            acting.py
    log             the thought_log row with the journal's answered mark,      cycle_log.py
                    committed before the reply is printed (issue 26; a turn
                    of no journaled message: after the aftermath, as before)
    deliver         the reply printed, once; the turn settled                  acting.py
    gate and store  the answer through the entry gate; the window kept and     aftermath.py
                    pruned (§3.3: the exit gate's last look); inner life

Inputs enter through `submit`, which passes them through the entry gate at once:
what the gate keeps is in scratch_buffer before any processing. The store itself is
the scratch flush (exit gate, then memories), decided at the end of each cycle and run
in the background every `flush_every` user messages — counted as they arrive, so in a
burst of input it starts after the first answer (`ScratchLifecycle.flush_if_due`) —
and at shutdown. Every background task a turn starts (its deferred writes, the
prompt's early reads) is held by the turn's `TurnTasks` and collected before `cycle()`
returns. Processing never
looks at the source; only the action check does. State that one cycle leaves for the
next is in `Conversation` (conversation.py); an input's life until it is answered in
`Intake`. A cycle that fails before delivery is retried (retry.py) — while the
database is away it waits for it instead, spending no retry (outage.py
`DatabaseWait`); after delivery a failure is an outage, logged once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import partial

import numpy as np

from src.context.fifo import AdaptiveFifo
from src.db.deferred import Deferred
from src.errors import ProviderError
from src.loop.acting import Acting
from src.loop.action_policy import ActionPolicy
from src.loop.aftermath import Aftermath, gate_pruned
from src.loop.attending import Attended, Attending
from src.loop.attention_queue import AttentionQueue, Candidate
from src.loop.composing import Composing, PromptReads, PromptSettings, PromptSources
from src.loop.conversation import Conversation
from src.loop.cycle_log import CycleLog, MarkAnswered
from src.loop.degraded import Shortfalls
from src.loop.forgetting import Forgetting
from src.loop.inner_life import Submit
from src.loop.input_journal import InputJournal
from src.loop.intake import TYPED, Intake, Origin
from src.loop.outage import DB_ERRORS, DatabaseWait, Outage, waiting_note
from src.loop.parts import LoopParts, LoopSections
from src.loop.recalling import Recalling
from src.loop.replies import ReplyBoard
from src.loop.retry import requeue_failed
from src.loop.settings import Source
from src.loop.thinking import NO_MODEL_DEADLINE_S, Thinking
from src.loop.thought_log import CycleClock, CycleRecord
from src.loop.tool_protocol import ToolProtocol
from src.loop.turn_tasks import TurnTasks
from src.recall.retrieval import Retrieval
from src.tools.docs_verb import docs_verbs

log = logging.getLogger(__name__)


Deliver = Callable[[str], Awaitable[None] | None]


class CognitiveLoop:
    """The only consumer of attention. Everything it needs is passed in."""

    def __init__(self, parts: LoopParts, settings: LoopSections, *, session_id: str, deliver: Deliver,
                 rng: np.random.Generator, journal: InputJournal | None = None):
        """`journal`: the durable input (src/loop/input_journal.py): the loop shares its view of
        the database (its `outage`) and marks a journaled turn answered through it."""
        self.parts = parts
        self.cfg = settings.loop
        self.deliver = deliver
        self.inner = parts.inner      # gut, outcomes, readiness (inner_life.py); None: without them
        self.wake = asyncio.Event()
        self.outage = journal.outage if journal is not None else Outage()
        self.actions = ActionPolicy(settings.loop.actions)
        # the inner life's impulses enter like everything else, within the background budget
        self.submit_inner = parts.impulse_gate(self.submit) if parts.impulse_gate is not None else self.submit
        self.tools = _tool_protocol(parts, settings.loop.max_tool_calls, self.submit_inner)
        self.conversation = Conversation(
            AdaptiveFifo(settings.context.budget.conversation_tokens, partial(gate_pruned, parts.gates),
                         settings.context.fifo), recent_limit=settings.loop.recent_context)
        self.intake = Intake(parts.attention, parts.gates, parts.providers.embedder, self.outage)
        self.attending = Attending(self.intake, self.conversation, parts.gates, layers=parts.layers,
                                   inner=parts.inner, goal_vecs=parts.goal_vecs, combine_max=settings.loop.combine_max)
        self.recalling = Recalling(parts.retriever, parts.assembler, self.conversation, rng=rng,
                                   dmn_hops=settings.loop.dmn_hops, emotional=parts.inner.emotional if parts.inner else None)
        self.composing = Composing(
            parts.assembler, self.conversation,
            PromptSources(parts.pool, parts.providers, skills=parts.skills, inner=parts.inner, manifest=parts.manifest),
            settings=PromptSettings(settings.agent.name, settings.context.budget,
                                    settings.metacognition.escalation.reflection, settings.loop.cost_line_refresh_s),
            rng=rng)
        self.thinking = Thinking(parts.providers, settings, threshold=parts.threshold, store=parts.store,
                                 mode=parts.gates.mode, tools=self.tools, policy=self.actions,
                                 user_waiting=self.intake.user_messages_waiting)
        # every delivered reply by the journal ids it answers: another channel waits on it (src/api)
        self.replies = ReplyBoard()
        self.acting = Acting(self.actions, self.tools, self.intake, self._say, conversation=self.conversation,
                             unprompted=settings.loop.unprompted, replies=self.replies,
                             newest_line=(lambda: journal.newest) if journal is not None else None)
        self.aftermath = Aftermath(parts.gates, self.conversation, settings.context.fifo, say=self._say,
                                   skills=parts.skills, inner=parts.inner, submit_inner=self.submit_inner)
        self.cycle_log = CycleLog(parts.pool, session_id, inner=parts.inner,
                                  on_answered=journal.answered if journal is not None else None)
        self.db_wait = DatabaseWait(parts.pool, self.outage, first_s=settings.loop.retry_backoff_s)
        # the guardian's forgets: what this process holds of forgotten words goes at once
        # held for each cycle: a forget at the prompt waits for the turn in flight to end, so no
        # row of that turn is written after the forget has scrubbed its words (src/erasure/question.py)
        self.turn_lock = asyncio.Lock()
        self.forgetting = Forgetting(parts.pool, self.conversation, parts.assembler, parts.gates.exit.confirmations,
                                     self.intake.queue)
        self._failing = 0            # consecutive failed cycles (the backoff's exponent)

    # -- what the rest of the mind reads ---------------------------------------------
    @property
    def queue(self) -> AttentionQueue:
        return self.intake.queue

    @property
    def fifo(self) -> AdaptiveFifo:
        """The conversation window (/status, skills, tests)."""
        return self.conversation.window

    @property
    def backlog(self) -> CycleLog:
        """Cycle rows waiting for the database (`Mind.close` flushes them)."""
        return self.cycle_log

    @property
    def cycles(self) -> int:
        return self.attending.cycles

    @property
    def goal_vecs(self) -> list[np.ndarray]:
        return self.attending.goal_vecs

    @property
    def on_answered(self) -> MarkAnswered | None:
        return self.cycle_log.on_answered

    @on_answered.setter
    def on_answered(self, mark: MarkAnswered | None) -> None:
        """For a test that opens its journal after the mind; the service passes `journal`."""
        self.cycle_log.on_answered = mark

    def user_messages_waiting(self) -> int:
        """User messages not answered yet: queued, held for the entry gate, or in this cycle."""
        return self.intake.user_messages_waiting()

    # -- input -----------------------------------------------------------------------
    async def submit(self, source: Source, text: str, *, now: datetime | None = None,
                     emotional_charge: float = 0.0, urgency: float | None = None,
                     origin: Origin = TYPED, unkept: bool = False) -> Candidate | None:
        """Entry gate first (nothing is lost), then the attention queue. None: skipped.

        `origin`: a user message's journal row, replay state and channel (Intake.submit);
        `unkept`: said while the memory mode was off (Intake.submit)."""
        candidate = await self.intake.submit(source, text, now=now, emotional_charge=emotional_charge,
                                             urgency=urgency, origin=origin, unkept=unkept)
        if candidate is not None:
            if source == "user":   # the user comes first: a thought of the mind's own gives way (issue 27)
                self.thinking.yield_to_user()
            self.wake.set()
        return candidate

    # -- running ---------------------------------------------------------------------
    async def run(self, *, max_cycles: int | None = None, burst: bool = False,
                  stop: asyncio.Event | None = None, drain: asyncio.Event | None = None) -> int:
        """Cycle until `stop`, `max_cycles`, or (burst, or once `drain` is set) an empty
        queue; return cycles run."""
        ran = 0
        while not (stop and stop.is_set()) and (max_cycles is None or ran < max_cycles):
            if not len(self.queue) and not self.intake.held:
                if burst or (drain is not None and drain.is_set()):
                    break
                await self._idle()
                continue
            if not len(self.queue):      # only held input: wait for the database, then gate it
                await self.intake.rebuffer()
                if self.intake.held and not len(self.queue):
                    await self._pause(self.cfg.retry_backoff_max_s, stop)
                continue
            try:
                async with self.turn_lock:
                    await self.cycle()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one bad cycle must not end the mind
                await self._failed(exc, stop)
            else:
                self._failing = 0
            ran += 1
        return ran

    async def cycle(self, now: datetime | None = None) -> CycleRecord | None:
        """One cycle of plan §3.4, a part per step; None when nothing is pending. `shortfalls`
        collects what this cycle has to do without (said in the prompt and the reply); `tasks`
        holds every background task of the turn, collected before the cycle returns."""
        clock, shortfalls = CycleClock(now), Shortfalls(self.outage)
        await self.forgetting.check()                              # a forget by another process
        await self.intake.take()                                   # held input gated, candidates embedded
        attended = await self.attending.attend(clock.now)
        if attended is None:
            return None
        if self.inner is not None:          # the cycle's gut reading (plan §5.1)
            self.inner.feel(attended.winner.embedding, attended.recent, cycle=attended.cycle, now=clock.now)
        tasks = TurnTasks()
        if attended.inputs.kept and attended.focus is not None:
            # the turn's scratch rows keep the focus they were said under: the exit gate judges them by it
            tasks.queue(Deferred("scratch focus", partial(self.parts.gates.note_focus, attended.inputs.kept,
                                                          attended.focus), lane="scratch"))
        try:
            retrieval, reads = await clock.timed("recall", self._recall(attended, clock.now, shortfalls, tasks))
            if retrieval is not None:
                tasks.queue(*retrieval.writes)          # recall's bookkeeping (plan §3.8)
            tasks.start_after(reads.identity)           # once the weights this turn draws on are read
            return await self._answer(attended, retrieval, reads, clock, shortfalls, tasks)
        except BaseException:
            tasks.cancel_spawned()                      # reads this turn will not use
            raise
        finally:   # the turn's writes are done before the next cycle, whatever happened here
            await self._settle(tasks)
            # the store step: the scratch flush every `flush_every` exchanges (src/gates/scratch.py)
            self.parts.gates.lifecycle.flush_if_due()

    async def _recall(self, attended: Attended, now: datetime, shortfalls: Shortfalls,
                      tasks: TurnTasks) -> tuple[Retrieval | None, PromptReads]:
        """Recall, with the prompt's reads started as its search returns: their round trips
        pass while recall scores."""
        found = await self.recalling.search(attended, shortfalls, now)
        reads = self.composing.start_reads(attended, shortfalls, tasks)
        await asyncio.sleep(0)   # the reads send their queries before the scoring holds the loop
        return await self.recalling.rank(found, shortfalls), reads

    async def _answer(self, attended: Attended, retrieval: Retrieval | None, reads: PromptReads, clock: CycleClock,
                      shortfalls: Shortfalls, tasks: TurnTasks) -> CycleRecord:
        """Steps 4-8: assemble, think, act, log, then the aftermath."""
        prompt = await clock.timed("assembly", self.composing.build(attended, retrieval, clock.now, shortfalls, reads))
        tasks.queue(*prompt.writes)                                 # the context's co-access
        thought = await clock.timed("think", self.thinking.think(attended, prompt, retrieval, shortfalls, clock.now))
        tasks.queue(*thought.writes)                                # the escalation decisions' rows
        action = self.acting.check(attended, thought)
        record = CycleRecord.of(attended, thought, action, retrieval, clock)
        question = self.aftermath.question(attended, action)       # copilot: asked after the reply
        early = self.cycle_log.journaled(attended)
        if early:   # logged before the reply is printed (cycle_log.py): a failure prints nothing
            try:
                await self.cycle_log.write(record, attended, prompt, clock.now)
            except BaseException:
                self.aftermath.unask(question)
                raise
        await self.acting.deliver(attended, action)                # printed once: the turn is settled
        with self._after_delivery():
            try:
                await self.aftermath.answered(thought, action, question)   # skills credited, copilot question
                await self.aftermath.gate_and_store(attended, prompt, thought, record, clock.now, tasks)
                # gut, outcomes, readiness: the turn's writes are settled first where it reads weights
                await self.aftermath.inner_life(record, thought, clock.now, tasks, own_scratch=attended.inputs.kept)
            finally:   # a turn nothing replays: logged last, even when gating or pruning failed
                if not early:
                    await self.cycle_log.write(record, attended, prompt, clock.now)
        return record

    async def _settle(self, tasks: TurnTasks) -> None:
        """Wait for the turn's tasks (src/loop/turn_tasks.py). A failed write costs that
        bookkeeping (one transaction: all of it or nothing), never the turn; logged, with a
        traceback only when it is not the database's (an outage is said by the cycle itself)."""
        await tasks.settle()
        for label, exc in tasks.failures():
            log.warning("%s not written, the cycle goes on: %s: %s", label, type(exc).__name__, exc,
                        exc_info=None if isinstance(exc, DB_ERRORS) else exc)

    @contextmanager
    def _after_delivery(self) -> Iterator[None]:
        """The reply is out: a database or provider failure from here on is an outage, logged
        once, never a reason to run the cycle again (the row waits in the backlog)."""
        try:
            yield
        except (ProviderError, *DB_ERRORS) as exc:
            self.outage.down("after delivery (gating the answer, FIFO, thought_log)", exc)
        else:
            self.outage.up("cognitive cycle")

    async def _failed(self, exc: Exception, stop: asyncio.Event | None) -> None:
        """A cycle failed before delivery: its input back to attention (or given up), then a
        pause — also when it failed before taking an input: a failing database must not
        make the loop spin."""
        if isinstance(exc, DB_ERRORS):
            self.outage.down("cognitive cycle", exc)   # expected: no traceback
            if await self.db_wait.away():
                await self._wait_for_database(stop)
                return
        else:
            log.error("cognitive cycle failed; the loop goes on", exc_info=exc)
        self._failing += 1
        if not await requeue_failed(self.intake, exc, cycle_retries=self.cfg.cycle_retries, say=self._say):
            await self._pause(min(self.cfg.retry_backoff_max_s,
                                  self.cfg.retry_backoff_s * 2 ** (self._failing - 1)), stop)

    async def _wait_for_database(self, stop: asyncio.Event | None) -> None:
        """The database is away: the turn goes back to attention without spending a retry
        and the loop waits for the database (issue 26); the user hears once when that takes
        longer than `cycle_deadline_s`, at most 20 s (the deadline a slow model needs would keep
        the user waiting minutes for this news). Stops waiting when `stop` is set."""
        turn = self.intake.release()
        if turn is not None:
            self.intake.put_back(turn)

        async def notice() -> None:
            if waiting := self.intake.user_messages_waiting():
                await self._say(waiting_note(waiting))

        await self.db_wait.until_back(partial(self._pause, stop=stop), lambda: bool(stop and stop.is_set()),
                                      notice_after_s=min(self.cfg.cycle_deadline_s or NO_MODEL_DEADLINE_S,
                                                         NO_MODEL_DEADLINE_S),
                                      notice=notice)

    async def _say(self, text: str) -> None:
        """One line to the user through `deliver` (sync or async, looked up at each call)."""
        result = self.deliver(text)
        if asyncio.iscoroutine(result):
            await result

    async def _idle(self) -> None:
        """Nothing pending: wait for input (or the idle interval)."""
        self.wake.clear()
        try:
            await asyncio.wait_for(self.wake.wait(), self.cfg.idle_wait_s)
        except TimeoutError:
            pass

    async def _pause(self, seconds: float, stop: asyncio.Event | None) -> None:
        if stop is None:
            await asyncio.sleep(seconds)
            return
        try:
            await asyncio.wait_for(stop.wait(), seconds)
        except TimeoutError:
            pass


def _tool_protocol(parts: LoopParts, max_calls: int, submit_inner: Submit) -> ToolProtocol:
    """The verbs this mind offers: its docs (when enabled), GOAL_ACHIEVED (plan §5.2
    milestone 9), RECALL_SKILL. More verbs: `loop.tools.register(...)`."""
    tools = ToolProtocol(max_calls)
    docs = parts.docs if parts.docs is not None and parts.docs.settings.enabled else None
    for verb in docs_verbs(docs):
        tools.register(verb)
    if parts.inner is not None:
        tools.register(parts.inner.goal_verb(submit_inner))
    if parts.skills is not None:
        tools.register(parts.skills.verb())
    return tools
