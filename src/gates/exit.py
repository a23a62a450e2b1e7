"""The exit gate (plan §2.8): what of the scratch buffer becomes long-term memory.

A flush takes unflushed scratch rows in chunks of `flush_batch` and, per chunk:

1. embeds them the way memories are stored (type prefix, RETRIEVAL_DOCUMENT) for
   activation, contradiction and storage, and once more with SEMANTIC_SIMILARITY
   for the novelty lookup (plan §2.1; the offline embedder ignores task types);
2. scores each item (no writes): ACT-R activation with spreading S_i from the
   attention focus and the identity layers; the bootstrap floor; the nearest
   memories by `check_novelty()` plus earlier items of the same chunk (a thing
   said twice in one flush confirms itself); contradiction layers 1 and 2 for
   every neighbour above the contradicting threshold, then layer 3 (concurrent
   LLM micro-calls) for the pairs still undecided; the emotional charge;
3. draws the matrix cell and its noise floor, in item order, from the injected
   generator (reproducible: the LLM's answers never change the sequence of draws);
   charge and τ raise the row (matrix.py); a reply of the mind's gives way (mind_replies.py);
4. writes in one transaction: re-claims the rows still unflushed, inserts the
   survivors, applies reinforce / contradict through the weight choke point,
   records every decision, and marks the rows flushed (or buffered for another
   round). See src/gates/scratch.py for why this makes a flush exactly-once.

Relevance is judged against the conversation in which an item was said, never the
focus at flush time (issue 22: five exchanges later the conversation has moved on,
and a fact the user stated looked irrelevant to it). The loop stores that focus with
the scratch row (`BufferedItem.focus`, src/gates/scratch.py); one without (a pruned
message, an input without a vector) is judged against the other items of its chunk and
the newest memories. The user's own lines are classified (src/gates/utterance.py): a
statement that carries information is core at any maturity; chatter is irrelevant; a
question is not a fact and is dropped (stored, it would answer later questions).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import asyncpg
import numpy as np

from src.errors import ProviderError
from src.gates import copilot, held_repository, model_questions, scratch, updates
from src.gates import record as gate_record
from src.gates.contradiction import (
    NegationDirection,
    load_or_learn,
    screen,
)
from src.gates.copilot import Confirmations, Settlement
from src.gates.emotion import StoreCentroid, emotional_charge
from src.gates.evaluation import Evaluation, Neighbour
from src.gates.held import evaluation_json, restore
from src.gates.matrix import (
    PERSISTING,
    BufferRounds,
    ItemSignals,
    bootstrap_floor,
    confirmed_or_novel,
    decide_item,
    item_relevance,
    novelty_band,
    novelty_cell,
)
from src.gates.mind_replies import give_way, said_by_user
from src.gates.modes import MemoryMode
from src.gates.novelty import check_novelty_many
from src.gates.persist_hooks import PersistHooks
from src.gates.scratch import BufferedItem, FlushReport
from src.gates.settings import GateSettings, GateThresholds
from src.gates.utterance import classify
from src.providers.embedding import embed_for_novelty, embed_memories
from src.providers.protocols import Embedder, LanguageModel
from src.recall.activation import activation
from src.recall.relevance import memory_maturity
from src.recall.settings import MATURITY_MEMORIES
from src.recall.store import EMBED_MAX_CHARS, EMBEDDING_DIMENSIONS, StoreSize
from src.text import first_sentence
from src.weights.safety import Safety

log = logging.getLogger(__name__)

#: Memory type of everything the gate persists: it was experienced, not yet abstracted.
GATE_MEMORY_TYPE = "episodic"
#: Characters of the first-sentence `compressed` written when the model gave none.
COMPRESSED_FALLBACK_CHARS = 120

LayerSource = Callable[[], Awaitable[list[tuple[np.ndarray, float]]]]


@dataclass(frozen=True)
class ExitSetup:
    """What an exit gate is built with beyond its store, models and settings: the identity
    layers' source (ACT-R's S_i), the embedder for context-window pruning (rate-limited,
    src/gates/rate_limit.py; default: the gate's own), the v0.1 store centroid, the mind's
    memory mode, its notion of age (`agent.maturity_memories`), the clock, and what runs
    when items persist (the gut, milestone 1)."""

    layers: LayerSource | None = None
    prune_embedder: Embedder | None = None
    centroid: StoreCentroid | None = None
    mode: MemoryMode | None = None
    maturity_memories: int = MATURITY_MEMORIES
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    hooks: PersistHooks | None = None


class ExitGate:
    """Scores buffered items and writes the survivors; see the module docstring."""

    def __init__(self, pool: asyncpg.Pool, embedder: Embedder, llm: LanguageModel,
                 settings: GateSettings, rng: random.Random, safety: Safety, setup: ExitSetup | None = None):
        setup = setup or ExitSetup()
        self.pool = pool
        self.embedder = embedder
        self.prune_embedder = setup.prune_embedder or embedder
        self.llm = llm
        self.settings = settings
        self.rng = rng
        self.safety = safety
        self.layers = setup.layers
        self.centroid = setup.centroid or StoreCentroid(settings.exit.centroid_refresh_s)
        self.clock = setup.clock
        self.mode = setup.mode or MemoryMode()
        self.confirmations = Confirmations()   # copilot: items held for the guardian
        self.maturity_memories = setup.maturity_memories   # `agent.maturity_memories`
        self._store_size = StoreSize()
        hooks = setup.hooks or PersistHooks()
        self.gut = hooks.gut
        self.on_persisted = hooks.on_persisted
        self._directions: dict[str, NegationDirection | None] = {}
        self._lock = asyncio.Lock()

    async def flush(self, *, reason: str, ids: Sequence[int] | None = None,
                    created_before: datetime | None = None, burst: bool = False) -> FlushReport:
        """Run unflushed scratch rows (all, or `ids`) through the gate, chunk by chunk.

        `burst` embeds through the rate-limited embedder (context-window pruning).
        """
        report = FlushReport()
        if self.mode.off:      # memory mode off: the exit gate writes nothing
            return report
        # One flush at a time, pruning included: two flushes over the same rows would both
        # embed and ask the LLM, and claim() would throw one side's work away.
        async with self._lock:
            after = 0
            while True:
                items = await scratch.pending(self.pool, limit=self.settings.scratch.flush_batch,
                                              after_id=after, ids=ids,
                                              created_before=created_before)
                if not items:
                    return report
                after = items[-1].id
                report.add(await self._flush_chunk(items, reason, burst))

    async def _flush_chunk(self, items: list[BufferedItem], reason: str, burst: bool) -> FlushReport:
        embedder = self.prune_embedder if burst else self.embedder
        try:
            vecs = await self._embed(embedder, items)
            novelty_vecs = await self._embed(embedder, items, novelty=True)
        except ProviderError as exc:
            log.warning("exit gate: %d buffered items could not be embedded and stay buffered "
                        "for the next flush: %s", len(items), exc)
            return FlushReport(deferred=len(items))
        evaluations = await self.evaluate(items, vecs, novelty_vecs)
        held = copilot.split(evaluations)[1] if self.mode.copilot else []
        return await self._write(evaluations, reason, held=held)

    async def load_held(self) -> int:
        """Start-up: the items earlier runs held wait for the guardian again; how many."""
        rows = await held_repository.held_items(self.pool)
        self.confirmations.add([copilot.Held.from_row(r, earlier=True) for r in rows])
        return len(rows)

    async def settle(self, settlement: Settlement) -> FlushReport:
        """Write the guardian's copilot answer: kept items persist, the others are dropped.

        One transaction takes the held rows (deleting them) and writes the memories and
        decisions: an answer takes effect exactly once, and a crash before the commit
        leaves every item held. Rows already decided are skipped. What is written is
        the evaluation the item was held with (src/gates/held.py), under its embed model.
        """
        keep = {h.scratch_id for h in settlement.keep}
        by_model: dict[str, list[Evaluation]] = {}
        async with self._lock, self.pool.acquire() as conn, conn.transaction():
            for row in await held_repository.take(conn, settlement.ids):
                e = restore(row)
                kept = row["scratch_id"] in keep
                e.cell = replace(e.cell, action=row["action"] if kept else "drop",
                                 reason=f"{e.cell.reason}; {row['why']}: "
                                        f"{'kept' if kept else 'dropped'} by the guardian (copilot)")
                by_model.setdefault(row["embed_model"], []).append(e)
            written = [(model, await self._write_in(conn, chunk, "guardian confirmation (copilot)", [], model))
                       for model, chunk in by_model.items()]
        report = FlushReport()
        for model, (mine, _) in written:
            report.add(await self._after_commit(mine, model))
        return report

    @staticmethod
    async def _embed(embedder: Embedder, items: list[BufferedItem], *, novelty: bool = False) -> np.ndarray:
        embed = embed_for_novelty if novelty else embed_memories
        vecs = await embed(embedder, [i.content[:EMBED_MAX_CHARS] for i in items],
                           [GATE_MEMORY_TYPE] * len(items))
        vecs = np.asarray(vecs, dtype=np.float32)
        if vecs.shape != (len(items), EMBEDDING_DIMENSIONS) or not np.all(np.isfinite(vecs)):
            raise ProviderError(f"embedder {embedder.model_name} returned shape {vecs.shape} for "
                                f"{len(items)} texts", provider=embedder.model_name)
        return vecs

    async def negation_direction(self) -> NegationDirection | None:
        """The embedder's learned negation direction (None while it cannot be learned)."""
        model = self.embedder.model_name
        if model not in self._directions:
            try:
                self._directions[model] = await load_or_learn(self.pool, self.embedder)
            except ProviderError as exc:   # layer 2 sits out; the next flush tries again
                log.warning("negation direction unavailable for %s: %s", model, exc)
                return None
        return self._directions[model]

    async def evaluate(self, items: list[BufferedItem], vecs: np.ndarray,
                       novelty_vecs: np.ndarray | None = None) -> list[Evaluation]:
        """Score `items` (embedded as `vecs`) and decide each one's cell; no writes.

        `novelty_vecs`: the same items embedded with SEMANTIC_SIMILARITY for the novelty
        lookup and the in-chunk similarity (`vecs` when not given)."""
        cfg = self.settings.exit
        model = self.embedder.model_name
        th = cfg.thresholds_for(model)
        now = self.clock()
        direction = await self.negation_direction()
        count = await self._store_size.count(self.pool, self.maturity_memories)
        maturity = memory_maturity(count, self.maturity_memories)
        centroid = None if self.gut is not None else await self.centroid.get(self.pool, model)
        layers = await self.layers() if self.layers is not None else []
        # an item's window (chunk and newest memories) stands in when no focus was noted for it
        recent = (await gate_record.recent_vectors(self.pool, model, cfg.context_recent_memories)
                  if any(i.focus is None for i in items) else None)
        novelty_vecs = vecs if novelty_vecs is None else novelty_vecs
        found, stored = await check_novelty_many(self.pool, novelty_vecs, model, cfg.novelty_k)
        in_batch = novelty_vecs @ novelty_vecs.T
        # the user's statements may update what the user said before (src/gates/updates.py)
        statements, earlier = await updates.earlier_for(
            self.pool, items, vecs, cfg.statement_sources, model,
            cfg.relation_pairs if self.llm.configured else 0, cfg.relation_floor)

        evaluations: list[Evaluation] = []
        for j, (item, vec) in enumerate(zip(items, vecs, strict=True)):
            context = item.focus
            if context is None:
                context = np.vstack([vecs[:j], vecs[j + 1:], recent])
            act = activation([item.created_at], now, self.rng, vec, context, layers)
            floor = bootstrap_floor(item.source_tag, maturity, cfg)
            said = classify(item.content) if item.source_tag in cfg.statement_sources else None
            neighbours = [Neighbour(m.similarity, m.content, memory_id=m.id, users=m.users) for m in found[j]]
            neighbours += [Neighbour(float(in_batch[j, i]), items[i].content, batch_index=i,
                                     users=said_by_user(items[i])) for i in range(j)]
            neighbours.sort(key=lambda n: -n.similarity)
            nearest = neighbours[0] if neighbours else None
            charge = self._charge(vec, centroid)
            e = Evaluation(item, vec, act, floor, item_relevance(act.S, floor, said, charge, cfg),
                           nearest, novelty_band(nearest.similarity if nearest else None, th),
                           charge, maturity, utterance=said)
            for n in neighbours[: cfg.contradiction_candidates]:
                if n.similarity <= th.contradicting:
                    break
                # novelty neighbours always carry their vector (they were found by it)
                other = stored[n.memory_id] if n.memory_id is not None else vecs[n.batch_index]
                e.verdicts.append((n, screen(item.content, vec, n.content, other, direction,
                                             th.opposition_no_below, th.opposition_yes_above)))
            if j in earlier:
                updates.note(e, earlier[j], updates.said_beside(items, vecs, statements, j))
            evaluations.append(e)

        await self._ask_llm(evaluations)
        for e in evaluations:
            self._finish(e, th)
        return evaluations

    def _charge(self, vec: np.ndarray, centroid: np.ndarray | None) -> float:
        """The gut's charge when wired (plan §5.1), else the v0.1 store-centroid charge."""
        return self.gut.charge(vec) if self.gut is not None else emotional_charge(vec, centroid)

    async def _ask_llm(self, evaluations: list[Evaluation]) -> None:
        """Layer 3: the model's questions (src/gates/model_questions.py)."""
        cfg = self.settings.exit
        find = model_questions.by_about(self.pool, self.embedder,
                                        cfg.relation_pairs + cfg.relation_about + 1, cfg.relation_about_floor)
        await model_questions.ask(self.llm, evaluations, cfg, find)

    def _finish(self, e: Evaluation, th: GateThresholds) -> None:
        opposed = next(((n, v) for n, v in e.verdicts if v.contradicts), None)
        if opposed is not None:
            e.decided_by, e.novelty = opposed, "contradicting"
        else:
            first = e.verdicts[0] if e.verdicts else None
            e.decided_by = first
            e.novelty = novelty_cell(e.nearest.similarity if e.nearest else None,
                                     first[1].contradicts if first else None, th)
        said_more = ""
        if e.novelty == "confirming" and e.nearest is not None:
            e.novelty, said_more = confirmed_or_novel(e.item.content, e.nearest.content)
        cfg = self.settings.exit
        e.cell = decide_item(ItemSignals(e.relevance, e.act, e.utterance, e.charge), e.novelty, th, cfg, self.rng,
                             BufferRounds(e.round, cfg.max_buffer_rounds, e.item.expires_at <= self.clock()))
        e.cell = replace(e.cell, reason=e.cell.reason + said_more)
        e.cell = give_way(e)       # the mind's reply gives way to the user's words (mind_replies.py)
        if e.compressed is None:
            e.compressed = first_sentence(e.item.content, COMPRESSED_FALLBACK_CHARS)

    async def _write(self, evaluations: list[Evaluation], reason: str, *,
                     held: list[tuple[Evaluation, str, str]] = ()) -> FlushReport:
        """Decide a chunk in one transaction: `held` items (copilot) are held, the rest written."""
        model = self.embedder.model_name
        async with self.pool.acquire() as conn, conn.transaction():
            mine, holding = await self._write_in(conn, evaluations, reason, held, model)
        report = await self._after_commit(mine, model)
        report.claimed_elsewhere = len(evaluations) - len(mine) - len(holding)
        if holding:
            report.evaluated += len(holding)
            report.actions["held"] = len(holding)
        self.confirmations.add(holding)
        return report

    async def _write_in(self, conn: asyncpg.Connection, evaluations: list[Evaluation], reason: str,
                        held: Sequence[tuple[Evaluation, str, str]],
                        model: str) -> tuple[list[Evaluation], list[copilot.Held]]:
        """The writes of one chunk inside the caller's transaction: (decided, held) items.

        `chunk_index` spans the whole chunk, held items included: in-chunk neighbours
        name their item by its index in the evaluated chunk.
        """
        claimed = await scratch.claim(conn, [e.item.id for e in evaluations])
        held_ids = {e.item.id for e, _, _ in held}
        mine = [e for e in evaluations if e.item.id in claimed and e.item.id not in held_ids]
        chunk_index = {e.item.id: k for k, e in enumerate(evaluations)}
        batch_ids = await gate_record.persist(conn, mine, model, GATE_MEMORY_TYPE, chunk_index)
        await gate_record.apply_weights(conn, mine, batch_ids, self.settings.exit, self.safety)
        await gate_record.record_exit(conn, mine, batch_ids, model, reason)
        await scratch.mark_flushed(conn, [e.item.id for e in mine if e.cell.action != "buffer"])
        await scratch.keep_buffered(conn, [e.item.id for e in mine if e.cell.action == "buffer"])
        holding = [(e, action, why) for e, action, why in held if e.item.id in claimed]
        held_at = self.clock()

        def resolve(n: Neighbour) -> int | None:
            return n.memory_id if n.memory_id is not None else batch_ids.get(n.batch_index)

        await updates.link(conn, updates.pairs(mine, resolve))
        await held_repository.hold(
            conn, [held_repository.HeldRow(e.item.id, a, w, e.vec, evaluation_json(e, resolve))
                   for e, a, w in holding], model, reason, held_at)
        return mine, [copilot.Held(e.item.id, e.item.content, a, w, held_at) for e, a, w in holding]

    async def _after_commit(self, mine: list[Evaluation], model: str) -> FlushReport:
        """Once the chunk is committed: the centroids absorb what persisted; the report."""
        report = FlushReport()
        persisted = [e.vec for e in mine if e.cell.action in PERSISTING]
        if persisted:
            self.centroid.absorb(model, np.vstack(persisted))
            if self.gut is not None:
                self.gut.absorb(model, np.vstack(persisted))
            if self.on_persisted is not None:
                await self.on_persisted([e.memory_id for e in mine if e.memory_id is not None])
        report.evaluated = len(mine)
        report.llm_calls = sum(e.llm_calls for e in mine)
        for e in mine:
            report.actions[e.cell.action] = report.actions.get(e.cell.action, 0) + 1
        return report

