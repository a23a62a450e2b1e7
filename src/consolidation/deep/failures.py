"""A failed deep pass backs off and resumes (issues 24 item 5, 27 item 2).

A phase fails when it raises (phase.py says what raises: an outage, a request the model
refuses such as a context overflow, an embedder that cannot judge relevance, a bug).
Then:

- its checkpoint says 'failed' with the error and how many times in a row it failed,
  keeping what it announced before failing (checkpoints.fail_phase);
- the pass stops there and says 'failed' (never 'done'), with the phase, the error and
  when it may be resumed: `retry_base_s * 2^(failures - 1)` after the failure, at most
  `retry_max_s`, where `failures` counts the pass's failed attempts in a row. The
  scheduler starts nothing else meanwhile (deep_pass.check_trigger); `/consolidate`
  resumes it at once (the guardian asked);
- the next attempt resumes the same pass at the failed phase: earlier phases are
  checkpointed 'done' and are not run, written or announced again, and the failed
  phase skips the units it already wrote (their answers were saved before any write);
  the pass keeps its call budget across attempts, so retries cannot spend more than one
  pass may;
- a phase that fails `phase_max_failures` times in a row is given up for this pass:
  checkpoint 'skipped', one `consolidation_failures` row, one WARNING, and the pass
  goes on to the next phase. Earlier failures are logged at INFO with their traceback
  (the log file), so a failure that repeats is one line on the terminal, not one per try.

Failures are counted per pass: a new pass tries every phase again.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from src.consolidation.deep import checkpoints
from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.settings import DeepSettings

log = logging.getLogger(__name__)


class PhaseFailed(Exception):
    """A phase failed and the pass stops at it (it is resumed after the back-off)."""

    def __init__(self, phase: str, error: str, failures: int):
        super().__init__(f"{phase}: {error}")
        self.phase = phase
        self.error = error
        self.failures = failures


def retry_delay(deep: DeepSettings, failures: int) -> timedelta:
    """How long a pass that failed `failures` times in a row waits before it is resumed."""
    return timedelta(seconds=min(deep.retry_max_s, deep.retry_base_s * 2.0 ** max(0, failures - 1)))


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


async def phase_failed(ctx: DeepPassContext, phase: str, exc: Exception, announced: list[str]) -> PhaseResult:
    """Record the failure; raise PhaseFailed, or give the phase up (returns its result)."""
    error = describe(exc)
    failures = await checkpoints.fail_phase(ctx.pool, ctx.pass_id, phase, error, announced)
    limit = ctx.settings.deep.phase_max_failures
    log.info("deep pass %d: phase %s failed (%d of %d times in a row before it is skipped): %s",
             ctx.pass_id, phase, failures, limit, error)
    # the traceback prints every chained error, a provider SDK's too, whose text may quote
    # the model's reply (issue 39): at DEBUG
    log.debug("deep pass %d: phase %s failed", ctx.pass_id, phase, exc_info=exc)
    if failures < limit:
        raise PhaseFailed(phase, error, failures) from exc
    why = f"failed {failures} times in a row, skipped in this pass; last error: {error}"
    await checkpoints.record_failure(ctx.pool, ctx.pass_id, phase, why, [])
    log.warning("deep pass %d: phase %s %s", ctx.pass_id, phase, why)
    result = PhaseResult(skipped=why)
    result.data["gave_up_after"] = failures
    return result


async def pass_failed(ctx: DeepPassContext, failed: PhaseFailed, *, earlier_failures: int,
                      at: datetime) -> tuple[int, datetime]:
    """Mark the pass failed at `failed.phase`; (its failures in a row, when it may resume)."""
    failures = earlier_failures + 1
    retry_after = at + retry_delay(ctx.settings.deep, failures)
    await checkpoints.fail_pass(ctx.pool, ctx.pass_id, phase=failed.phase, error=str(failed),
                                failures=failures, retry_after=retry_after)
    return failures, retry_after
