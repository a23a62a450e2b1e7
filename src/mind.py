"""Wiring the mind's parts from settings: one place that knows how they connect.

main.py owns the process (signals, stdin, exit codes); this module builds what runs
inside it — store, recall, gates, context assembly, the loop, the re-embed worker —
and tears it down in the right order.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import asyncpg
import numpy as np

from src.config import Settings
from src.context.assembly import ContextAssembler
from src.db.manifest import Manifest
from src.gates.memory_gate import Gates
from src.gates.modes import MemoryMode
from src.loop.attention import AttentionQueue
from src.loop.cognitive_loop import CognitiveLoop
from src.loop.parts import LoopParts
from src.metacognition.threshold import EscalationThreshold
from src.providers.factory import Providers
from src.recall.layers import LayerEmbeddings, identity_vectors
from src.recall.reembed import ReembedWorker, check_embed_model, progress_bar
from src.recall.retrieval import Retriever
from src.recall.store import MemoryStore
from src.skills.recall import SkillRecall
from src.tools.read_docs import DocsTool
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

    async def close(self) -> None:
        """Stop background work; flush the scratch buffer through the exit gate."""
        if self.reembed is not None:
            await self.reembed.stop()
        try:
            await self.gates.shutdown()
        except Exception:  # unflushed rows survive; start-up recovery evaluates them
            log.exception("flushing the scratch buffer at shutdown failed")
        await self.threshold.aclose()


async def build_mind(settings: Settings, pool: asyncpg.Pool, providers: Providers, *, session_id: str,
                     manifest: Manifest, deliver: Callable[[str], Awaitable[None] | None],
                     progress: Callable[[str], None] | None = None,
                     rng: np.random.Generator | None = None) -> Mind:
    rng = rng or np.random.default_rng()
    safety = Safety(settings.safety)
    store = MemoryStore(pool, providers.embedder)
    layers = LayerEmbeddings(providers.embedder, values_path=settings.layers.values_path,
                             goals_path=settings.layers.goals_path, cache_dir=settings.layers.cache_dir)
    layer_vecs, goal_vecs = await identity_vectors(layers)
    retriever = Retriever(pool, providers.embedder, providers.reranker, safety, settings.retrieval,
                          layer_vecs=layer_vecs)

    async def layer_source():
        return retriever.layer_vecs     # the loop refreshes them every cycle

    gates = Gates.build(pool, providers.embedder, providers.meta, settings.gates, safety, layers=layer_source,
                        mode=MemoryMode(settings.memory.mode))
    assembler = ContextAssembler(pool, settings.context)
    threshold = EscalationThreshold(pool, refresh_s=settings.escalation.threshold_refresh_s,
                                    identity_center=settings.escalation.identity_center)
    parts = LoopParts(pool=pool, providers=providers, store=store, retriever=retriever, gates=gates,
                      assembler=assembler, threshold=threshold, attention=AttentionQueue(settings.attention),
                      layers=layers, docs=DocsTool(settings.docs_tool), manifest=manifest, goal_vecs=goal_vecs,
                      skills=SkillRecall(pool, settings.skills))
    loop = CognitiveLoop(parts, settings, session_id=session_id, deliver=deliver, rng=rng)

    def on_progress(done: int, total: int, rate: float) -> None:
        if progress is not None:
            progress(progress_bar(done, total, rate))

    stale, worker = await check_embed_model(pool, providers.embedder, start=True, on_progress=on_progress)
    return Mind(pool, providers, safety, store, retriever, gates, loop, threshold, layers, worker, stale)
