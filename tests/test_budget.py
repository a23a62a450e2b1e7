"""The background budget (issue 24): the rolling counts, the seed from llm_calls, whose work a
call is, and what a spent budget holds back. Real PostgreSQL; the model is the provider-seam fake."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from src.errors import BudgetSpent
from src.providers.budget import BackgroundBudget, BudgetLeft
from src.providers.caller import CONSOLIDATION, caller_for
from src.providers.costs import CallUsage, CostLedger
from src.providers.settings import BudgetSettings, ModelPrice
from tests.fakes_llm import ScriptedLLM

NOW = datetime(2026, 11, 25, 3, 0, tzinfo=UTC)
PRICES = {"m": ModelPrice(input_per_mtok=1000.0, output_per_mtok=0.0)}    # $0.001 per input token


def _budget(**settings) -> BackgroundBudget:
    return BackgroundBudget(BudgetSettings(**{"hourly_calls": 6, "idle_share": 0.5, "daily_cost_usd": 1.0,
                                              **settings}), now=lambda: NOW)


def _ledger(pool, at: list[datetime]) -> CostLedger:
    return CostLedger(pool, session_id="s", prices=PRICES, now=lambda: at[0])


async def test_the_ledger_writes_whose_work_each_call_was_and_tells_the_budget(pool):
    at = [NOW]
    ledger, budget = _ledger(pool, at), _budget()
    ledger.observers.append(budget.observe)
    await ledger.record(provider="p", model="m", purpose="system1_answer", ok=True, usage=CallUsage(10))   # the user's
    dmn, user = caller_for("dmn").charge, caller_for("user").charge   # what the calls say
    await ledger.record(provider="p", model="m", purpose="system1_answer", ok=True, usage=CallUsage(20), caller=dmn)
    await ledger.record(provider="p", model="m", purpose="fok", ok=True, caller=user)   # nobody's budget
    await ledger.record(provider="p", model="m", purpose="consolidation:insights", ok=False,
                        caller=CONSOLIDATION.charge)
    await ledger.record(provider="p", model="m", purpose="embed:CLUSTERING", ok=True, usage=CallUsage(5),
                        caller="consolidation")
    rows = await pool.fetch("SELECT purpose, caller FROM llm_calls ORDER BY id")
    assert [tuple(r) for r in rows] == [("system1_answer", None), ("system1_answer", "dmn"), ("fok", None),
                                        ("consolidation:insights", "consolidation"),
                                        ("embed:CLUSTERING", "consolidation")]
    left = budget.left(NOW)
    # the embedding row costs but is not a call; the failed attempt is a call
    assert (left.calls_used, left.idle_used, left.cost_used) == (2, 1, Decimal("0.025"))


def test_the_counts_roll_with_the_hour_and_the_day():
    budget = _budget()

    class Rec:
        def __init__(self, at, caller, cost="0.1", purpose="system1_answer"):
            self.at, self.caller, self.cost_usd, self.purpose = at, caller, Decimal(cost), purpose

    for minutes, caller in ((-23 * 60, "consolidation"), (-50, "dmn"), (-40, "gut"), (-10, "consolidation")):
        budget.observe(Rec(NOW + timedelta(minutes=minutes), caller))
    budget.observe(Rec(NOW, None))                          # the user's call: not counted
    left = budget.left(NOW)
    assert (left.calls_used, left.idle_used, left.cost_used) == (3, 2, Decimal("0.4"))
    assert left.calls_left("dmn") == 1 and left.calls_left("consolidation") == 3
    later = budget.left(NOW + timedelta(minutes=15))      # the dmn call (50 min ago) left the hour
    assert (later.calls_used, later.idle_used, later.cost_used) == (2, 1, Decimal("0.4"))
    next_day = budget.left(NOW + timedelta(hours=23, minutes=5))
    assert (next_day.calls_used, next_day.cost_used) == (0, Decimal("0.3"))


@pytest.mark.parametrize(("calls", "idle", "cost", "dmn", "consolidation", "reason"), [
    (0, 0, "0", 3, 6, None),
    (3, 3, "0", 0, 3, "idle thought made 3 of its 3 calls this hour"),
    (6, 0, "0", 0, 0, "internal work made 6 of 6 calls this hour"),
    (1, 0, "1.00", 0, 0, "$1.0000 of $1.00 spent by internal work in 24 h"),
])
def test_what_each_caller_may_still_spend(calls, idle, cost, dmn, consolidation, reason):
    left = BudgetLeft(True, calls, 6, idle, 3, Decimal(cost), Decimal("1.0"))
    assert (left.calls_left("dmn"), left.calls_left("gut"), left.calls_left("consolidation")) == (
        dmn, dmn, consolidation)
    assert left.spent_reason("dmn") == reason
    off = BudgetLeft(False, 99, 6, 99, 3, Decimal(9), Decimal("1.0"))
    assert off.allows("dmn") and off.line() == "background budget: off (budget.enabled: false)"


async def test_the_count_is_seeded_from_the_ledgers_last_day(pool):
    rows = [(NOW - timedelta(minutes=5), "dmn", "system1_answer", "0.01"),
            (NOW - timedelta(minutes=5, seconds=20), "dmn", "fok", "0.01"),
            (NOW - timedelta(minutes=30), "consolidation", "consolidation:insights", "0.02"),
            (NOW - timedelta(minutes=30), "consolidation", "embed:CLUSTERING", "0.005"),
            (NOW - timedelta(hours=3), "gut", "system1_answer", "0.04"),
            (NOW - timedelta(hours=25), "consolidation", "consolidation:merge", "5"),    # older than a day
            (NOW - timedelta(minutes=1), None, "system1_answer", "7")]                   # the user's
    await pool.executemany(
        """INSERT INTO llm_calls (at, provider, model, purpose, cost_usd, ok, caller)
           VALUES ($1, 'p', 'm', $3, $4::numeric, true, $2)""", rows)
    budget = _budget()
    assert await budget.seed(pool, NOW) == 4            # minute × caller groups of the last 24 h
    left = budget.left(NOW)
    assert (left.calls_used, left.idle_used, left.cost_used) == (3, 2, Decimal("0.085"))
    assert left.line() == ("background budget: 3 of 6 calls this hour (idle thought 2 of 3), "
                           "$0.0850 of $1.00 in 24 h")
    later = budget.left(NOW + timedelta(minutes=32))       # the consolidation call left the hour
    assert (later.calls_used, later.idle_used) == (2, 2)


async def test_the_seed_reads_the_partial_index_not_the_ledger(pool):
    """20,000 of the user's calls and 50 internal ones: the seed is a range of the partial index."""
    await pool.execute(
        """INSERT INTO llm_calls (at, provider, model, purpose, ok, caller)
           SELECT $1::timestamptz - g * INTERVAL '1 minute', 'p', 'm', 'system1_answer', true,
                  CASE WHEN g % 400 = 0 THEN 'dmn' END
             FROM generate_series(1, 20000) AS g""", NOW)
    await pool.execute("ANALYZE llm_calls")
    from src.providers.budget import _SEED
    plan = "\n".join(r[0] for r in await pool.fetch(f"EXPLAIN {_SEED}", NOW - timedelta(hours=24)))
    assert "idx_llm_calls_background" in plan and "Seq Scan" not in plan
    budget = _budget()
    await budget.seed(pool, NOW)
    assert budget.left(NOW).idle_used == 0 and budget.left(NOW).calls_used == 0   # none in the last hour
    assert await pool.fetchval("SELECT count(*) FROM llm_calls WHERE caller = 'dmn' AND at > $1",
                               NOW - timedelta(hours=24)) == 3


