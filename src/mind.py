"""Wiring the mind's parts from settings: one place that knows how they connect.

main.py owns the process (signals, stdin, exit codes); this module builds what runs
inside it — store, recall, gates, context assembly, the loop, the re-embed worker —
and tears it down in the right order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

import asyncpg
import numpy as np

from src.bootstrap.milestones import consolidation_milestone_hook
from src.bootstrap.seeding import seed_boundaries
from src.config import Settings
from src.consolidation.deep.deep_pass import ConsolidationParts
from src.consolidation.service import Consolidation
from src.context.assembly import ContextAssembler
from src.context.request import budget_for
from src.db.database import Database
from src.db.manifest import Manifest, record_shutdown
from src.db.pool import DB_ERRORS
from src.dmn.generator import DmnGenerator, DmnLimits, DmnQueue
from src.gates.exit import ExitSetup
from src.gates.memory_gate import Gates
from src.gates.modes import MemoryMode
from src.gates.persist_hooks import PersistHooks
from src.gut.deep_pass import gut_deep_pass
from src.gut.gut import Gut
from src.loop.attention_queue import AttentionQueue
from src.loop.cognitive_loop import CognitiveLoop
from src.loop.inner_life import InnerLife
from src.loop.input_journal import InputJournal
from src.loop.parts import LoopParts
from src.metacognition.threshold import EscalationThreshold, RetryRule
from src.providers.budget import BackgroundBudget
from src.providers.factory import Providers
from src.recall.layer_memories import LayerMemories
from src.recall.layers import LayerEmbeddings, identity_vectors
from src.recall.reembed import ReembedWorker, check_embed_model, progress_bar
from src.recall.retrieval import Retriever
from src.recall.store import MemoryStore
from src.skills.recall_skill import SkillRecall
from src.tools.read_docs import DocsTool
from src.weights.approval import ApprovalLine
from src.weights.safety import Safety

log = logging.getLogger(__name__)


@dataclass
class Mind:
    pool: asyncpg.Pool
    providers: Providers
    safety: Safety
    store: MemoryStore
    retriever: Retriever
    gates: Gates
    loop: CognitiveLoop
    threshold: EscalationThreshold
    layers: LayerEmbeddings
    reembed: ReembedWorker | None = None
    stale_at_start: int = 0
    consolidation: Consolidation | None = None
    gut: Gut | None = None
    dmn: DmnGenerator | None = None
    budget: BackgroundBudget | None = None     # what internal work may still spend (issue 24)
    # one-off work started beside the mind (the vector index's rebuild): cancelled at close
    background: list[asyncio.Task] = field(default_factory=list)

    async def close(self) -> None:
        """Stop background work; flush the scratch buffer through the exit gate. The mind's own
        model calls end first (src/providers/endpoint_gate.py): none of them holds the exit,
        and the flush's contradiction check does without its model layer."""
        self.providers.endpoints.close_internal()
        for task in self.background:
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        try:   # cycle rows (with their gut deltas) still waiting for the database: last chance
            await self.loop.backlog.flush()
        except DB_ERRORS as exc:
            log.warning("shutdown: %d cycle writes not written, the database is away (%s)", len(self.loop.backlog), exc)
        if self.consolidation is not None:
            await self.consolidation.stop()
        if self.reembed is not None:
            await self.reembed.stop()
        try:
            await self.gates.shutdown()
        except Exception:  # unflushed rows survive; start-up recovery evaluates them
            log.exception("flushing the scratch buffer at shutdown failed")
        await self.threshold.aclose()


