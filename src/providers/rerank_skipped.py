"""The reranker when no cross-encoder is available: the stage is skipped, and says why.

Retrieval then keeps its weighted score as the final score; the start-up
report prints `skip_reason`.
"""

from __future__ import annotations

from collections.abc import Sequence

from src.errors import ProviderSkipped


class SkippedReranker:
    """Reranker stand-in: `skipped` is true and `rerank` raises ProviderSkipped."""

    name = "none"
    skipped = True

    def __init__(self, reason: str):
        self.skip_reason: str | None = reason

    async def warm_up(self) -> None:
        """Nothing to load."""

    async def rerank(self, query: str, passages: Sequence[str]) -> list[float]:
        raise ProviderSkipped(f"reranking skipped: {self.skip_reason}", provider=self.name)
