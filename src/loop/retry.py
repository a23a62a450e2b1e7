"""A cycle that failed before delivery: its input back to attention, within a budget
(issue 11, Deliver 4); past the budget the user is told, "kept" only when it is."""

from __future__ import annotations

import logging

from src.loop.acting import Say
from src.loop.degraded import failure_note
from src.loop.intake import Intake
from src.loop.outage import describe
from src.text import size

log = logging.getLogger(__name__)


async def requeue_failed(intake: Intake, exc: BaseException, *, cycle_retries: int, say: Say) -> bool:
    """A cycle failed before delivery (database restarting, a bug): its input goes back to
    the queue, up to `cycle_retries` times. True: the input was given up and the user told;
    False: it waits for another cycle (or the cycle failed before attention took one)."""
    turn = intake.release()
    if turn is None:   # failed before allocation: the inputs are still queued
        return False
    attempts = max(intake.attempts.get(part.id, 0) for part in turn.parts) + 1
    if attempts <= cycle_retries:
        intake.requeue(turn, attempts)
        return False
    for part in turn.parts:
        kept = intake.forget(part)
        log.error("giving up on %s input after %d failed cycles (%s)", part.source, attempts, size(part.record_text))
        log.debug("input given up: %r", part.record_text[:80])
        if part.source == "user":
            await say(failure_note(part.text, attempts, describe(exc), kept))
    return True
