"""The deep pass (plan §4.2): trigger, one pass at a time, checkpoints, the phase list.

Trigger, whichever first: the timer (`deep.interval_s`, hourly) since the last pass, or
the cumulative importance of what the exit gate wrote since then above
`deep.importance_threshold` (checkpoints.cumulative_importance; notes.md says why).
Also on demand (`/consolidate`, `python -m src.consolidation run --deep`).

One pass at a time across processes: a session-level advisory lock held on one
connection for the whole pass (a killed process's connection drops, and the lock
with it). Every pass has a row in consolidation_passes and a checkpoint per phase;
a pass left 'running' by a crash, SIGKILL or SIGTERM is resumed by the next one at
its first unfinished phase, and inside a phase at its first unfinished unit
(phase.py), so nothing is written twice. A phase that raises stops the pass as
'failed'; it is resumed at that phase after an exponential back-off, and a phase that
fails too often is skipped (failures.py).

After a pass: the after-pass hooks run (the subconscious centroid is recomputed in
full, plan §4.2 / SESSION_HANDOFF #11), the Phase C monitors observe the cycle, and —
once the pass is done, never after a failure — new insights and tensions are offered
to the loop as `consolidation` input, each once however often the pass was resumed
(a phase's announcements are kept with its checkpoint).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from src.consolidation.deep import (
    checkpoints,
    contextual,
    insights,
    merge,
    narrative,
    recompress,
    reconsolidation,
    temporal_replay,
    tension,
)
from src.consolidation.deep.failures import PhaseFailed, describe, pass_failed, phase_failed
from src.consolidation.deep.phase import CallBudget, DeepPassContext, Phase, PhaseResult
from src.consolidation.evolution import dirichlet_evolution, forgetting, gate_tuning, promotion
from src.consolidation.monitors import run_monitors
from src.consolidation.settings import ConsolidationSettings
from src.errors import CallCancelled
from src.providers.protocols import Embedder, LanguageModel
from src.recall import kind_counts
from src.skills import consolidation as skills_phase
from src.weights.center_summary import verify_summary
from src.weights.safety import Safety

log = logging.getLogger(__name__)

#: The deep pass, in order. Appending a phase is one line here.
DEEP_PHASES: list[Phase] = [
    Phase("questions", insights.run_questions, needs_llm=True),
    Phase("insights", insights.run_insights, needs_llm=True),
    Phase("merge", merge.run),
    Phase("narrative", narrative.run, needs_llm=True),
    Phase("tension", tension.run),
    Phase("recompress", recompress.run, needs_llm=True),
    # part 2 (plan §4.3–§4.6)
    Phase("reconsolidation", reconsolidation.run, needs_llm=True),
    Phase("promotion", promotion.run),
    Phase("decay", forgetting.run),
    Phase("temporal_replay", temporal_replay.run),
    Phase("outcomes", dirichlet_evolution.run),
    Phase("gate_tuning", gate_tuning.run),
    Phase("contextual", contextual.run, needs_llm=True),
    Phase("skills", skills_phase.run, needs_llm=True),     # issue 17: procedural patterns -> skills
]

AfterPass = Callable[["PassReport"], Awaitable[None]]
Submit = Callable[[str, str], Awaitable[Any]]


@dataclass(frozen=True)
class ConsolidationParts:
    """The store, providers, weight safety and settings consolidation works with.

    Every deep pass and the light ticker get these same five; `llm` is None offline.
    """

    pool: asyncpg.Pool
    embedder: Embedder
    llm: LanguageModel | None
    safety: Safety
    settings: ConsolidationSettings


@dataclass
class PassReport:
    """What one deep pass did (also in its consolidation_passes row).

    `status` 'done', 'failed' (failures.py: stopped at `failed_phase`, resumed from
    `retry_after`) or 'interrupted' (a call the mind cancelled; the pass stays 'running'
    and the next check resumes it); `announced` is empty unless the pass is done.
    """

    pass_id: int
    trigger: str
    status: str
    resumed: bool
    calls: int
    budget: int
    tokens_in: int
    tokens_out: int
    phases: dict[str, dict] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    announced: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    failed_phase: str | None = None
    failures: int = 0
    retry_after: datetime | None = None

    def given_up(self) -> list[str]:
        """Phases skipped in this pass after failing too often."""
        return [name for name, p in self.phases.items() if (p.get("data") or {}).get("gave_up_after")]

    def summary(self) -> str:
        head = (f"deep pass #{self.pass_id} ({self.trigger}{', resumed' if self.resumed else ''}) {self.status} "
                f"in {self.seconds:.1f} s: {self.calls}/{self.budget} LLM calls, "
                f"{self.tokens_in}+{self.tokens_out} tokens; ")
        if self.status == "interrupted":
            return head + f"stopped in phase {self.failed_phase} ({self.error}); the next check resumes it"
        if self.status == "failed":
            when = f"{self.retry_after:%Y-%m-%d %H:%M} UTC" if self.retry_after else "the next check"
            return (head + f"phase {self.failed_phase} failed ({self.error}); failed attempts in a row: "
                    f"{self.failures}; it resumes at that phase after {when}")
        counts = ", ".join(f"{k} {v}" for p in self.phases.values() for k, v in p.get("counts", {}).items() if v)
        gave_up = f"; gave up on: {', '.join(self.given_up())} (consolidation_failures)" if self.given_up() else ""
        skipped = f"; skipped: {', '.join(sorted(self.skipped))}" if self.skipped else ""
        return head + f"{counts or 'nothing new'}{gave_up}{skipped}"


def llm_or_none(llm: LanguageModel | None) -> LanguageModel | None:
    """The model a pass may call, or None in reflex mode."""
    return llm if llm is not None and getattr(llm, "configured", False) else None


async def run_deep_pass(
    parts: ConsolidationParts, *, trigger: str, now: datetime | None = None,
    rng: random.Random | None = None, phases: Sequence[Phase] | None = None,
    importance: float | None = None, after: Sequence[AfterPass] = (),
) -> PassReport | None:
    """Run (or resume) one deep pass. None when another process is running one."""
    started = time.perf_counter()
    phases = DEEP_PHASES if phases is None else phases
    key = parts.settings.deep.lock_key
    async with parts.pool.acquire() as lock_conn:
        if not await lock_conn.fetchval("SELECT pg_try_advisory_lock($1)", key):
            log.info("a deep pass is already running elsewhere; not starting another")
            return None
        try:
            report = await _run_locked(replace(parts, llm=llm_or_none(parts.llm)), trigger=trigger,
                                       now=now or datetime.now(UTC), rng=rng or random.Random(),
                                       phases=phases, importance=importance)
        finally:   # a session lock: the pool does not reset connections (src/db/pool.py keep_session)
            try:
                await lock_conn.execute("SELECT pg_advisory_unlock($1)", key)
            except BaseException:
                lock_conn.terminate()     # a connection that may still hold the lock never goes back
                raise
    report.seconds = time.perf_counter() - started
    for hook in after:
        try:
            await hook(report)
        except Exception:  # a hook must not undo a finished pass
            log.exception("an after-pass hook failed")
    log.info("%s", report.summary())
    return report


async def _open(pool, settings: ConsolidationSettings, trigger: str, importance) -> tuple[int, bool, str, CallBudget]:
    """The pass to run: the unfinished one (running or failed) with its spend, else a new one."""
    budget = CallBudget(settings.deep.max_llm_calls)
    pending = await checkpoints.resumable_pass(pool)
    if pending is None:
        return await checkpoints.open_pass(pool, trigger, importance, budget.limit), False, trigger, budget
    budget.spend(pending["llm_calls"], pending["tokens_in"], pending["tokens_out"])
    await checkpoints.mark_resumed(pool, pending["id"])
    log.info("resuming deep pass #%d %s", pending["id"], "at the phase that failed" if pending["status"] == "failed"
             else "left unfinished by an earlier run")
    return pending["id"], True, pending["trigger"], budget


async def _run_locked(parts: ConsolidationParts, *, trigger: str, now: datetime, rng: random.Random,
                      phases: Sequence[Phase], importance: float | None) -> PassReport:
    clock = time.monotonic()
    pool, settings = parts.pool, parts.settings
    pass_id, resumed, trigger, budget = await _open(pool, settings, trigger, importance)
    row = await checkpoints.pass_row(pool, pass_id)
    previous = json.loads(row["counts"]) if row["counts"] else {}
    skipped = json.loads(row["skipped"]) if row["skipped"] else {}
    ctx = DeepPassContext(pool=pool, embedder=parts.embedder, llm=parts.llm, safety=parts.safety,
                          settings=settings, now=now, rng=rng, pass_id=pass_id, budget=budget,
                          skipped_steps=skipped)
    # what finished phases of this pass announced (a resumed pass announces them once, at its end)
    ctx.announce = [t for p in previous.values() for t in (p.get("data") or {}).get("announce", [])]
    report = PassReport(pass_id, trigger, "running", resumed, 0, budget.limit, 0, 0, previous)
    try:
        await _run_phases(ctx, phases, report)
    except asyncio.CancelledError:
        # SIGTERM / shutdown: the pass stays 'running' and the next one resumes it
        await asyncio.shield(_save(ctx, report))
        raise
    except CallCancelled as exc:
        # a call ended by the mind (the user's turn, shutdown): stays 'running', resumed next check
        await _save(ctx, report)
        report.status, report.error, report.failed_phase = "interrupted", describe(exc), ctx.phase
    except PhaseFailed as failed:
        await _save(ctx, report)
        report.status, report.error, report.failed_phase = "failed", failed.error, failed.phase
        report.failures, report.retry_after = await pass_failed(
            ctx, failed, earlier_failures=row["failures"], at=now + timedelta(seconds=time.monotonic() - clock))
    else:
        report.status = "done"
        await checkpoints.finish_pass(pool, pass_id, "done")
    report.calls, report.tokens_in, report.tokens_out = budget.used, budget.tokens_in, budget.tokens_out
    report.skipped = dict(ctx.skipped_steps)
    report.announced = ctx.announce[: settings.deep.announce_max] if report.status == "done" else []
    return report


async def _run_phases(ctx: DeepPassContext, phases: Sequence[Phase], report: PassReport) -> None:
    """Each phase not finished in this pass, in order; a failure stops here (PhaseFailed)."""
    finished = await checkpoints.done_phases(ctx.pool, ctx.pass_id)
    for phase in phases:
        if phase.name in finished:
            continue
        ctx.phase = phase.name
        ctx.done = await checkpoints.start_phase(ctx.pool, ctx.pass_id, phase.name)
        said = len(ctx.announce)
        ctx.announce += await checkpoints.announced_before(ctx.pool, ctx.pass_id, phase.name)
        status = "done"
        try:
            result = await _run_phase(ctx, phase)
        except CallCancelled:
            raise                                 # the mind took the model back: not a failure
        except Exception as exc:                  # CancelledError is not an Exception: it passes
            result = await phase_failed(ctx, phase.name, exc, ctx.announce[said:])
            status = "skipped"
        if ctx.announce[said:]:
            result.data["announce"] = ctx.announce[said:]
        report.phases[phase.name] = result.as_json()
        await checkpoints.finish_phase(ctx.pool, ctx.pass_id, phase.name, result.as_json(), status)
        await _save(ctx, report)


async def _run_phase(ctx: DeepPassContext, phase: Phase) -> PhaseResult:
    if phase.needs_llm and ctx.llm is None:
        ctx.skip(phase.name, "no language model is configured (reflex mode)")
        return PhaseResult(skipped=ctx.skipped_steps[phase.name])
    return await phase.run(ctx)


async def _save(ctx: DeepPassContext, report: PassReport) -> None:
    """The pass row's running totals (after every phase and when the pass stops)."""
    b = ctx.budget
    await checkpoints.save_progress(ctx.pool, ctx.pass_id, calls=b.used, tokens_in=b.tokens_in,
                                    tokens_out=b.tokens_out, counts=report.phases, skipped=ctx.skipped_steps)