async def shut_down(db: Database, providers: Providers, mind: Mind | None, web: Stoppable | None,
                    session_id: str, *, timeout_s: float) -> None:
    """The process's last steps within `timeout_s`: the mind's own model calls end at once (a
    slow one held /quit past 10 s and lost the session's uptime and the scratch flush, issue
    27); the uptime is recorded first, so no slow step can lose it; then the web view, the
    mind (its scratch flush), the providers (queued ledger rows) and the pool close."""
    providers.endpoints.close_internal()

    async def steps() -> None:
        try:
            await _record_uptime(db.pool, session_id)
            if web is not None:
                await web.stop()
            if mind is not None:
                await mind.close()
            await providers.aclose()
        finally:
            await db.close()

    try:
        await asyncio.wait_for(steps(), timeout_s)
    except TimeoutError:
        log.error("shutdown took longer than %.0f s; closing the pool hard", timeout_s)
        db.pool.terminate()
    except Exception as exc:  # the database may already be gone; exit anyway
        log.warning("shutdown did not finish: %s: %s", type(exc).__name__, exc)
        with contextlib.suppress(Exception):
            db.pool.terminate()


async def _record_uptime(pool: asyncpg.Pool, session_id: str) -> None:
    """This session's uptime into the manifest; a database that is away is logged, and the
    shutdown goes on to flush what it can."""
    try:
        hours = await record_shutdown(pool, session_id)
    except DB_ERRORS as exc:
        log.warning("shutdown could not record uptime: %s: %s", type(exc).__name__, exc)
        return
    if hours is not None:
        log.info("lifetime uptime %.3f h", hours)


class Stoppable(Protocol):
    async def stop(self) -> None: ...


async def build_mind(settings: Settings, pool: asyncpg.Pool, providers: Providers, *, session_id: str,
                     manifest: Manifest, deliver: Callable[[str], Awaitable[None] | None],
                     journal: InputJournal | None = None, rng: np.random.Generator | None = None) -> Mind:
    """Every part of the mind, each given what it needs when it is made. `journal`: the
    durable input the loop marks answered turns in (the service's; a test may go without)."""
    rng = rng or np.random.default_rng()
    # the context budget in System 1's tokens: its window, as configured or probed (issue 27)
    settings = settings.model_copy(update={"context": settings.context.model_copy(
        update={"budget": budget_for(settings.context.budget, providers.system1)})})
    budget = await _background_budget(settings, pool, providers)
    safety = Safety(settings.weights.safety, approval=ApprovalLine.of(settings.consolidation.evolution.promotion))
    store = MemoryStore(pool, providers.embedder)
    layers = LayerEmbeddings(providers.embedder, values_path=settings.recall.layers.values_path,
                             goals_path=settings.recall.layers.goals_path, cache_dir=settings.recall.layers.cache_dir)
    layer_vecs, goal_vecs = await identity_vectors(layers)
    maturity = settings.agent.maturity_memories
    # queued near-miss suppression needs the light ticker to apply it (src/recall/mutation.py)
    recall_cfg = settings.recall.retrieval if settings.consolidation.light.enabled else settings.recall.retrieval.model_copy(
        update={"near_miss_deferred": False})
    gut, inner = await _inner_life(settings, pool, providers, store, layers, safety, session_id=session_id)
    retriever = Retriever(pool, providers.embedder, providers.reranker, safety, recall_cfg,
                          layer_vecs=layer_vecs, maturity_memories=maturity)

    async def layer_source():
        return (await identity_vectors(layers))[0]     # an edited values or goals file counts at once

    gates = Gates.build(pool, providers.embedder, providers.meta, settings.gates, safety, setup=ExitSetup(
        layers=layer_source, mode=MemoryMode(settings.gates.memory.mode), maturity_memories=maturity,
        hooks=PersistHooks(gut=gut, on_persisted=inner.on_persisted)))
    assembler = ContextAssembler(pool, settings.context, broadening=safety.sampling_evidence_cap)
    esc = settings.metacognition.escalation
    threshold = EscalationThreshold(pool, refresh_s=esc.threshold_refresh_s, identity_center=esc.identity_center,
                                    maturity_memories=maturity,
                                    retry=RetryRule(esc.retry_window, esc.retry_min_retries, esc.retry_min_success))
    parts = LoopParts(pool=pool, providers=providers, store=store, retriever=retriever, gates=gates,
                      assembler=assembler, threshold=threshold, attention=AttentionQueue(settings.loop.attention),
                      layers=layers, docs=DocsTool(settings.tools.docs), manifest=manifest, goal_vecs=goal_vecs,
                      inner=inner, skills=SkillRecall(pool, settings.skills, providers.embedder), impulse_gate=budget.gate)
    loop = CognitiveLoop(parts, settings, session_id=session_id, deliver=deliver, rng=rng, journal=journal)
    dmn = _dmn(settings, pool, providers, loop, layers, budget, safety) if settings.dmn.enabled else None

    def on_progress(done: int, total: int, rate: float) -> None:
        log.info("%s", progress_bar(done, total, rate))

    stale, worker = await check_embed_model(pool, providers.embedder, start=True, on_progress=on_progress)
    # insights and tensions compete for attention like everything else (plan §3.4); after each
    # pass the gut rebuilds its subconscious centroid and finds its axes (plan §5.1)
    consolidation = Consolidation(
        ConsolidationParts(pool, embedder=providers.embedder, llm=providers.meta, safety=safety,
                            settings=settings.consolidation),
        submit=budget.gate(loop.submit), recompute_centroid=_after_pass_centroids(pool, providers, gates, gut),
        budget=budget, after=[consolidation_milestone_hook(pool)])
    return Mind(pool, providers, safety, store, retriever, gates, loop, threshold, layers, worker, stale,
                consolidation, gut, dmn, budget)


