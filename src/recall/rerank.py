"""The rerank stage (plan §2.6): the best 20 hybrid hits → a cross-encoder → the best 5.

    final = 0.6 * rerank + 0.4 * weighted

`weighted` is the hit's hybrid score min-max normalised across the reranked batch
(best 1, worst 0), so it shares the cross-encoder's [0, 1] scale. Without a
reranker (none configured, the offline default; skipped; failed; malformed
scores) the stage keeps the hybrid order, `final` = `weighted`, and
`RerankResult.skipped_reason` says why. Re-exported by src/recall/search.py.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from src.errors import ProviderError, ProviderSkipped
from src.providers.protocols import Reranker
from src.recall.hit import SearchHit

log = logging.getLogger(__name__)

#: Plan §2.6: final = 0.6 * rerank + 0.4 * weighted.
RERANK_WEIGHT = 0.6
#: Characters of each memory the cross-encoder sees. It reads 512 tokens of query +
#: passage; tokenising a megabyte memory to keep 2,000 characters of it is waste.
RERANK_PASSAGE_CHARS = 4000


@dataclass(frozen=True)
class RankedHit:
    hit: SearchHit
    weighted: float                   # hit.score, min-max normalised over the reranked batch
    rerank: float | None              # cross-encoder score in [0, 1]; None when skipped
    final: float                      # 0.6 * rerank + 0.4 * weighted, or weighted when skipped


@dataclass(frozen=True)
class RerankResult:
    hits: list[RankedHit]
    skipped_reason: str | None        # why no reranking happened; None when it did
    # the rest of the batch, scored the same way: recall's near misses show their own final
    # score, not a default 0 (issue 26)
    rest: list[RankedHit] = field(default_factory=list)

    @property
    def reranked(self) -> bool:
        return self.skipped_reason is None


def normalise_scores(scores: Sequence[float]) -> list[float]:
    """Min-max to [0, 1] across the batch: best 1, worst 0; all equal (or one) → all 1."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi - lo <= 0:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


async def rerank_hits(
    reranker: Reranker | None,
    query: str,
    hits: Sequence[SearchHit],
    keep: int = 5,
    *,
    top: int = 20,
    max_passage_chars: int = RERANK_PASSAGE_CHARS,
    hit_scores: Sequence[float] | None = None,
) -> RerankResult:
    """Plan §2.6: rerank the best `top` hits, keep the best `keep`.

    final = 0.6 * rerank + 0.4 * weighted, where `weighted` is the hybrid score
    min-max normalised across the reranked batch (the cross-encoder's scores are in
    [0, 1], so both parts share a scale). When the reranker is absent, skipped or
    fails, `final` = `weighted`, the order is the hybrid order, and
    `skipped_reason` says why. `hit_scores`: each hit's score when it is not `hit.score` (recall's
    weighted score: a hit copied with it cost a frozen dataclass's 24-field init per hit).
    """
    scored = zip(hits, hit_scores, strict=True) if hit_scores is not None else ((h, h.score) for h in hits)
    ordered = sorted(scored, key=lambda hs: (-hs[1], hs[0].id))[:top]
    batch = [h for h, _ in ordered]
    weighted = normalise_scores([s for _, s in ordered])
    reason = _skip_reason(reranker)
    scores: list[float] | None = None
    if reason is None and batch:
        passages = [h.content[:max_passage_chars] for h in batch]
        try:
            scores = list(await reranker.rerank(query, passages))
        except ProviderSkipped as exc:
            reason = str(exc)
        except ProviderError as exc:
            reason = f"reranker {reranker.name} failed: {exc}"
            log.warning("%s; keeping the hybrid order", reason)
        if scores is not None and (len(scores) != len(batch)
                                   or not all(math.isfinite(s) for s in scores)):
            reason = (f"reranker {reranker.name} returned {len(scores)} scores for "
                      f"{len(batch)} passages (or a non-finite score)")
            log.warning("%s; keeping the hybrid order", reason)
            scores = None
    if scores is None:
        ranked = [RankedHit(h, w, None, w) for h, w in zip(batch, weighted, strict=True)]
    else:
        ranked = [RankedHit(h, w, float(s), RERANK_WEIGHT * float(s) + (1 - RERANK_WEIGHT) * w)
                  for h, w, s in zip(batch, weighted, scores, strict=True)]
        ranked.sort(key=lambda r: (-r.final, -r.weighted, r.hit.id))
    return RerankResult(ranked[:keep], reason, ranked[keep:])


def _skip_reason(reranker: Reranker | None) -> str | None:
    if reranker is None:
        return "no reranker configured"
    if reranker.skipped:
        return reranker.skip_reason or f"reranker {reranker.name} is skipped"
    return None