def monitors_hook(pool: asyncpg.Pool, safety: Safety) -> AfterPass:
    """Phase C monitors once per deep cycle, after checking their input.

    The center summary the monitors read is kept by triggers; once a pass it is compared
    with a full scan of memories and rebuilt if they differ (a write that bypassed the
    triggers), so a wrong summary lives at most until the next pass. The memory kind counts
    (src/recall/kind_counts.py) are checked the same way."""
    async def hook(report: PassReport) -> None:
        if report.status == "done":
            await verify_summary(pool)
            await kind_counts.verify(pool)
            await run_monitors(pool, safety, "consolidation")
    return hook


def announce_hook(submit: Submit) -> AfterPass:
    """New insights and tensions reach the loop as `consolidation` input (plan §3.4)."""
    async def hook(report: PassReport) -> None:
        for text in report.announced:
            await submit("consolidation", text)
    return hook


def centroid_hook(recompute: Callable[[], Awaitable[Any]]) -> AfterPass:
    """Full recomputation of the subconscious centroid after each pass (plan §4.2).

    `recompute` is the gut's: today gates/emotion.StoreCentroid.recompute, later the
    two-centroid gut (src/gut.py) plugs its own in here.
    """
    async def hook(report: PassReport) -> None:
        if report.status == "done":
            await recompute()
    return hook