async def test_a_spent_budget_drops_internal_impulses_and_passes_the_users():
    budget = _budget(hourly_calls=2, idle_share=0.5)
    sent = []

    async def submit(source, text, **kwargs):
        sent.append((source, text))
        return "queued"

    gated = budget.gate(submit)

    class Rec:
        at, caller, cost_usd, purpose = NOW, "gut", Decimal(0), "system1_answer"

    budget.observe(Rec())
    assert await gated("gut", "unease", now=NOW) is None               # idle share (1 call) spent
    assert await gated("dmn", "the bicycle", now=NOW) is None
    assert await gated("consolidation", "an insight", now=NOW) == "queued"   # consolidation's half is left
    assert await gated("user", "hello", now=NOW) == "queued"
    assert sent == [("consolidation", "an insight"), ("user", "hello")]
    assert budget.refused == {"gut": 1, "dmn": 1}
    assert budget.status_line(NOW) == (
        "background budget: 1 of 2 calls this hour (idle thought 1 of 1), $0.0000 of $1.00 in 24 h — idle "
        "thought's share spent (idle thought made 1 of its 1 calls this hour): the DMN and the gut wait; "
        "held back this session: dmn 1, gut 1")


async def test_the_tickers_model_is_refused_while_the_budget_is_spent_and_charged_while_not(pool):
    budget = _budget(hourly_calls=1)
    llm = ScriptedLLM(meta=lambda q, schema: {"contradicts": False})
    guarded = budget.guard(llm, "consolidation")
    from pydantic import BaseModel

    class Answer(BaseModel):
        contradicts: bool

    assert guarded.configured and guarded.model == "scripted-1"
    assert (await guarded.meta_call_structured("q", Answer, purpose="consolidation:contradiction_scan")).value \
        == Answer(contradicts=False)
    assert [c.caller for c in llm.calls] == [CONSOLIDATION]   # the call said it was consolidation's

    class Rec:
        at, caller, cost_usd, purpose = NOW, "consolidation", Decimal(0), "consolidation:contradiction_scan"

    budget.observe(Rec())
    with pytest.raises(BudgetSpent, match=r"background budget spent \(internal work made 1 of 1 calls this "
                                          r"hour\); skipped consolidation:contradiction_scan"):
        await guarded.meta_call_structured("q", Answer, purpose="consolidation:contradiction_scan")
    assert len(llm.calls) == 1                               # the refused call never reached the model
