"""Writes that must land after a reply was delivered, retried until they do.

Marking the input journal `answered` and the cycle's thought_log row happen after
delivery. When the database is away at that moment the reply must not be sent again
(issue 11, Deliver 5) and the writes must not be lost either: they wait here, in
order, and the next cycle (or the next call to `flush`) writes them. Bounded: past
`limit` the oldest write is dropped with a warning (a journal row left `pending`
is then answered once more after a restart, never lost).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

Write = Callable[[], Awaitable[object]]


class Backlog:
    """Ordered, bounded queue of pending writes."""

    def __init__(self, limit: int = 1000):
        self._writes: deque[tuple[str, Write]] = deque()
        self.limit = limit
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._writes)

    def add(self, what: str, write: Write) -> None:
        if len(self._writes) >= self.limit:
            lost, _ = self._writes.popleft()
            self.dropped += 1
            log.warning("write backlog full (%d): dropped the oldest pending write (%s)", self.limit, lost)
        self._writes.append((what, write))

    async def flush(self) -> None:
        """Run the writes oldest first; the first failure propagates and keeps the rest."""
        while self._writes:
            _, write = self._writes[0]
            await write()
            self._writes.popleft()
