"""Recall: hybrid search → ACT-R → hybrid relevance + spreading → rerank → mutation.

    1. hybrid search (search.py): top-`limit` by RRF of vector and full text + recency
    2. spreading activation (plan §3.1) from the memories active in context, each as
       much as it bears on the question (its cosine to it), or, on a cold call, from the
       best three hits, through `memory_co_access`: hop 0 ×1.0, hop 1 ×0.3, hop 2 ×0.1
       (DMN); partners that search missed join the candidates
    3. ACT-R (plan §2.7) per candidate: A = B + S + P + ε
    4. hybrid relevance (plan §3.1): five components, Dirichlet-sampled blend whose
       alphas move from the cold-start set to the target set with maturity; the
       semantic component is what search measured (`retrieval.semantic_signal`,
       relevance.semantic_signal), not cosine alone
    5. weighted = relevance · ((1 − a) + a·P(retrieve)), P = 1 / (1 + e^{-(A - τ)/s}),
       a = `activation_share`, plus the user's own word for a question about the user
       (scoring.py: the layers re-rank what matches, they do not bury it)
    6. dormant memories (center below `dormant_center`) leave the candidates unless
       the cue is strong (cosine > `dormant_similarity`, plan §3.8); immutable ones unless
       the question matched them (they are in every context); full text's decisive first
       stays in the top `keep` (scoring.keep_decisive)
    7. rerank top-`limit` → top-`keep`: 0.6·rerank + 0.4·weighted (plan §2.6)
    8. working memory (working.py): unflushed scratch rows matching the query by full
       text, returned beside the memories as not yet consolidated (never mutated)
    9. retrieval-induced mutation (plan §3.8, mutation.py), one transaction: retrieved rows get
       reinforce(0.1) and an access (count, last_accessed, ACT-R presentation),
       near-misses (ranks keep+1 … limit) contradict(0.05), co-access recorded for
       the retrieved set. Weight changes go through the safety choke point. Handed back
       as `Retrieval.writes` (src/db/deferred.py), not run: the loop queues it on the
       turn's tasks, a one-off caller runs it.

`search` does the reads of steps 1-2 and `rank` the rest, so the loop can start the
prompt's reads between the two; `retrieve` is both.
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

from src.db.deferred import Deferred
from src.errors import ProviderError
from src.providers.protocols import Embedder, Reranker
from src.recall import current, in_time, search
from src.recall import relevance as rel
from src.recall.co_access import fetch_partners, fetch_two_hops
from src.recall.dirichlet import DirichletFactors, evolved_alpha
from src.recall.mutation import mutate_after_retrieval
from src.recall.rerank import RerankResult
from src.recall.scoring import Focus, Recalled, asks_of_user, keep_decisive, score
from src.recall.settings import MATURITY_MEMORIES, ActRSettings, ArmWeights, RetrievalSettings
from src.recall.store import StoreSize
from src.recall.timeframe import TimeFrame, asks_before, question_time
from src.recall.working import WorkingHit, WorkingVectors, not_recalled, recall_working
from src.text import clean_text
from src.weights.safety import Safety

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Cue:
    """What one recall is for: the question, and what the moment brings to it. The loop
    builds one per turn (src/loop/recalling.py); a caller with only words passes a string."""

    text: str
    vec: np.ndarray | None = None                  # its RETRIEVAL_QUERY embedding, when already made
    context_vecs: Sequence[np.ndarray] = ()        # the attention focus (context inertia, §3.2)
    # Layer 0/1 (values, goals) as (vector, weight): the identity side of S_i. None: the
    # retriever's own (read when it was made); the loop passes the ones it re-read this cycle.
    layer_vecs: Sequence[tuple[np.ndarray, float]] | None = None
    # The gut's emotional alignment (plan §5.1 → §3.1's emotional component): rows of
    # vectors → values in [0, 1]. None: the neutral 0.5.
    emotional: Callable[[np.ndarray], np.ndarray] | None = None
    active_ids: Sequence[int] = ()                 # memories in context: spreading's seeds
    hops: int = 1                                  # 1 normally, 2 for DMN/introspection
    want_types: Sequence[str] = ()
    exclude_scratch: Sequence[int] = ()            # the input's own scratch rows (not recalled to itself)
    logged_query: str | None = None                # the query as the mutation's evidence keeps it


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
    # step 9, not yet run: the caller queues it (the loop) or runs it (src/db/deferred.py)
    writes: tuple[Deferred, ...] = ()

    @property
    def ids(self) -> list[int]:
        return [m.id for m in self.memories]


@dataclass
class Found:
    """Steps 1-2's reads for one cue, before scoring (`Retriever.search` → `Retriever.rank`)."""

    cue: Cue
    query: str                              # the cue's text, cleaned
    query_vec: np.ndarray | None
    rng: np.random.Generator
    now: datetime
    hits: list[search.SearchHit] = field(default_factory=list)
    early: Spread | None = None             # spreading read beside the search
    blend: np.ndarray | None = None
    working: list[WorkingHit] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    frame: TimeFrame | None = None          # the period the question names (src/recall/in_time.py)
    framed: list[int] = field(default_factory=list)   # that period's memories nearest the question


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
        # the identity layers as read when the retriever was made (a cue may bring newer ones)
        self.layer_vecs = tuple(layer_vecs)
        # the mind's one notion of age (`agent.maturity_memories`), shared with gates and §3.5
        self.maturity_memories = maturity_memories
        self._store_size = StoreSize()
        self._working_vecs = WorkingVectors(embedder)
        # Alphas evolved by consolidation (§4.5) on top of the maturity schedule.
        self.dirichlet = DirichletFactors()

    async def retrieve(self, cue: Cue | str, *, rng: np.random.Generator, now: datetime | None = None,
                       mutate: bool = True) -> Retrieval:
        """Recall memories for `cue` (steps 1-9). With `mutate`, step 9 comes back as
        `Retrieval.writes`, not run: the caller queues or runs it."""
        return await self.rank(await self.search(cue, rng=rng, now=now), mutate=mutate)

    async def search(self, cue: Cue | str, *, rng: np.random.Generator, now: datetime | None = None) -> Found:
        """Steps 1-2's reads: working memory, then hybrid search beside the spreading from the
        memories in context and the Dirichlet draw. The loop starts the prompt's reads after
        this, so they pass while `rank` scores (src/loop/cognitive_loop.py)."""
        cue = Cue(cue) if isinstance(cue, str) else cue
        found = Found(cue, clean_text(cue.text).text, cue.vec, rng, now or datetime.now(UTC))
        if not found.query.strip():
            return found
        cfg, timings = self.settings, found.timings
        with _timed(timings, "embed"):
            if found.query_vec is None:
                found.query_vec = await self._embed_query(found.query, found.degraded)
        arms = cfg.arm_weights(self.embedder.model_name)
        found.frame = question_time(found.query, found.now)
        with _timed(timings, "search"):   # with what does not wait for its hits, side by side
            found.working = await self._working(found.query, cue.exclude_scratch, found.query_vec,
                                                arms.working_floor, found.degraded)
            found.hits, found.early, found.blend, framed = await asyncio.gather(
                self._search(found.query, found.query_vec, arms, found.now),
                self._early_spread(cue.active_ids, cue.hops, found.query_vec, found.now) if cue.active_ids
                else _none(),
                self._blend(rng),
                in_time.in_frame(self.pool, found.frame, found.query_vec, embed_model=self.embedder.model_name,
                                 limit=cfg.frame_join) if found.frame is not None and cfg.frame_join else _none())
            found.framed = framed or []
        return found

    async def rank(self, found: Found, *, mutate: bool = True) -> Retrieval:
        """Steps 2-8 on what `search` found: spreading's partners joined, scored, the dormant
        left out, reranked; step 9 (with `mutate`) handed back in `writes`."""
        cue, query, query_vec, now, timings = found.cue, found.query, found.query_vec, found.now, found.timings
        if not query.strip():
            return Retrieval(query, [], [], {}, False, "empty query", ["empty query: nothing to recall"])
        cfg = self.settings
        arms = cfg.arm_weights(self.embedder.model_name)
        with _timed(timings, "spread"):
            hits, spread = await self._spread_from(found.hits, cue.active_ids, cue.hops, query_vec, now, found.early)
            # what replaced a superseded memory comes with it (src/recall/current.py), and the
            # memories of the period the question names (src/recall/in_time.py)
            joining = current.successors_missing(hits)
            joining += [i for i in in_time.missing(found.framed, hits) if i not in joining]
            hits += await self._fetch_partners(joining, query_vec, now)
        looking_back = asks_before(query)
        with _timed(timings, "score"):
            focus = [query_vec] if query_vec is not None else []
            seeds = [] if cue.active_ids else [h.id for h in hits[:cfg.spread_seeds]]
            layers = self.layer_vecs if cue.layer_vecs is None else cue.layer_vecs
            scoring = Focus(query, focus + list(cue.context_vecs), layers, cue.want_types, cue.emotional,
                            arms.w_recency)
            scored = in_time.boost_in_frame(score(hits, found.rng, now, cfg, scoring, spread, found.blend, seeds),
                                            found.frame, cfg.frame_boost)
            if in_time.asks_date(query):
                scored = in_time.boost_dated(scored, cfg.when_boost, cfg.limit)
            scored = current.current_first(scored, looking_back=looking_back, same_subject=cfg.current_same_subject,
                                           close=cfg.current_close)
            top = self._awake_top(scored)
        with _timed(timings, "rerank"):
            memories, near, reranked = await self._rerank(query, top)
            memories = current.newer_first(memories, looking_back=looking_back)
        writes = ()
        if mutate and memories:
            earlier = set() if looking_back else {m.id for m in memories if m.hit.superseded_by is not None}
            writes = (self._mutation(memories, near, now, query if cue.logged_query is None else cue.logged_query,
                                     found.blend, earlier),)
        return Retrieval(query, memories, near, dict(zip(rel.COMPONENTS, map(float, found.blend), strict=True)),
                         reranked.reranked, reranked.skipped_reason, found.degraded, timings,
                         not_recalled(found.working, {m.hit.content for m in memories}), writes)

    def _mutation(self, memories: list[Recalled], near: list[Recalled], now: datetime, logged_query: str,
                  blend: np.ndarray, earlier: Collection[int] = ()) -> Deferred:
        """Step 9 (plan §3.8): the retrieved reinforced, the near-misses suppressed, co-access
        and outcomes, one transaction; the weight changes' lane keeps their order. The
        `earlier` (superseded, recalled beside their successor) take no part: a superseded
        fact fades, and recall brings it back with every question about its subject."""
        memories = [m for m in memories if m.id not in earlier]
        return Deferred("retrieval mutation", functools.partial(
            mutate_after_retrieval, self.pool, [m.id for m in memories], [r.id for r in near],
            safety=self.safety, at=now, settings=self.settings, query=logged_query,
            contributions=[np.asarray(m.components) * blend for m in memories]), lane="weights")

    async def _working(self, query: str, exclude: Sequence[int], query_vec: np.ndarray | None,
                       floor: float | None, degraded: list[str]) -> list[WorkingHit]:
        """Step 8, read before the search, not beside it: a line the exit gate flushes meanwhile
        is then a memory the later search finds. Side by side, a flush that committed between
        the two reads lost the line to both (a user asking right after saying it, issue 35)."""
        return await recall_working(self.pool, query, limit=self.settings.working_k, exclude=exclude,
                                    query_vec=query_vec, floor=floor,
                                    embed=functools.partial(self._working_vecs.embed, degraded=degraded))

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
            candidates=cfg.candidates, w_context=cfg.context_weight, fts_confidence=arms.fts_confidence,
            w_own=arms.w_own if asks_of_user(query) else 0.0, now=now)

    async def _early_spread(self, active_ids: Sequence[int], hops: int, query_vec: np.ndarray | None,
                            now: datetime) -> Spread:
        """Step 2 beside the search: co-activation from the memories in context, and the rows
        of the `spread_join` + `limit` most activated partners: the search returns at most
        `limit` hits, so these hold the `spread_join` strongest partners it did not find,
        whatever it finds, and no round trip is left after the search."""
        cfg = self.settings
        weights = await search.similarities(self.pool, active_ids, query_vec, embed_model=self.embedder.model_name)
        spread = await self._spread(active_ids, hops, weights)
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
        """Step 6: dormant memories out (unless the cue is strong), and the immutable ones
        unless the question matched them: they are in every context already (the assembler
        injects them), so a recall slot for them is one taken from an answer. The best
        `limit` by weighted score, full text's decisive first kept in the top `keep`."""
        cfg = self.settings
        awake = [r for r in scored if not _dormant(r.hit, cfg) and not _unasked_immutable(r.hit, cfg)]
        awake.sort(key=lambda r: (-r.weighted, r.id))
        return keep_decisive(awake, cfg.keep)[:cfg.limit]

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

    async def _spread(self, seeds: Sequence[int], hops: int,
                      weights: dict[int, float] | None = None) -> dict[int, float]:
        """Co-activation per memory: hop 0 from the seeds, then `hops` further hops (the first
        two in one query, a third, the DMN's, in another). `weights`: how relevant each
        seed is to this focus (cosine to the question, at least 0; a seed without a
        comparable vector NEUTRAL_SEED): a memory in context spreads as much as it bears on
        the question, so hubs of the session's context lend nothing to unrelated questions."""
        if not seeds:
            return {}
        k = self.settings.spread_top_k
        frontier = {s: 1.0 if weights is None else weights.get(s, NEUTRAL_SEED) for s in seeds}
        seed_set = set(seeds)
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


#: The spreading weight of a seed whose relevance to the question cannot be measured.
NEUTRAL_SEED = 0.5


async def _none() -> None:
    return None


class Spread(NamedTuple):
    """Co-activation per memory, and the rows of partners already read (by id)."""

    activation: dict[int, float]
    rows: dict[int, search.SearchHit]


def _most_activated(spread: dict[int, float], found: Collection[int], n: int) -> list[int]:
    """The `n` memories spreading reached most strongly that are not in `found`."""
    return sorted((mid for mid in spread if mid not in found), key=lambda mid: (-spread[mid], mid))[:n]




def _unasked_immutable(hit: search.SearchHit, cfg: RetrievalSettings) -> bool:
    """An immutable memory the question did not match: no word of it, no strong cue."""
    return hit.immutable and hit.fts_rank is None and not (
        hit.similarity is not None and hit.similarity > cfg.dormant_similarity)


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


__all__ = ["ActRSettings", "ArmWeights", "Cue", "Found", "Recalled", "Retrieval", "RetrievalSettings", "Retriever"]
