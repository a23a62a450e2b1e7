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
(phase.py), so nothing is written twice.

After a pass: the after-pass hooks run (the subconscious centroid is recomputed in
full, plan §4.2 / SESSION_HANDOFF #11), the Phase C monitors observe the cycle, and
new insights and tensions are offered to the loop as `consolidation` input.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
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
from src.consolidation.deep.phase import CallBudget, DeepPassContext, Phase, PhaseResult
from src.consolidation.evolution import dirichlet_evolution, forgetting, gate_tuning, promotion
from src.consolidation.monitors import run_monitors
from src.consolidation.settings import ConsolidationSettings
from src.providers.protocols import Embedder, LanguageModel
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


@dataclass
class PassReport:
    """What one deep pass did (also in its consolidation_passes row)."""

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

    def summary(self) -> str:
        counts = ", ".join(f"{k} {v}" for p in self.phases.values() for k, v in p.get("counts", {}).items() if v)
        skipped = f"; skipped: {', '.join(sorted(self.skipped))}" if self.skipped else ""
        return (f"deep pass #{self.pass_id} ({self.trigger}{', resumed' if self.resumed else ''}) {self.status} "
                f"in {self.seconds:.1f} s: {self.calls}/{self.budget} LLM calls, "
                f"{self.tokens_in}+{self.tokens_out} tokens; {counts or 'nothing new'}{skipped}")


def llm_or_none(llm: LanguageModel | None) -> LanguageModel | None:
    """The model a pass may call, or None in reflex mode."""
    return llm if llm is not None and getattr(llm, "configured", False) else None


async def run_deep_pass(
    pool: asyncpg.Pool, *, embedder: Embedder, llm: LanguageModel | None, safety: Safety,
    settings: ConsolidationSettings, trigger: str, now: datetime | None = None,
    rng: random.Random | None = None, phases: Sequence[Phase] | None = None,
    importance: float | None = None, after: Sequence[AfterPass] = (),
) -> PassReport | None:
    """Run (or resume) one deep pass. None when another process is running one."""
    started = time.perf_counter()
    phases = DEEP_PHASES if phases is None else phases
    key = settings.deep.lock_key
    async with pool.acquire() as lock_conn:
        if not await lock_conn.fetchval("SELECT pg_try_advisory_lock($1)", key):
            log.info("a deep pass is already running elsewhere; not starting another")
            return None
        try:
            report = await _run_locked(pool, embedder=embedder, llm=llm_or_none(llm), safety=safety,
                                       settings=settings, trigger=trigger, now=now or datetime.now(UTC),
                                       rng=rng or random.Random(), phases=phases, importance=importance)
        finally:
            await lock_conn.execute("SELECT pg_advisory_unlock($1)", key)
    report.seconds = time.perf_counter() - started
    for hook in after:
        try:
            await hook(report)
        except Exception:  # a hook must not undo a finished pass
            log.exception("an after-pass hook failed")
    log.info("%s", report.summary())
    return report


async def _run_locked(pool, *, embedder, llm, safety, settings, trigger, now, rng, phases, importance) -> PassReport:
    running = await checkpoints.running_pass(pool)
    budget = CallBudget(settings.deep.max_llm_calls)
    if running is not None:
        pass_id, resumed = running["id"], True
        trigger = running["trigger"]
        budget.spend(running["llm_calls"], running["tokens_in"], running["tokens_out"])
        await checkpoints.mark_resumed(pool, pass_id)
        log.info("resuming deep pass #%d left unfinished by an earlier run", pass_id)
    else:
        pass_id, resumed = await checkpoints.open_pass(pool, trigger, importance, budget.limit), False
    row = await checkpoints.pass_row(pool, pass_id)
    previous = json.loads(row["counts"]) if row["counts"] else {}
    skipped = json.loads(row["skipped"]) if row["skipped"] else {}
    ctx = DeepPassContext(pool=pool, embedder=embedder, llm=llm, safety=safety, settings=settings, now=now,
                          rng=rng, pass_id=pass_id, budget=budget, skipped_steps=skipped)
    report = PassReport(pass_id, trigger, "running", resumed, 0, budget.limit, 0, 0, previous)
    finished = await checkpoints.done_phases(pool, pass_id)
    try:
        for phase in phases:
            if phase.name in finished:
                continue
            ctx.phase = phase.name
            ctx.done = await checkpoints.start_phase(pool, pass_id, phase.name)
            if phase.needs_llm and llm is None:
                ctx.skip(phase.name, "no language model is configured (reflex mode)")
                result = PhaseResult(skipped=ctx.skipped_steps[phase.name])
            else:
                result = await phase.run(ctx)
            report.phases[phase.name] = result.as_json()
            await checkpoints.finish_phase(pool, pass_id, phase.name, result.as_json())
            await checkpoints.save_progress(pool, pass_id, calls=budget.used, tokens_in=budget.tokens_in,
                                           tokens_out=budget.tokens_out, counts=report.phases,
                                           skipped=ctx.skipped_steps)
    except asyncio.CancelledError:
        # SIGTERM / shutdown: the pass stays 'running' and the next one resumes it
        await asyncio.shield(checkpoints.save_progress(
            pool, pass_id, calls=budget.used, tokens_in=budget.tokens_in, tokens_out=budget.tokens_out,
            counts=report.phases, skipped=ctx.skipped_steps))
        raise
    except Exception as exc:
        log.exception("deep pass #%d failed in phase %s", pass_id, ctx.phase)
        report.status, report.error = "failed", f"{ctx.phase}: {type(exc).__name__}: {exc}"
        await checkpoints.finish_pass(pool, pass_id, "failed", report.error)
    else:
        report.status = "done"
        await checkpoints.finish_pass(pool, pass_id, "done")
    report.calls, report.tokens_in, report.tokens_out = budget.used, budget.tokens_in, budget.tokens_out
    report.skipped = dict(ctx.skipped_steps)
    report.announced = ctx.announce[: settings.deep.announce_max]
    return report


def monitors_hook(pool: asyncpg.Pool, safety: Safety) -> AfterPass:
    """Phase C monitors once per deep cycle, after checking their input.

    The center summary the monitors read is kept by triggers; once a pass it is compared
    with a full scan of memories and rebuilt if they differ (a write that bypassed the
    triggers), so a wrong summary lives at most until the next pass."""
    async def hook(report: PassReport) -> None:
        if report.status == "done":
            await verify_summary(pool)
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
    """Why the scheduler would start a pass now (None: not yet)."""

    trigger: str | None
    importance: float
    since: datetime | None


async def check_trigger(pool: asyncpg.Pool, settings: ConsolidationSettings, now: datetime,
                        epoch: datetime) -> TriggerState:
    """Timer or cumulative importance, whichever first; a pass left running resumes at once.

    Before the first pass ever, the timer counts from `epoch` (the scheduler's start), so a
    newborn mind does not consolidate an empty store the moment it starts.
    """
    if await checkpoints.running_pass(pool) is not None:
        return TriggerState("resume", 0.0, None)
    last = await checkpoints.last_pass_start(pool)
    since = last or epoch
    importance = await checkpoints.cumulative_importance(pool, last)
    if importance >= settings.deep.importance_threshold:
        return TriggerState("importance", importance, since)
    if (now - since).total_seconds() >= settings.deep.interval_s:
        return TriggerState("timer", importance, since)
    return TriggerState(None, importance, since)
