"""A cycle that failed before delivery: its input back to attention, within a budget
(issue 11, Deliver 4); past the budget the user is told, "kept" only when it is."""

from __future__ import annotations

import asyncio
import logging

from src.loop.degraded import failure_note
from src.loop.outage import describe

log = logging.getLogger("src.loop.cognitive_loop")


async def requeue_failed(loop, exc: BaseException) -> int:
    """A cycle failed before delivery (database restarting, a bug): its input goes back
    to the queue, up to `cycle_retries` times; return the attempts so far (0: given up)."""
    turn, loop._turn, loop._current = loop._turn, None, None
    if turn is None:   # failed before allocation: the inputs are still queued
        return loop._failing
    attempts = max(loop._failed.get(part.id, 0) for part in turn.parts) + 1
    if attempts <= loop.cfg.cycle_retries:
        for part in turn.parts:
            loop._failed[part.id] = attempts
            loop.queue.push(part)
        return attempts
    for part in turn.parts:
        loop._failed.pop(part.id, None)
        kept = loop._refs.pop(part.id, None) is not None
        loop._buffered.discard(part.id)
        log.error("giving up on %s input after %d failed cycles: %r", part.source, attempts, part.text[:80])
        if part.source == "user":
            result = loop.deliver(failure_note(part.text, attempts, describe(exc), kept))
            if asyncio.iscoroutine(result):
                await result
    return 0
