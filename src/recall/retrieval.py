"""Recall: hybrid search → ACT-R → hybrid relevance + spreading → rerank → mutation.

    1. hybrid search (search.py): top-`limit` by RRF of vector and full text + recency
    2. spreading activation (plan §3.1) from the memories active in context (or, on
       a cold call, the best three hits) through `memory_co_access`: hop 0 ×1.0,
       hop 1 ×0.3, hop 2 ×0.1 (DMN); partners that search missed join the candidates
    3. ACT-R (plan §2.7) per candidate: A = B + S + P + ε
    4. hybrid relevance (plan §3.1): five components, Dirichlet-sampled blend whose
       alphas move from the cold-start set to the target set with maturity; the
       semantic component is what search measured (`retrieval.semantic_signal`,
       relevance.semantic_signal), not cosine alone
    5. weighted = (1 - a)·relevance + a·P(retrieve), P = 1 / (1 + e^{-(A - τ)/s}),
       a = `activation_share`. Additive and bounded, like recency in search: ACT-R's
       base level of a memory untouched for a year is about -8, and a multiplier
       would make old memories unreachable however well they match.
    6. dormant memories (center below `dormant_center`) leave the candidates unless
       the cue is strong (cosine > `dormant_similarity`, plan §3.8)
    7. rerank top-`limit` → top-`keep`: 0.6·rerank + 0.4·weighted (plan §2.6)
    8. working memory (working.py): unflushed scratch rows matching the query by full
       text, returned beside the memories as not yet consolidated (never mutated)
    9. retrieval-induced mutation (plan §3.8, mutation.py), one transaction: retrieved rows get
       reinforce(0.1) and an access (count, last_accessed, ACT-R presentation),
       near-misses (ranks keep+1 … limit) contradict(0.05), co-access recorded for
       the retrieved set. Weight changes go through the safety choke point.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NamedTuple

import asyncpg
import numpy as np

from src.db.write_behind import WriteBehind
from src.errors import ProviderError
from src.providers.protocols import Embedder, Reranker
from src.recall import activation as actr
from src.recall import relevance as rel
from src.recall import search
from src.recall.co_access import fetch_partners, fetch_two_hops
from src.recall.dirichlet import DirichletFactors, evolved_alpha
from src.recall.mutation import mutate_after_retrieval
from src.recall.rerank import RerankResult
from src.recall.settings import MATURITY_MEMORIES, ActRSettings, ArmWeights, RetrievalSettings
from src.recall.store import StoreSize
from src.recall.working import WorkingHit, recall_working
from src.text import clean_text
from src.weights.safety import Safety

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recalled:
    """A candidate after every stage; `final` orders the result."""

    hit: search.SearchHit
    activation: actr.ActivationResult
    components: tuple[float, ...]          # rel.COMPONENTS order
    relevance: float
    weighted: float
    spread: float                          # co-activation reached through co-access
    p_retrieve: float = 0.0                # P(retrieve) = σ((A − τ)/s) from ACT-R
    rerank: float | None = None
    final: float = 0.0

    @property
    def id(self) -> int:
        return self.hit.id


@dataclass
class Retrieval:
    query: str
    memories: list[Recalled]               # retrieved, best first (at most `keep`)
    near_misses: list[Recalled]            # ranks keep+1 … limit
    blend: dict[str, float]                # the Dirichlet draw used this time
    reranked: bool
    rerank_skipped_reason: str | None
    degraded: list[str] = field(default_factory=list)   # e.g. "query embedding failed: …"
    timings_ms: dict[str, float] = field(default_factory=dict)
    # what was just said and matches, from the scratch buffer: not yet consolidated
    working: list[WorkingHit] = field(default_factory=list)

    @property
    def ids(self) -> list[int]:
        return [m.id for m in self.memories]


class Retriever:
    """Recall for the cognitive loop, DMN and gates. One instance per process."""

    def __init__(self, pool: asyncpg.Pool, embedder: Embedder, reranker: Reranker | None,
                 safety: Safety, settings: RetrievalSettings | None = None,
                 layer_vecs: Sequence[tuple[np.ndarray, float]] = (),
                 maturity_memories: int = MATURITY_MEMORIES):
        self.pool = pool
        self.embedder = embedder
        self.reranker = reranker
        self.safety = safety
        self.settings = settings or RetrievalSettings()
        # Layer 0/1 (values, goals) as (vector, weight): the identity side of S_i.
        self.layer_vecs = list(layer_vecs)
        # the mind's one notion of age (`agent.maturity_memories`), shared with gates and §3.5
        self.maturity_memories = maturity_memories
        self._store_size = StoreSize()
        # The gut's emotional alignment (plan §5.1 → §3.1's emotional component): rows of
        # vectors → values in [0, 1]. None: the neutral 0.5.
        self.emotional: Callable[[np.ndarray], np.ndarray] | None = None
        # Alphas evolved by consolidation (§4.5) on top of the maturity schedule.
        self.dirichlet = DirichletFactors()

    async def retrieve(
        self,
        query: str,
        *,
        rng: np.random.Generator,
        now: datetime | None = None,
        context_vecs: Sequence[np.ndarray] = (),
        active_ids: Sequence[int] = (),
        hops: int = 1,
        want_types: Sequence[str] = (),
        mutate: bool = True,
        query_vec: np.ndarray | None = None,
        exclude_scratch: Sequence[int] = (),
        logged_query: str | None = None,
        write_behind: WriteBehind | None = None,
        searched: Callable[[], object] | None = None,
    ) -> Retrieval:
        """Recall memories for `query`; `hops` 1 normally, 2 for DMN/introspection.

        `query_vec`: the query's RETRIEVAL_QUERY embedding when the caller already has it
        (the loop embeds attention candidates), so it is not paid for twice.
        `exclude_scratch`: the scratch rows of the input being answered (not recalled to itself).
        `logged_query`: the query as the mutation's evidence keeps it (mode off: src/gates/modes.py).
        `write_behind`: the mutation is queued there, not awaited (src/db/write_behind.py).
        `searched`: called as the search returns (the loop's prompt reads pass while it scores).
        """
        cfg = self.settings
        now = now or datetime.now(UTC)
        timings: dict[str, float] = {}
        degraded: list[str] = []
        query = clean_text(query).text
        if not query.strip():
            return Retrieval(query, [], [], {}, False, "empty query", ["empty query: nothing to recall"])
        with _timed(timings, "embed"):
            if query_vec is None:
                query_vec = await self._embed_query(query, degraded)
        arms = cfg.arm_weights(self.embedder.model_name)
        with _timed(timings, "search"):   # with what does not wait for its hits, side by side
            hits, early_spread, working, blend = await asyncio.gather(
                self._search(query, query_vec, arms, now),
                self._early_spread(active_ids, hops, query_vec, now) if active_ids else _none(),
                recall_working(self.pool, query, limit=cfg.working_k, exclude=exclude_scratch),
                self._blend(rng))
        if searched is not None:
            searched()
            await asyncio.sleep(0)   # what it started sends its queries before the scoring holds the loop
        with _timed(timings, "spread"):
            hits, spread = await self._spread_from(hits, active_ids, hops, query_vec, now, early_spread)
        with _timed(timings, "score"):
            focus = [query_vec] if query_vec is not None else []
            top = self._awake_top(_score(hits, rng, now, cfg, focus + list(context_vecs), self.layer_vecs,
                                         spread, blend, want_types, arms.w_recency, self.emotional,
                                         cold_seeds=[] if active_ids else [h.id for h in hits[:cfg.spread_seeds]]))
        with _timed(timings, "rerank"):
            memories, near, reranked = await self._rerank(query, top)
        if mutate and memories:
            await self._mutate(memories, near, now, query if logged_query is None else logged_query, blend,
                               write_behind, timings)
        return Retrieval(query, memories, near, dict(zip(rel.COMPONENTS, map(float, blend), strict=True)),
                         reranked.reranked, reranked.skipped_reason, degraded, timings, working)

    async def _mutate(self, memories: list[Recalled], near: list[Recalled], now: datetime, logged_query: str,
                      blend: np.ndarray, write_behind: WriteBehind | None, timings: dict[str, float]) -> None:
        """Step 8 (plan §3.8): the retrieved reinforced, the near-misses suppressed, co-access
        and outcomes; queued on `write_behind`, else run and timed here."""
        mutation = functools.partial(
            mutate_after_retrieval, self.pool, [m.id for m in memories], [r.id for r in near],
            safety=self.safety, at=now, settings=self.settings, query=logged_query,
            contributions=[np.asarray(m.components) * blend for m in memories])
        if write_behind is not None:
            write_behind.queue("retrieval mutation", mutation, lane="weights")
            return
        with _timed(timings, "mutation"):
            await mutation()

    async def _embed_query(self, query: str, degraded: list[str]) -> np.ndarray | None:
        """The query's RETRIEVAL_QUERY vector; None when the embedder fails (full text only,
        said in `degraded`): recall degrades, it does not fail."""
        try:
            return (await self.embedder.embed([query], "RETRIEVAL_QUERY"))[0]
        except ProviderError as exc:
            degraded.append(f"query embedding failed ({exc}); full-text search only")
            log.warning("query embedding failed, searching full text only: %s", exc)
            return None

    async def _search(self, query: str, query_vec: np.ndarray | None, arms: ArmWeights,
                      now: datetime) -> list[search.SearchHit]:
        """Step 1: hybrid search, top-`limit`, with the arm weights of the current embed model."""
        cfg, model = self.settings, self.embedder.model_name
        return await search.search_hybrid(
            self.pool, query, query_vec, embed_model=model, limit=cfg.limit, k=cfg.rrf_k_for(model),
            w_vector=arms.w_vector, w_fulltext=arms.w_fulltext, w_recency=arms.w_recency,
            candidates=cfg.candidates, now=now)

    async def _early_spread(self, active_ids: Sequence[int], hops: int, query_vec: np.ndarray | None,
                            now: datetime) -> Spread:
        """Step 2 beside the search: co-activation from the memories in context, and the rows
        of the `spread_join` + `limit` most activated partners: the search returns at most
        `limit` hits, so these hold the `spread_join` strongest partners it did not find,
        whatever it finds, and no round trip is left after the search."""
        cfg = self.settings
        spread = await self._spread(active_ids, hops)
        rows = await self._fetch_partners(_most_activated(spread, (), cfg.spread_join + cfg.limit), query_vec, now)
        return Spread(spread, {h.id: h for h in rows})

    async def _fetch_partners(self, ids: list[int], query_vec: np.ndarray | None,
                              now: datetime) -> list[search.SearchHit]:
        if not ids:
            return []
        return await search.fetch_hits(self.pool, ids, query_vec, embed_model=self.embedder.model_name, now=now)

    async def _spread_from(self, hits: list[search.SearchHit], active_ids: Sequence[int], hops: int,
                           query_vec: np.ndarray | None, now: datetime, early: Spread | None
                           ) -> tuple[list[search.SearchHit], dict[int, float]]:
        """Step 2: co-activation from the memories in context (`early`, read beside the
        search; cold: from the best hits, here); the `spread_join` most activated partners
        that search missed join the candidates."""
        if early is None:
            seeds = list(active_ids) or [h.id for h in hits[:self.settings.spread_seeds]]
            early = Spread(await self._spread(seeds, hops), {})
        spread, fetched = early
        missing = _most_activated(spread, {h.id for h in hits}, self.settings.spread_join)
        joined = await self._fetch_partners([mid for mid in missing if mid not in fetched], query_vec, now)
        by_id = fetched | {h.id: h for h in joined}
        return hits + [by_id[mid] for mid in missing if mid in by_id], spread

    async def _blend(self, rng: np.random.Generator) -> np.ndarray:
        """Step 4's Dirichlet draw: alphas by the store's maturity, evolved by consolidation (§4.5)."""
        total = await self._store_size.count(self.pool, self.maturity_memories)
        maturity = rel.memory_maturity(total, self.maturity_memories)
        factors = await self.dirichlet.get(self.pool)
        return rel.sample_blend(rng, evolved_alpha(rel.blend_alpha(maturity), factors))

    def _awake_top(self, scored: list[Recalled]) -> list[Recalled]:
        """Step 6: dormant memories out (unless the cue is strong); the best `limit` by weighted score."""
        awake = [r for r in scored if not _dormant(r.hit, self.settings)]
        awake.sort(key=lambda r: (-r.weighted, r.id))
        return awake[:self.settings.limit]

    async def _rerank(self, query: str, top: list[Recalled]) -> tuple[list[Recalled], list[Recalled], RerankResult]:
        """Step 7: top-`limit` → top-`keep` (the retrieved); the rest are the near-misses."""
        reranked = await search.rerank_hits(
            self.reranker, query, [r.hit for r in top], keep=self.settings.keep,
            hit_scores=[r.weighted for r in top])
        scored = {h.hit.id: h for h in [*reranked.hits, *reranked.rest]}
        done = [dataclasses.replace(r, rerank=scored[r.id].rerank, final=scored[r.id].final) if r.id in scored
                else r for r in top]
        kept = {h.hit.id for h in reranked.hits}
        by_id = {r.id: r for r in done}
        return [by_id[h.hit.id] for h in reranked.hits], [r for r in done if r.id not in kept], reranked

    async def _spread(self, seeds: Sequence[int], hops: int) -> dict[int, float]:
        """Co-activation per memory: hop 0 from the seeds, then `hops` further hops (the first
        two in one query, a third, the DMN's, in another)."""
        if not seeds:
            return {}
        k = self.settings.spread_top_k
        frontier, seed_set = {s: 1.0 for s in seeds}, set(seeds)
        activated: dict[int, float] = {}
        # hops 0 and 1 (all of normal recall) in one statement; its hop-1 seeds are exactly
        # the frontier hop 0 leaves (the partners that are no seed)
        fetched = await fetch_two_hops(self.pool, list(frontier), k) if hops >= 1 else None
        for hop in range(hops + 1):
            edges = fetched[hop] if fetched is not None and hop < 2 else \
                await fetch_partners(self.pool, list(frontier), k)
            frontier = rel.spread_hop(frontier, edges, hop, activated, exclude=seed_set, top_k=k)
            if not frontier:
                break
        return activated



async def _none() -> None:
    return None


class Spread(NamedTuple):
    """Co-activation per memory, and the rows of partners already read (by id)."""

    activation: dict[int, float]
    rows: dict[int, search.SearchHit]


def _most_activated(spread: dict[int, float], found: Collection[int], n: int) -> list[int]:
    """The `n` memories spreading reached most strongly that are not in `found`."""
    return sorted((mid for mid in spread if mid not in found), key=lambda mid: (-spread[mid], mid))[:n]




def _score(hits: Sequence[search.SearchHit], rng: np.random.Generator, now: datetime,
           cfg: RetrievalSettings, context_vecs: list[np.ndarray],
           layer_vecs: Sequence[tuple[np.ndarray, float]], spread: dict[int, float],
           blend: np.ndarray, want_types: Sequence[str], w_recency: float,
           emotional_fn: Callable[[np.ndarray], np.ndarray] | None = None,
           cold_seeds: Sequence[int] = ()) -> list[Recalled]:
    """ACT-R and hybrid relevance for every candidate, vectorised."""
    if not hits:
        return []
    a = cfg.act_r
    presentations = [[h.event_time or h.created_at, *h.access_timestamps] for h in hits]
    base = actr.base_levels(presentations, now, a.d)
    usable = np.array([h.embedding is not None and h.similarity is not None for h in hits])
    vecs = np.stack([h.embedding if h.embedding is not None else np.zeros(768, np.float32) for h in hits])
    s_i = np.where(usable, actr.spreading_many(vecs, context_vecs, layer_vecs), 0.0)
    p_i = np.array([a.P * _mismatch(h, want_types) for h in hits])
    noise = actr.logistic_noise_many(rng, len(hits), a.s)
    total = base + s_i + p_i + noise
    p_retrieve = 1.0 / (1.0 + np.exp(-np.clip((total - a.tau) / max(a.s, 1e-9), -50, 50)))

    # The semantic component reflects the match search measured (both arms), not cosine
    # alone: with a weak embedder cosine throws away what full text found (issue 12).
    # ACT-R's S_i above keeps pure cosine, as the plan's spreading activation needs.
    fused = np.array([max(0.0, h.score - w_recency * h.recency) if h.rrf > 0 else 0.0 for h in hits])
    cosine = np.array([h.similarity if u else np.nan for h, u in zip(hits, usable, strict=True)])
    semantic = rel.semantic_signal(cfg.semantic_signal, cosine, fused)
    coact = _coactivation(hits, spread, semantic, cold_seeds)
    recency = np.array([h.recency for h in hits])
    emotional = None
    if emotional_fn is not None:
        # a memory without a comparable vector stays neutral
        emotional = np.where(usable, emotional_fn(vecs), rel.NEUTRAL_EMOTION)
    comps = rel.relevance_components(rng, semantic, coact, emotional, recency)
    relevance = rel.hybrid_relevance(comps, blend)
    weighted = (1 - cfg.activation_share) * relevance + cfg.activation_share * p_retrieve
    return [
        Recalled(h, actr.ActivationResult(float(base[i]), float(s_i[i]), float(p_i[i]), float(noise[i]),
                                          float(total[i])),
                 tuple(float(c) for c in comps[i]), float(relevance[i]), float(weighted[i]),
                 float(coact[i]), float(p_retrieve[i]))
        for i, h in enumerate(hits)
    ]


def _coactivation(hits: Sequence[search.SearchHit], spread: dict[int, float], semantic: np.ndarray,
                  cold_seeds: Sequence[int]) -> np.ndarray:
    """Each candidate's co-activation: what spreading reached it with. Cold (no context), the
    best hits stand in for the memories in context, and the seed that matches the cue best
    (the semantic component) is the memory the cue activates, as co-active as one can be.
    At 0 (no seed spreads to itself) it trailed the partners the other seeds lent 0.75 to: a
    fact typed an hour before lost to imported chats co-accessed meanwhile
    (tests/test_fidelity_process.py). Chosen by rank fusion instead, a weak match in both
    arms outranked a fact full text alone found."""
    coact = np.array([spread.get(h.id, 0.0) for h in hits])
    seeds = set(cold_seeds)
    seeded = [i for i, h in enumerate(hits) if h.id in seeds]
    if seeded:
        coact[max(seeded, key=lambda i: (semantic[i], -i))] = 1.0
    return coact


def _mismatch(hit: search.SearchHit, want_types: Sequence[str]) -> float:
    """Partial matching (plan §2.7): a wrong memory type is a full mismatch; a vector
    from another embed model (not comparable yet) half of one."""
    degree = 0.0
    if want_types and hit.memory_type not in want_types:
        degree += 1.0
    if hit.embedding is not None and hit.similarity is None:
        degree += 0.5
    return degree


def _dormant(hit: search.SearchHit, cfg: RetrievalSettings) -> bool:
    center = hit.alpha / (hit.alpha + hit.beta)
    if center >= cfg.dormant_center or hit.immutable:
        return False
    return not (hit.similarity is not None and hit.similarity > cfg.dormant_similarity)


@contextlib.contextmanager
def _timed(timings: dict[str, float], step: str) -> Iterator[None]:
    """How long `step` took, in ms, into `timings` (the explain view shows them)."""
    started = time.perf_counter()
    yield
    timings[step] = (time.perf_counter() - started) * 1000.0


__all__ = ["ActRSettings", "ArmWeights", "Recalled", "Retrieval", "RetrievalSettings", "Retriever"]
