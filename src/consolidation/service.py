"""Consolidation as background tasks of the running mind: the light ticker and the
deep scheduler. Neither blocks the loop (they only await the database and providers;
CPU work goes to threads) and both stop cleanly on shutdown: a deep pass cancelled
mid-way stays 'running' in its row and is resumed by the next pass.

`/consolidate` starts a pass in the background too (`start_deep_pass`) and returns at
once: awaited at the prompt, a pass held the next message for its whole length (issue
26; measured: notes.md). Its summary is handed to the caller's `done` when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from src.consolidation.deep import checkpoints
from src.consolidation.deep.deep_pass import (
    DEEP_PHASES,
    AfterPass,
    ConsolidationParts,
    PassReport,
    Submit,
    announce_hook,
    centroid_hook,
    check_trigger,
    monitors_hook,
    run_deep_pass,
)
from src.consolidation.deep.phase import Phase
from src.consolidation.light.ticker import LightTicker
from src.consolidation.settings import ConsolidationSettings
from src.db.availability import AwayNotice, tick_until_stopped
from src.providers.budget import BackgroundBudget
from src.providers.caller import CONSOLIDATION
from src.providers.charged import ChargedModel

log = logging.getLogger(__name__)


class Consolidation:
    """Owns the ticker and the scheduler; `/consolidate` and `/status` talk to it."""

    def __init__(self, parts: ConsolidationParts, *, submit: Submit | None = None,
                 recompute_centroid: Callable[[], Awaitable[object]] | None = None,
                 rng: random.Random | None = None, phases: Sequence[Phase] = DEEP_PHASES,
                 clock: Callable[[], datetime] | None = None, budget: BackgroundBudget | None = None,
                 after: Sequence[AfterPass] = ()):
        """`parts`: what the ticker and every pass work with. `budget`: spend within the
        background budget (src/providers/budget.py): while it is spent the scheduled pass
        waits (its trigger stays due) and the ticker's model layer is skipped; a scheduled
        pass gets no more calls than are left. `/consolidate` is the guardian's request:
        counted, never held back. `after`: hooks run after every pass, after the service's
        own (monitors, the centroid, announcements)."""
        llm = parts.llm
        # every model call of consolidation says it is consolidation's (src/providers/caller.py)
        parts = replace(parts, llm=ChargedModel(llm, CONSOLIDATION)) if llm is not None else parts
        self.parts = parts
        self.pool = parts.pool
        self.settings = parts.settings
        self.rng = rng or random.Random()
        self.phases = phases
        self.budget = budget
        ticker_llm = budget.guard(llm, "consolidation") if budget is not None and llm is not None else parts.llm
        self.ticker = LightTicker(parts.pool, embedder=parts.embedder, llm=ticker_llm, safety=parts.safety,
                                  settings=parts.settings, rng=self.rng)
        hooks: list[AfterPass] = [monitors_hook(parts.pool, parts.safety)]
        if recompute_centroid is not None:
            hooks.append(centroid_hook(recompute_centroid))
        if submit is not None:
            hooks.append(announce_hook(submit))
        self.after: Sequence[AfterPass] = [*hooks, *after]
        self.last_report: PassReport | None = None
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._manual: asyncio.Task | None = None      # the pass /consolidate started
        self._pass_lock = asyncio.Lock()
        self.clock = clock or (lambda: datetime.now(UTC))    # the scheduler's and the passes' now
        self._epoch = self.clock()

    def start(self) -> None:
        """Start the enabled background tasks."""
        if self.settings.light.enabled:
            self._tasks.append(asyncio.create_task(self.ticker.run(stop=self._stop), name="light-consolidation"))
        if self.settings.deep.enabled:
            self._tasks.append(asyncio.create_task(self._schedule(), name="deep-consolidation"))

    async def stop(self, timeout_s: float = 3.0) -> None:
        """Stop the tasks; a pass still running after `timeout_s` is cancelled (it resumes later)."""
        self._stop.set()
        tasks, self._tasks = self._tasks, []
        if self._manual is not None and not self._manual.done():
            tasks.append(self._manual)
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=timeout_s)
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def deep_pass(self, trigger: str = "manual", importance: float | None = None) -> PassReport | None:
        """Run (or resume) a deep pass now; None when one is already running."""
        if self._pass_lock.locked():
            return None
        async with self._pass_lock:
            parts = replace(self.parts, settings=self._within_budget(trigger))
            report = await run_deep_pass(parts, trigger=trigger, rng=self.rng, now=self.clock(),
                                         importance=importance, after=self.after, phases=self.phases)
        if report is not None:
            self.last_report = report
        return report

    def start_deep_pass(self, done: Callable[[str], object], trigger: str = "manual") -> bool:
        """Start (or resume) a deep pass in the background; `done` gets one line when it ends.

        False when a pass is already running in this process (the scheduler's, or one
        started here before). A pass another process runs is found out by the pass itself
        (its advisory lock) and said through `done`.
        """
        if self._pass_lock.locked() or (self._manual is not None and not self._manual.done()):
            return False
        self._manual = asyncio.create_task(self._background_pass(done, trigger), name="deep-consolidation-manual")
        return True

    async def _background_pass(self, done: Callable[[str], object], trigger: str) -> None:
        try:   # the guardian's request, still consolidation's spending (its model says so)
            report = await self.deep_pass(trigger)
        except asyncio.CancelledError:
            done("the deep pass was stopped by the shutdown; the next one resumes it")
            raise
        except Exception as exc:  # a task's error would otherwise go unseen until exit
            log.exception("the deep pass started on request failed")
            done(f"the deep pass failed: {type(exc).__name__}: {exc}")
            return
        done(report.summary() if report is not None else "a deep pass is already running elsewhere; "
             "try again later")

    async def _schedule(self) -> None:
        """Check the deep pass's triggers at start and every `check_interval_s`."""
        await tick_until_stopped(self._check_triggers, every_s=self.settings.deep.check_interval_s,
                                 notice=AwayNotice(log, "deep consolidation scheduler"), stop=self._stop,
                                 wait_first=False)

    async def _check_triggers(self) -> None:
        """One scheduler check: start (or resume) a pass when a trigger fires. A failed pass
        waiting for its back-off starts nothing (deep_pass.check_trigger)."""
        state = await check_trigger(self.pool, self.settings, self.clock(), self._epoch)
        if state.trigger is not None and (self.budget is None or self.budget.allows("consolidation", self.clock())):
            await self.deep_pass(state.trigger, state.importance)   # a spent budget: the trigger stays due

    def _within_budget(self, trigger: str) -> ConsolidationSettings:
        """The settings a pass runs with: a scheduled pass may make no more model calls than
        the background budget has left (the guardian's `/consolidate` is not capped)."""
        if self.budget is None or trigger == "manual":
            return self.settings
        left = self.budget.calls_left("consolidation", self.clock())
        if left >= self.settings.deep.max_llm_calls:
            return self.settings
        deep = self.settings.deep.model_copy(update={"max_llm_calls": left})
        return self.settings.model_copy(update={"deep": deep})

    async def status_line(self) -> str:
        """The last pass's calls and outcome, for /status."""
        row = await checkpoints.last_pass(self.pool)
        if row is None:
            return "consolidation: no deep pass yet"
        when = (row["finished_at"] or row["started_at"]).strftime("%Y-%m-%d %H:%M")
        failed = ""
        if row["status"] == "failed":
            resume = row["retry_after"].strftime("%Y-%m-%d %H:%M") if row["retry_after"] else "next check"
            failed = f" in phase {row['failed_phase']} (failed attempts in a row: {row['failures']}; resumes {resume})"
        return (f"consolidation: last deep pass #{row['id']} ({row['trigger']}) {row['status']}{failed} {when}, "
                f"{row['llm_calls']}/{row['llm_budget']} LLM calls, {row['tokens_in']}+{row['tokens_out']} tokens; "
                f"light ticks this session: {self.ticker.ticks}")
