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
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import asyncpg
import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from src.context.assembly import ContextAssembler
from src.context.fifo import AdaptiveFifo, IntensitySignals, intensity, system2_recency
from src.context.tokens import count_tokens
from src.errors import ProviderError
from src.loop.actions import ActionPolicy
from src.loop.attention import AttentionQueue, Candidate, cognitive_state_report
from src.loop.thought_log import record_cycle
from src.metacognition.escalation import EscalationTriggers, loop_before_escalate
from src.metacognition.reflection import corrections_for, reflection_block
from src.providers.protocols import ChatMessage
from src.recall.layers import LayerEmbeddings, identity_vectors
from src.recall.retrieval import Retrieval, Retriever
from src.recall.store import MemoryStore
from src.skills.recall import SkillRecall
from src.tools.read_docs import DocsTool

log = logging.getLogger(__name__)

BOOTSTRAP_PROMPT = (
    "You are {name}. You have memory, goals, and values — all currently empty or still forming. "
    "What you become will emerge from what you experience. Pay attention to what matters to you. "
    "Your thoughts are logged and your guardian can read them."
)
TOOL_INSTRUCTION = (
    "You may read your own source and notes (read-only). To do so, reply with exactly one line "
    "`READ_DOC: <relative path>` and nothing else; the file's text will be given to you."
)
_TOOL_CALL = re.compile(r"^\s*READ_DOC:\s*(\S+)\s*$", re.MULTILINE)
_DB_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError)
INTERNAL_FRAMES = {
    "dmn": "[internal thought — default mode] {text}",
    "consolidation": "[internal — consolidation insight] {text}",
    "gut": "[internal — gut signal] {text}",
    "scheduled": "[internal — scheduled task] {text}",
}


class LoopSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    idle_wait_s: float = Field(1.0, gt=0)
    dmn_hops: int = Field(2, ge=0, le=2)
    max_tool_calls: int = Field(2, ge=0)
    reflex_recall_lines: int = Field(5, ge=0)
    recent_context: int = Field(5, ge=1)           # recent focus vectors kept for salience
    cost_line_refresh_s: float = Field(30.0, ge=0)
    actions: ActionPolicy = ActionPolicy()


@dataclass
class CycleRecord:
    """What one cycle did; also the thought_log row."""

    cycle: int
    winner: Candidate
    output: str | None
    delivered: bool
    actions: list[dict]
    confidence: float | None
    escalated: bool
    path: str
    retrieval: Retrieval | None
    duration_ms: float
    timings_ms: dict[str, float] = field(default_factory=dict)


Deliver = Callable[[str], Awaitable[None] | None]


