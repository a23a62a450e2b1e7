"""A fake cross-encoder at the Reranker seam: scores from a table, every call recorded."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass
class RerankCall:
    query: str
    passages: list[str]


@dataclass
class FakeReranker:
    """Scores each passage with `score(query, passage)`; `error` is raised instead when set."""

    score: Callable[[str, str], float]
    name: str = "fake-rerank"
    skipped: bool = False
    skip_reason: str | None = None
    error: Exception | None = None
    calls: list[RerankCall] = field(default_factory=list)

    async def rerank(self, query: str, passages: Sequence[str]) -> list[float]:
        self.calls.append(RerankCall(query, list(passages)))
        if self.error is not None:
            raise self.error
        return [self.score(query, p) for p in passages]
