"""A failed deep pass backs off and resumes (issues 24 item 5, 27 item 2), against the real database.

Fake phases at the deep pass's phase seam (one writes an insight through the production
writer and announces it, one fails as a model over its context window did); the clock
is injected into the pass and the scheduler.
"""

from __future__ import annotations

import json
import logging
import random
from datetime import UTC, datetime, timedelta

from src.consolidation.deep.deep_pass import (
    ConsolidationParts,
    announce_hook,
    check_trigger,
    run_deep_pass,
)
from src.consolidation.deep.derived import DerivedMemory, write_derived
from src.consolidation.deep.phase import Phase, PhaseResult
from src.consolidation.service import Consolidation
from src.consolidation.settings import ConsolidationSettings
from src.errors import CallCancelled, ProviderRejected
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.fakes import HashEmbedder

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
OVERFLOW = "HTTP 400: request (4387 tokens) exceeds the available context size (4096 tokens)"
REFUSED = "HTTP 403: the key may not use this model"
INSIGHT = "Small projects deploy with one simple shell script."
SETTINGS = ConsolidationSettings(deep={"retry_base_s": 300, "retry_max_s": 1000, "phase_max_failures": 3})


class Writer:
    """A phase that writes one insight (the production writer) and announces it."""

    def __init__(self, sources: list[int]):
        self.sources = sources
        self.runs = 0

    async def __call__(self, ctx) -> PhaseResult:
        self.runs += 1
        result = PhaseResult()
        new_id = await write_derived(ctx, DerivedMemory(INSIGHT, "reflection", sources=self.sources, via="insight",
                                                        metadata={"kind": "insight", "via": "insight"}),
                                     key="insight:0", contradict_sources=False)
        if new_id is not None:
            result.add("insights")
            ctx.announce.append(INSIGHT)
        return result


class Flaky:
    """A phase that fails its first `fails` runs as a model over its window did, then works."""

    def __init__(self, fails: int, error: Exception | None = None):
        self.fails = fails
        self.runs = 0
        self.error = error or ProviderRejected(OVERFLOW, provider="scripted", status=400)

    async def __call__(self, ctx) -> PhaseResult:
        self.runs += 1
        if self.runs <= self.fails:
            raise self.error
        return PhaseResult(counts={"contextualized": 1})


class Last:
    def __init__(self):
        self.runs = 0

    async def __call__(self, ctx) -> PhaseResult:
        self.runs += 1
        return PhaseResult(counts={"last": 1})


async def _setup(pool, fails: int, error: Exception | None = None):
    embedder = HashEmbedder()
    sources = await MemoryStore(pool, embedder).store_many(
        [NewMemory(f"I deploy my small projects with one simple shell script, note {i}") for i in range(2)])
    writer, flaky, last = Writer(sources), Flaky(fails, error), Last()
    phases = [Phase("insights", writer), Phase("contextual", flaky, needs_llm=False), Phase("last", last)]
    return embedder, phases, writer, flaky, last


async def _pass(pool, embedder, phases, now, announced, settings=SETTINGS):
    return await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=None, safety=Safety(),
                                                  settings=settings),
                               trigger="timer", now=now, rng=random.Random(3), phases=phases,
                               after=[announce_hook(_collect(announced))])