@dataclass
class TriggerState:
    """Why the scheduler would start a pass now (None: not yet; `retry_after`: a failed
    pass waits for its back-off)."""

    trigger: str | None
    importance: float
    since: datetime | None
    retry_after: datetime | None = None


async def check_trigger(pool: asyncpg.Pool, settings: ConsolidationSettings, now: datetime,
                        epoch: datetime) -> TriggerState:
    """Timer or cumulative importance, whichever first; an unfinished pass comes first.

    A pass left running resumes at once ('resume'); a failed one at its `retry_after`
    ('retry', failures.py), and until then no pass starts. Before the first pass ever,
    the timer counts from `epoch` (the scheduler's start), so a newborn mind does not
    consolidate an empty store the moment it starts.
    """
    pending = await checkpoints.resumable_pass(pool)
    if pending is not None:
        if pending["status"] == "running":
            return TriggerState("resume", 0.0, None)
        if pending["retry_after"] is None or now >= pending["retry_after"]:
            return TriggerState("retry", 0.0, None)
        return TriggerState(None, 0.0, None, retry_after=pending["retry_after"])
    last = await checkpoints.last_pass_start(pool)
    since = last or epoch
    importance = await checkpoints.cumulative_importance(pool, last)
    if importance >= settings.deep.importance_threshold:
        return TriggerState("importance", importance, since)
    if (now - since).total_seconds() >= settings.deep.interval_s:
        return TriggerState("timer", importance, since)
    return TriggerState(None, importance, since)