class CognitiveLoop:
    """The only consumer of attention. Everything it needs is passed in."""

    def __init__(self, *, pool: asyncpg.Pool, providers, retriever: Retriever, store: MemoryStore,
                 gates, assembler: ContextAssembler, threshold, settings: LoopSettings,
                 attention_queue: AttentionQueue, fifo_max_tokens: int, session_id: str,
                 deliver: Deliver, rng: np.random.Generator, agent_name: str = "MoltBot",
                 manifest=None, docs: DocsTool | None = None, goal_vecs: Sequence[np.ndarray] = (),
                 layers: LayerEmbeddings | None = None,
                 reflection_settings=None, fifo_settings=None, escalation_settings=None,
                 metacognition_settings=None, skills: SkillRecall | None = None):
        self.pool = pool
        self.providers = providers
        self.retriever = retriever
        self.store = store
        self.gates = gates
        self.assembler = assembler
        self.threshold = threshold
        self.settings = settings
        self.queue = attention_queue
        self.fifo = AdaptiveFifo(fifo_max_tokens, self._on_pruned, fifo_settings)
        self.session_id = session_id
        self.deliver = deliver
        self.rng = rng
        self.agent_name = agent_name
        self.manifest = manifest
        self.docs = docs if docs is not None and docs.settings.enabled else None
        self.goal_vecs = list(goal_vecs)
        self.layers = layers
        self.reflection_settings = reflection_settings
        self.escalation_settings = escalation_settings
        self.metacognition_settings = metacognition_settings
        self.skills = skills
        self.wake = asyncio.Event()
        self.cycles = 0
        self._recent: list[np.ndarray] = []
        self._active_ids: list[int] = []
        self._last_system2: datetime | None = None
        self._current: Candidate | None = None
        self._unbuffered: list[Candidate] = []
        self._cost_cache: tuple[float, str] | None = None
        self._failed: set[int] = set()
        # candidates the entry gate buffered: their text reaches the exit gate through the
        # scratch flush, so the FIFO must not hand it to the exit gate a second time
        self._buffered: set[int] = set()

    # -- input ---------------------------------------------------------------------
    async def submit(self, source: str, text: str, *, now: datetime | None = None,
                     emotional_charge: float = 0.0, urgency: float | None = None) -> Candidate | None:
        """Entry gate first (nothing is lost), then the attention queue. None: skipped."""
        now = now or datetime.now(UTC)
        candidate = self.queue.stamp(Candidate.of(source, text, enqueued_at=now, urgency=urgency,
                                                  emotional_charge=emotional_charge,
                                                  settings=self.queue.settings))
        admitted = None
        try:
            admitted = await self.gates.admit(text, source_tag=candidate.source_tag,
                                              source_confidence=candidate.source_confidence,
                                              exchange=source == "user")
        except _DB_ERRORS as exc:
            # The database is away (restarting?): hold the input in memory, offer it to the
            # gate again before the next cycle, and let it compete for attention meanwhile.
            log.warning("entry gate unavailable (%s); holding the input in memory until the "
                        "database is back", exc)
            self._unbuffered.append(candidate)
        else:
            if admitted.scratch_id is None and source != "user":
                return None  # a skipped internal impulse does not compete for attention
        if admitted is not None and admitted.scratch_id is not None:
            self._buffered.add(candidate.id)
        evicted = self.queue.push(candidate)
        if evicted is not None:
            log.info("attention queue full: dropped %s candidate %r", evicted.source, evicted.text[:60])
        self.wake.set()
        return candidate

    # -- running -------------------------------------------------------------------
    async def run(self, *, max_cycles: int | None = None, burst: bool = False,
                  stop: asyncio.Event | None = None) -> int:
        """Cycle until `stop`, `max_cycles`, or (burst) an empty queue; return cycles run."""
        ran = 0
        while not (stop and stop.is_set()) and (max_cycles is None or ran < max_cycles):
            if not len(self.queue):
                if burst:
                    break
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), self.settings.idle_wait_s)
                except TimeoutError:
                    pass
                continue
            try:
                await self.cycle()
            except asyncio.CancelledError:
                raise
            except Exception:  # one bad cycle must not end the mind
                log.exception("cognitive cycle failed; the loop goes on")
                self._requeue_failed()
            ran += 1
        return ran

    async def cycle(self, now: datetime | None = None) -> CycleRecord | None:
        started = time.perf_counter()
        now = now or datetime.now(UTC)
        timings: dict[str, float] = {}
        await self._rebuffer()
        if self.layers is not None:   # values/goals files edited while running take effect now
            self.retriever.layer_vecs, self.goal_vecs = await identity_vectors(self.layers)
        await self._embed_pending()
        allocation = self.queue.allocate(self._recent or None, self.goal_vecs or None)
        if allocation is None or allocation.winner is None:
            return None
        self.cycles += 1
        winner = self._current = allocation.winner
        report = f"{cognitive_state_report(allocation, self.queue.settings)}\n{self.gates.mode.report_line()}"

        t = time.perf_counter()
        retrieval = None
        if winner.embedding is not None:
            focus = self.assembler.focus(winner.embedding)
            context_vecs = [focus.vector]
            self.gates.exit.set_attention([winner.embedding, *self._recent[-2:]])
        else:
            context_vecs = []
        try:
            retrieval = await self.retriever.retrieve(
                winner.text, rng=self.rng, now=now, context_vecs=context_vecs,
                active_ids=self._active_ids, hops=self.settings.dmn_hops if winner.source == "dmn" else 1,
                query_vec=winner.embedding)
        except (ProviderError, *_DB_ERRORS) as exc:
            log.warning("recall failed this cycle, answering without memories: %s", exc)
        timings["recall"] = _ms(t)

        t = time.perf_counter()
        assembled = await self.assembler.assemble(
            retrieval, rng=self.rng, now=now, session=self.manifest,
            refresh_identity=self.fifo.needs_identity_reinjection)
        if self.fifo.needs_identity_reinjection:
            self.fifo.identity_reinjected()
        self._active_ids = assembled.ids_by_track.get("situational", [])
        corrections = await corrections_for(self.pool, self.providers.embedder, winner.text,
                                            focus_vec=winner.embedding, settings=self.reflection_settings)
        block = ""
        if corrections:
            chars = self.reflection_settings.block_field_chars if self.reflection_settings else 300
            block = reflection_block(corrections, field_chars=chars)
        skills = await self.skills.section() if self.skills is not None else ""
        system = self._system_prompt(assembled.text, report, block, await self._cost_line(), skills)
        user_text = INTERNAL_FRAMES.get(winner.source, "{text}").format(text=winner.text)
        # the skills section lives inside the context budget: the conversation gives way
        history = [ChatMessage("user" if m.role == "user" else "assistant", m.content)
                   for m in self.fifo.window(assembled.conversation_budget - count_tokens(skills))]
        messages = [*history, ChatMessage("user", user_text)]
        timings["assembly"] = _ms(t)

        t = time.perf_counter()
        answer, confidence, escalated, path, outcome = await self._think(winner, messages, system, retrieval)
        timings["think"] = _ms(t)

        kind = "communicate"
        allowed, why = self.settings.actions.allows(kind, winner.source_tag, winner.source_confidence, confidence)
        actions = [{"kind": kind, "allowed": allowed, "reason": why}]
        if answer and allowed:
            result = self.deliver(answer)
            if asyncio.iscoroutine(result):
                await result
        await self._after_answer(winner, bool(answer and allowed))
        answer_buffered = False
        if answer and outcome is not None:
            # the mind's own words go through the same gate as everything else
            kept = await self.gates.admit(answer, source_tag="internal_self",
                                          source_confidence=round(confidence or 0.5, 3), exchange=False)
            answer_buffered = kept.scratch_id is not None
        # Pruning gives the exit gate a last look only at what the entry gate skipped;
        # what it buffered is judged by the scratch flush already (plan §2.9, §3.3).
        self.fifo.append("user", user_text, source_tag=winner.source_tag, at=now,
                         metadata={"gated": winner.id in self._buffered})
        self._buffered.discard(winner.id)
        if answer:
            # a reflex reply (outcome None) only lists recall: nothing new to keep
            self.fifo.append("assistant", answer, source_tag="internal_self", at=now,
                             metadata={"gated": answer_buffered or outcome is None})
        # "average gate score": how strongly this input engaged memory — the mean weighted
        # recall score of what was retrieved (0 when nothing was).
        engaged = [m.weighted for m in retrieval.memories] if retrieval else []
        level = intensity(IntensitySignals(
            gate_score=float(np.clip(np.mean(engaged), 0.0, 1.0)) if engaged else 0.0,
            system2_recency=system2_recency(self._last_system2, now),
            goal_relevance=float(next((s.components.goal_relevance for s in allocation.ranked), 0.0)),
            emotional_charge=winner.emotional_charge), self.fifo.settings)
        await self.fifo.prune(level)
        if winner.embedding is not None:
            self._recent = (self._recent + [winner.embedding])[-self.settings.recent_context:]

        record = CycleRecord(self.cycles, winner, answer, bool(answer and allowed), actions, confidence,
                             escalated, path, retrieval, _ms(started), timings)
        await self._log(record, allocation, assembled, since=now)
        self._current = None
        self._failed.discard(winner.id)
        return record

    def _requeue_failed(self) -> None:
        """A cycle that failed (database restarting, a bug) gets its input back once."""
        winner, self._current = self._current, None
        if winner is None or winner.id in self._failed:
            if winner is not None:
                log.error("dropping %s input after a second failed cycle (it stays in scratch_buffer): %r",
                          winner.source, winner.text[:80])
            return
        self._failed.add(winner.id)
        self.queue.push(winner)

    async def _cost_line(self) -> str:
        """The §4.8 cost line; its totals scan all of llm_calls, so it is refreshed at most
        every `cost_line_refresh_s`, not every cycle."""
        now = time.monotonic()
        if self._cost_cache is None or now - self._cost_cache[0] >= self.settings.cost_line_refresh_s:
            self._cost_cache = (now, await self.providers.ledger.summary_line())
        return self._cost_cache[1]

    async def _rebuffer(self) -> None:
        """Inputs that arrived while the database was away go through the entry gate now."""
        while self._unbuffered:
            c = self._unbuffered[0]
            try:
                admitted = await self.gates.admit(c.text, source_tag=c.source_tag,
                                                  source_confidence=c.source_confidence,
                                                  exchange=c.source == "user")
            except _DB_ERRORS:
                return
            if admitted.scratch_id is not None:
                self._buffered.add(c.id)
            self._unbuffered.pop(0)

    # -- steps -----------------------------------------------------------------------
    async def _embed_pending(self) -> None:
        pending = [c for c in self.queue.pending() if c.embedding is None]
        if not pending:
            return
        try:
            vecs = await self.providers.embedder.embed([c.text for c in pending], "RETRIEVAL_QUERY")
        except ProviderError as exc:
            log.warning("could not embed %d attention candidates (salience without novelty): %s",
                        len(pending), exc)
            return
        self.queue.attach_embeddings({c.id: v for c, v in zip(pending, vecs, strict=True)})

    async def _after_answer(self, winner: Candidate, delivered: bool) -> None:
        """Once the answer is out: credit recalled skills; in copilot, ask the guardian
        about held memories — after the answer, never in the middle of one."""
        if self.skills is not None:
            await self.skills.credit_use(delivered)
        if delivered and winner.source == "user":
            question = self.gates.confirmation_question()
            if question:
                result = self.deliver(question)
                if asyncio.iscoroutine(result):
                    await result

    def _system_prompt(self, memories: str, report: str, reflection: str, cost_line: str,
                       skills: str = "") -> str:
        parts = [BOOTSTRAP_PROMPT.format(name=self.agent_name), memories, skills, report]
        if reflection:
            parts.append(reflection)
        parts.append(cost_line)
        if self.docs is not None and self.settings.max_tool_calls:
            parts.append(TOOL_INSTRUCTION)
        return "\n\n".join(p for p in parts if p)

    async def _think(self, winner: Candidate, messages: list[ChatMessage], system: str,
                     retrieval: Retrieval | None):
        """(answer, confidence, escalated, path, outcome)."""
        system1 = self.providers.system1
        if not system1.configured:
            return self._reflex_reply(winner, retrieval), None, False, "reflex", None
        reading = await self.threshold.current()
        outcome = None
        for _ in range(self.settings.max_tool_calls + 1):
            try:
                outcome = await self._escalating_answer(winner, messages, system, reading.threshold)
            except ProviderError as exc:
                # rate limit, outage, open breaker, malformed output: say so, keep the loop going
                log.warning("System 1 failed this cycle: %s", exc)
                return (self._reflex_reply(winner, retrieval, because=f"the language model failed: {exc}"),
                        None, False, "system1_failed", None)
            call = _TOOL_CALL.search(outcome.answer)
            if call is None or self.docs is None:
                break
            text = self.docs.read(call.group(1))
            messages = [*messages, ChatMessage("assistant", outcome.answer),
                        ChatMessage("user", f"[READ_DOC {call.group(1)}]\n{text}")]
        if outcome.escalated:
            self._last_system2 = datetime.now(UTC)
        return outcome.answer, outcome.confidence.composite, outcome.escalated, outcome.path, outcome

    async def _escalating_answer(self, winner: Candidate, messages: list[ChatMessage], system: str,
                                 threshold: float):
        return await loop_before_escalate(
            self.providers.system1, self.providers.system2, messages, focus=winner.text, threshold=threshold,
            meta=self.providers.meta, system=system, triggers=EscalationTriggers(),
            store=self.store, source_tag=winner.source_tag, settings=self.escalation_settings,
            metacognition=self.metacognition_settings, keep_corrections=not self.gates.mode.off)

    def _reflex_reply(self, winner: Candidate, retrieval: Retrieval | None, because: str | None = None) -> str:
        if because is None:
            said = getattr(self.providers.system1, "message", None) or "no language model is configured"
            lines = [f"(reflex mode — {said}: I cannot answer in words.)"]
        else:
            lines = [f"(I cannot answer in words right now: {because}.)"]
        recalled = retrieval.memories[: self.settings.reflex_recall_lines] if retrieval else []
        if recalled:
            lines.append("What this brings back:")
            lines += [f"  - {_one_line(r.hit.compressed or r.hit.content)}" for r in recalled]
        else:
            lines.append("Nothing comes back from memory yet.")
        return "\n".join(lines)

    async def _on_pruned(self, messages) -> None:
        """Pruned messages get the exit gate before they leave the window (§3.3)."""
        by_tag: dict[str, list] = {}
        for m in messages:
            if not m.metadata.get("gated"):  # a retry after a partial failure skips what passed
                by_tag.setdefault(m.source_tag, []).append(m)
        for tag, group in by_tag.items():
            await self.gates.prune([m.content for m in group], source_tag=tag)
            for m in group:
                m.metadata["gated"] = True

    async def _log(self, record: CycleRecord, allocation, assembled, since: datetime) -> None:
        winner = record.winner
        summary = assembled.summary()
        if record.retrieval is not None:
            summary |= {"recalled": record.retrieval.ids, "rerank_skipped": record.retrieval.rerank_skipped_reason,
                        "degraded": record.retrieval.degraded}
        summary["timings_ms"] = {k: round(v, 2) for k, v in record.timings_ms.items()}
        await record_cycle(
            self.pool, session_id=self.session_id, cycle=record.cycle, source_tag=winner.source_tag,
            attention_focus=winner.text, candidates=allocation.candidates_json(),
            winner={"source": winner.source, "source_tag": winner.source_tag, "reason": allocation.reason,
                    "path": record.path},
            context_summary=summary, output=record.output, actions=record.actions,
            confidence=record.confidence, escalated=record.escalated, duration_ms=record.duration_ms,
            cycle_started=since)


def _one_line(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