async def _background_budget(settings: Settings, pool, providers) -> BackgroundBudget:
    """The background budget, seeded from the ledger's last 24 hours and told of every call."""
    budget = BackgroundBudget(settings.providers.budget)
    try:
        await budget.seed(pool)
    except DB_ERRORS as exc:   # counts from zero: at worst one more window's spend
        log.warning("background budget: could not read what internal work spent (%s); counting from now", exc)
    providers.ledger.observers.append(budget.observe)
    return budget


def _after_pass_centroids(pool, providers, gates, gut: Gut | None):
    model = providers.embedder.model_name

    async def recompute():
        if gut is None:
            return await gates.exit.centroid.recompute(pool, model)
        return await gut_deep_pass(pool, gut, model, now=datetime.now(UTC))
    return recompute


async def _inner_life(settings: Settings, pool, providers, store, layers, safety, *,
                      session_id: str) -> tuple[Gut | None, InnerLife]:
    """Seed the immutable boundaries (once), build the gut and the inner life (gut, outcomes,
    readiness, the layers' entries as memories): recall and the exit gate are built with them."""
    if settings.bootstrap.seed_boundaries:
        await seed_boundaries(store, settings.bootstrap.boundaries_path)
    gut = None
    if settings.gut.enabled:
        gut = Gut(settings.gut)
        await gut.recompute_l2(pool, providers.embedder.model_name)
    paths = settings.recall.layers
    inner = InnerLife(pool, providers.embedder, gut=gut, session_id=session_id, settings=settings.bootstrap,
                      outcomes=settings.outcomes, layer_memories=LayerMemories(
                          store, safety, {0: paths.values_path.name, 1: paths.goals_path.name}))
    await inner.refresh_layers(layers)
    return gut, inner


def _dmn(settings: Settings, pool, providers, loop: CognitiveLoop, layers: LayerEmbeddings,
         budget: BackgroundBudget, safety: Safety) -> DmnGenerator:
    """The DMN generator: self-prompts go through the loop's `submit` (never a second pipeline)."""
    async def dmn_layers():
        values = await layers.get_layer_embeddings(0)
        goals = await layers.get_layer_embeddings(1)
        return [(t, v) for t, _, v in goals], [(t, v) for t, _, v in values]

    async def on_creative(item_id, out, now):
        await loop.inner.milestone(8, {"dmn_item_id": item_id, "memory_ids": out.memory_ids,
                                       "association": out.text[:200], **out.detail}, now)

    return DmnGenerator(pool, embed_model=providers.embedder.model_name,
                        queue=DmnQueue(loop.submit, lambda: loop.queue.counts()["dmn"]), rng=np.random.default_rng(),
                        settings=settings.dmn, layers=dmn_layers, on_creative=on_creative,
                        limits=DmnLimits(budget, safety))