async def test_a_failed_phase_fails_the_pass_which_backs_off_and_resumes_there(pool):
    embedder, phases, writer, flaky, last = await _setup(pool, fails=2)
    announced: list[tuple[str, str]] = []

    first = await _pass(pool, embedder, phases, T0, announced)
    # recorded as failed, never done; the insight written before the failure is not announced yet
    assert (first.status, first.failed_phase, first.failures) == ("failed", "contextual", 1)
    assert OVERFLOW in first.error and "phase contextual failed" in first.summary()
    assert timedelta(seconds=300) <= first.retry_after - T0 < timedelta(seconds=360)
    assert announced == []
    row = await pool.fetchrow("SELECT status, failed_phase, failures, error, retry_after FROM consolidation_passes")
    assert (row["status"], row["failed_phase"], row["failures"]) == ("failed", "contextual", 1)
    assert row["retry_after"] == first.retry_after
    checkpoints = {r["phase"]: (r["status"], r["failures"]) for r in await pool.fetch(
        "SELECT phase, status, failures FROM consolidation_checkpoints")}
    assert checkpoints == {"insights": ("done", 0), "contextual": ("failed", 1)}
    assert (writer.runs, flaky.runs, last.runs) == (1, 1, 0)

    # the schedule backs off: nothing starts before retry_after, not even on importance
    settings = ConsolidationSettings(deep={"importance_threshold": 0.5})
    await pool.execute("""INSERT INTO gate_decisions (at, gate, source_tag, content_preview, action, relevance,
                          emotional_charge, reason) VALUES ($1, 'exit', 'external_user', 'x', 'persist', 1, 1, 't')""",
                       T0)
    early = await check_trigger(pool, settings, first.retry_after - timedelta(seconds=1), T0)
    assert early.trigger is None and early.retry_after == first.retry_after
    assert (await check_trigger(pool, settings, first.retry_after, T0)).trigger == "retry"

    # the scheduler (clock injected) starts nothing early, then resumes the same pass at the failed phase
    clock = [first.retry_after - timedelta(seconds=60)]
    service = Consolidation(ConsolidationParts(pool, embedder=embedder, llm=None, safety=Safety(),
                                               settings=SETTINGS),
                            phases=phases, clock=lambda: clock[0], after=[announce_hook(_collect(announced))])
    await service._check_triggers()
    assert await pool.fetchval("SELECT count(*) FROM consolidation_passes") == 1 and flaky.runs == 1
    clock[0] = first.retry_after
    await service._check_triggers()
    second = service.last_report
    assert (second.pass_id, second.resumed, second.status, second.failures) == (first.pass_id, True, "failed", 2)
    # exponential: twice the first wait, from the second failure
    assert timedelta(seconds=600) <= second.retry_after - first.retry_after < timedelta(seconds=660)
    assert (writer.runs, flaky.runs, last.runs) == (1, 2, 0)     # earlier phases not run again

    clock[0] = second.retry_after
    await service._check_triggers()
    third = service.last_report
    assert (third.pass_id, third.status) == (first.pass_id, "done")
    assert (writer.runs, flaky.runs, last.runs) == (1, 3, 1)
    # the insight was written once and announced once, when the pass was done
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE content = $1", INSIGHT) == 1
    assert announced == [("consolidation", INSIGHT)]
    assert await pool.fetchval("SELECT count(*) FROM consolidation_passes") == 1
    assert await pool.fetchval("SELECT count(*) FROM consolidation_failures") == 0
    statuses = {r["phase"]: (r["status"], r["failures"]) for r in await pool.fetch(
        "SELECT phase, status, failures FROM consolidation_checkpoints")}
    assert statuses == {"insights": ("done", 0), "contextual": ("done", 2), "last": ("done", 0)}
    line = await service.status_line()
    assert line.startswith(f"consolidation: last deep pass #{first.pass_id} (timer) done ")


def _collect(announced: list[tuple[str, str]]):
    async def submit(source: str, text: str):
        announced.append((source, text))
    return submit


async def test_a_phase_failing_n_times_in_a_row_is_skipped_with_one_row_and_one_warning(pool, caplog):
    embedder, phases, writer, flaky, last = await _setup(pool, fails=100)
    announced: list[tuple[str, str]] = []
    caplog.set_level(logging.INFO, logger="src.consolidation")

    now = T0
    delays = []
    for _ in range(2):
        report = await _pass(pool, embedder, phases, now, announced)
        assert report.status == "failed" and announced == []
        delays.append(report.retry_after - now)
        now = report.retry_after
    # back-off doubles: 300 s, then 600 s (from the failure: plus the moments each attempt took)
    assert [int(d.total_seconds()) // 60 for d in delays] == [5, 10]

    done = await _pass(pool, embedder, phases, now, announced)
    assert done.status == "done" and done.given_up() == ["contextual"]
    assert "gave up on: contextual" in done.summary()
    assert (writer.runs, flaky.runs, last.runs) == (1, 3, 1)
    failures = await pool.fetch("SELECT pass_id, phase, error FROM consolidation_failures")
    assert len(failures) == 1 and failures[0]["phase"] == "contextual" and failures[0]["pass_id"] == done.pass_id
    assert failures[0]["error"].startswith("failed 3 times in a row, skipped in this pass; last error: ")
    assert OVERFLOW in failures[0]["error"]
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("src.consolidation")]
    assert len(warnings) == 1 and "phase contextual failed 3 times in a row" in warnings[0].getMessage()
    assert await pool.fetchval("SELECT status FROM consolidation_checkpoints WHERE phase = 'contextual'") == "skipped"
    assert announced == [("consolidation", INSIGHT)]
    # a new pass tries the phase again: failures count per pass
    fresh = await _pass(pool, embedder, phases, now + timedelta(hours=2), announced)
    assert fresh.pass_id != done.pass_id and (fresh.status, fresh.failures) == ("failed", 1)
    assert flaky.runs == 4 and writer.runs == 2 and announced == [("consolidation", INSIGHT)]


