"""Merge (plan §4.2): clusters of near-duplicate memories become one insight.

Candidates are the newest memories not yet merged, paired with their nearest stored
neighbours (a loose pre-filter on the stored vectors). Their texts are embedded with
task type CLUSTERING and grouped by leader clustering at the embed model's `merge`
threshold (0.85 by default). Each cluster becomes one `reflection` memory (metadata
kind 'insight', via 'merge') with supersedes links to every member; the members get
contradict(0.3) so the insight surfaces first; nothing is deleted.

Idempotent across passes, crashes and restarts: a cluster is identified by the hash
of its sorted member ids, written in the same transaction as its insight; a memory
that is already the source of a merge is not a candidate again (a new memory close
to a merged cluster merges with the cluster's insight instead).

With a language model the insight is one generalising sentence citing its members;
without one it is extractive: the most central member's text, `metadata.extractive`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, Field

from src.consolidation import repository
from src.consolidation.clustering import fingerprint, leader_clusters, most_central
from src.consolidation.derived import write_derived
from src.consolidation.phase import DeepPassContext, PhaseResult
from src.consolidation.structured import Rejected, ask_batched, check_citations, run_guarded
from src.errors import ProviderError
from src.text import excerpt

log = logging.getLogger(__name__)

#: The stored-vector pre-filter sits this far below the CLUSTERING threshold (stored
#: vectors carry the type prefix and another task type).
PREFILTER_MARGIN = 0.1
EMBED_BATCH = 100
ITEM_CHARS = 600


@dataclass(frozen=True)
class Cluster:
    index: int
    ids: list[int]
    texts: list[str]
    central: int               # index into ids of the most central member
    fingerprint: str


class MergedInsight(BaseModel):
    cluster: int = Field(description="the cluster number as given")
    insight: str = Field(description="one sentence that states what the memories have in common, generalised")
    cited_ids: list[int] = Field(description="the memory ids (from that cluster) the insight rests on")


class MergeAnswer(BaseModel):
    insights: list[MergedInsight]


def merge_question(clusters: Sequence[Cluster]) -> str:
    parts = ["Each cluster below holds memories that say nearly the same thing. For every cluster, "
             "write one insight: a single sentence that states what they have in common, generalised "
             "beyond any one occasion. Cite the memory ids it rests on (only ids from that cluster)."]
    for c in clusters:
        parts.append(f"Cluster {c.index}:")
        parts += [f"  [{mid}] {excerpt(t, ITEM_CHARS)}" for mid, t in zip(c.ids, c.texts, strict=True)]
    return "\n".join(parts)


def validate_merge(clusters: Sequence[Cluster], answer: MergeAnswer) -> None:
    by_index = {c.index: c for c in clusters}
    answered = {i.cluster for i in answer.insights}
    missing = sorted(set(by_index) - answered)
    if missing:
        raise Rejected(f"no insight for cluster(s) {missing}")
    for item in answer.insights:
        if item.cluster not in by_index:
            raise Rejected(f"insight names cluster {item.cluster}, which was not given")
        if not item.insight.strip():
            raise Rejected(f"empty insight for cluster {item.cluster}")
        check_citations(item.cited_ids, set(by_index[item.cluster].ids), f"cluster {item.cluster}'s insight")


async def clustering_vectors(ctx: DeepPassContext, texts: Sequence[str]) -> np.ndarray:
    """CLUSTERING embeddings (plan §2.1), in batches the providers accept."""
    out = [await ctx.embedder.embed(list(texts[i:i + EMBED_BATCH]), "CLUSTERING")
           for i in range(0, len(texts), EMBED_BATCH)]
    return np.vstack(out) if out else np.zeros((0, ctx.embedder.dimensions), dtype=np.float32)


async def find_clusters(ctx: DeepPassContext) -> list[Cluster]:
    deep = ctx.settings.deep
    model = ctx.embedder.model_name
    th = ctx.settings.thresholds_for(model)
    pairs = await repository.merge_candidates(ctx.pool, model, deep.merge_candidates, deep.merge_neighbours,
                                              th.merge - PREFILTER_MARGIN)
    ids = sorted({r["a"] for r in pairs} | {r["b"] for r in pairs})
    if len(ids) < deep.merge_min_size:
        return []
    rows = await repository.memories_by_id(ctx.pool, ids)
    texts = [r["content"] for r in rows]
    vecs = await clustering_vectors(ctx, texts)
    groups = await asyncio.to_thread(leader_clusters, vecs, th.merge, deep.merge_min_size)
    clusters = []
    for n, group in enumerate(groups):
        members = [rows[i]["id"] for i in group]
        central = await asyncio.to_thread(most_central, vecs[group])
        clusters.append(Cluster(n + 1, members, [texts[i] for i in group], central, fingerprint(members)))
    known = await repository.known_clusters(ctx.pool, [c.fingerprint for c in clusters])
    return [c for c in clusters if c.fingerprint not in known]


async def run(ctx: DeepPassContext) -> PhaseResult:
    """The merge phase: find new clusters, write one insight per cluster."""
    result = PhaseResult()
    try:
        clusters = await find_clusters(ctx)
    except ProviderError as exc:
        ctx.skip("merge", f"CLUSTERING embeddings unavailable: {exc}")
        result.skipped = str(exc)
        return result
    result.add("clusters", len(clusters))
    if not clusters:
        return result
    written: dict[str, tuple[str, list[int], bool]] = {}
    if ctx.llm is not None and not ctx.budget.can_spend(1):
        # a model is there but this pass's calls are spent: the clusters wait for the next
        # pass rather than being merged extractively for good
        ctx.skip("merge:llm_insight", f"the pass's {ctx.budget.limit} LLM calls are spent; "
                 f"{len(clusters)} cluster(s) wait for the next pass")
        return result
    if run_guarded(ctx, "merge:llm_insight"):
        before = ctx.budget.used
        answers = await ask_batched(ctx, clusters, batch_size=ctx.settings.deep.merge_batch,
                                    question=merge_question, schema=MergeAnswer, validate=validate_merge,
                                    describe=lambda c: {"cluster": c.ids})
        result.calls = ctx.budget.used - before
        for batch, answer in answers:
            by_index = {c.index: c for c in batch}
            for item in answer.insights:
                c = by_index[item.cluster]
                written[c.fingerprint] = (" ".join(item.insight.split()), sorted(set(item.cited_ids)), False)
    else:
        # offline (or out of budget): the extractive insight, the most central member's words
        for c in clusters:
            written[c.fingerprint] = (c.texts[c.central], [c.ids[c.central]], True)
    for c in clusters:
        if c.fingerprint not in written:
            continue                       # its batch failed: recorded, retried next pass
        text, cited, extractive = written[c.fingerprint]

        async def remember(conn, new_id: int, c: Cluster = c) -> None:
            await repository.insert_cluster(conn, c.fingerprint, new_id, ctx.pass_id, c.ids)

        new_id = await write_derived(
            ctx, key=f"cluster:{c.fingerprint}", content=text, memory_type="reflection", sources=c.ids,
            via="merge", extra=remember,
            metadata={"kind": "insight", "via": "merge", "cluster_fingerprint": c.fingerprint,
                      "extractive": extractive, "cited": cited, "cluster_size": len(c.ids)})
        if new_id is not None:
            result.add("insights")
            result.add("superseded", len(c.ids))
            if not extractive:
                ctx.announce.append(text)
    return result
