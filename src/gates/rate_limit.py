"""At most one embedding call per interval during burst pruning (plan §2.9, §3.3).

When the context window overflows, many messages are pruned at once and each must
pass the exit gate, which embeds it. `RateLimitedEmbedder` wraps an Embedder: every
caller's texts join a queue, and one drainer sends them to the real embedder in
one call per `interval_s`, batching whatever queued up meanwhile (same task type,
up to `max_batch` texts, a larger single request going alone). Callers simply
await their vectors. The clock and sleep are injected so tests run instantly.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import numpy as np

from src.providers.protocols import Embedder, TaskType

log = logging.getLogger(__name__)


@dataclass
class _Request:
    texts: list[str]
    task_type: TaskType
    titles: list[str | None] | None
    future: asyncio.Future


class RateLimitedEmbedder:
    """An Embedder that calls its inner embedder at most once per `interval_s`."""

    def __init__(self, inner: Embedder, *, interval_s: float = 5.0, max_batch: int = 100,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        self.inner = inner
        self.model_name = inner.model_name
        self.dimensions = inner.dimensions
        self.interval_s = interval_s
        self.max_batch = max_batch
        self.clock = clock
        self.sleep = sleep
        self.calls = 0
        self._queue: list[_Request] = []
        self._next_at = float("-inf")
        self._drainer: asyncio.Task | None = None

    async def embed(self, texts: Sequence[str], task_type: TaskType,
                    titles: Sequence[str | None] | None = None) -> np.ndarray:
        """Queue `texts`; return their vectors once the drainer's call for them is done."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        future = asyncio.get_running_loop().create_future()
        self._queue.append(_Request(list(texts), task_type,
                                    None if titles is None else list(titles), future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain(), name="rate-limited-embed")
        return await future

    def _take_batch(self) -> list[_Request]:
        first = self._queue[0]
        batch, size = [], 0
        for request in list(self._queue):
            if request.task_type != first.task_type:
                continue
            if batch and size + len(request.texts) > self.max_batch:
                break
            batch.append(request)
            size += len(request.texts)
        for request in batch:
            self._queue.remove(request)
        return [r for r in batch if not r.future.done()]   # cancelled callers are dropped

    async def _drain(self) -> None:
        while self._queue:
            wait = self._next_at - self.clock()
            if wait > 0:
                await self.sleep(wait)
            batch = self._take_batch()
            if not batch:
                continue
            texts = [t for r in batch for t in r.texts]
            titles = None
            if any(r.titles is not None for r in batch):
                titles = [t for r in batch for t in (r.titles or [None] * len(r.texts))]
            self._next_at = self.clock() + self.interval_s
            self.calls += 1
            if len(batch) > 1:
                log.debug("rate-limited embedding: %d requests batched into one call of %d texts",
                          len(batch), len(texts))
            try:
                vectors = await self.inner.embed(texts, batch[0].task_type, titles)
            except Exception as exc:  # every waiting caller gets the failure, not a hang
                for r in batch:
                    if not r.future.done():
                        r.future.set_exception(exc)
                continue
            start = 0
            for r in batch:
                part = vectors[start:start + len(r.texts)]
                start += len(r.texts)
                if not r.future.done():
                    r.future.set_result(part)