async def test_the_back_off_doubles_up_to_its_cap(pool):
    embedder, phases, *_ = await _setup(pool, fails=100)
    settings = ConsolidationSettings(deep={"retry_base_s": 300, "retry_max_s": 1000, "phase_max_failures": 10})
    now = T0
    for expected in (300, 600, 1000, 1000):
        report = await _pass(pool, embedder, phases, now, [], settings)
        # from the failure: the pass's `now` plus the moments the attempt took
        assert timedelta(seconds=expected) <= report.retry_after - now < timedelta(seconds=expected + 60)
        now = report.retry_after


async def test_a_call_the_mind_cancelled_leaves_the_pass_running_without_a_failure(pool):
    embedder, phases, writer, flaky, last = await _setup(pool, fails=1, error=CallCancelled("the user's turn"))
    first = await _pass(pool, embedder, phases, T0, [])
    assert first.status == "interrupted" and first.failed_phase == "contextual"
    row = await pool.fetchrow("SELECT status, failures FROM consolidation_passes")
    assert (row["status"], row["failures"]) == ("running", 0)
    assert (await check_trigger(pool, SETTINGS, T0, T0)).trigger == "resume"
    again = await _pass(pool, embedder, phases, T0, [])
    assert (again.pass_id, again.status) == (first.pass_id, "done")
    assert (writer.runs, flaky.runs, last.runs) == (1, 2, 1)
    assert json.loads(await pool.fetchval("SELECT counts FROM consolidation_passes"))["last"]["counts"] == {"last": 1}


async def test_a_scripted_model_failing_in_contextual_fails_the_pass_which_resumes_there(pool):
    from src.consolidation.deep.deep_pass import DEEP_PHASES
    from tests.consolidation_fakes import INSIGHT as SCRIPTED_INSIGHT
    from tests.consolidation_fakes import ConsolidationModel, language_model

    class Failing(ConsolidationModel):
        """Refuses contextual requests (a request the endpoint rejects; a context overflow
        is learned and split by the provider layer now, so this is another refusal)."""

        overflow = True

        async def complete(self, request):
            if self.kind_of(request) == "contextual" and self.overflow:
                self.requests.append(request)
                raise ProviderRejected(REFUSED, provider=self.provider, status=403)
            return await super().complete(request)

    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many(
        [NewMemory(f"I deploy my small projects with one simple shell script instead of kubernetes, note {i}")
         for i in range(5)])
    phases = [p for p in DEEP_PHASES if p.name in ("questions", "insights", "contextual")]
    backend = Failing()
    announced: list[tuple[str, str]] = []

    async def run(now):
        return await run_deep_pass(ConsolidationParts(pool, embedder=embedder,
                                                      llm=language_model(backend, pool), safety=Safety(),
                                                      settings=SETTINGS),
                                   trigger="manual", now=now, rng=random.Random(3), phases=phases,
                                   after=[announce_hook(_collect(announced))])

    first = await run(T0)
    assert backend.kinds() == ["questions", "insights", "contextual"]
    assert first.status == "failed" and first.failed_phase == "contextual" and REFUSED in first.error
    assert first.calls == 3                              # the refused request counts against the pass's budget
    assert await pool.fetchval("SELECT status FROM consolidation_passes") == "failed"
    assert announced == []

    backend.overflow = False
    second = await run(first.retry_after)
    assert second.pass_id == first.pass_id and second.status == "done" and second.resumed
    # resumed at the failed phase: questions and insights were not asked or written again
    assert backend.kinds()[3:] and set(backend.kinds()[3:]) == {"contextual"}
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE metadata->>'via' = 'insight'") == 1
    assert announced == [("consolidation", SCRIPTED_INSIGHT)]
    assert second.phases["contextual"]["counts"]["contextualized"] > 0
