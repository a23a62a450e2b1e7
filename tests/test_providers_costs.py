"""The energy cost ledger (plan §4.8) on a real PostgreSQL: rows, totals, /cost, summary line."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from src.providers.costs import (
    CallUsage,
    CostLedger,
    CostTotals,
    Pricing,
    cost_summary_line,
    format_cost_table,
)
from src.providers.settings import ModelPrice, ProvidersSettings

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self, at: datetime = NOW):
        self.at = at

    def __call__(self) -> datetime:
        return self.at


def test_pricing_is_per_million_tokens_and_exact():
    pricing = Pricing(ProvidersSettings().prices)
    assert pricing.cost("claude-sonnet-4-5", 1_000, 500) == Decimal("0.01050000")
    assert pricing.cost("gemini-2.5-flash-lite", 31, 5) == Decimal("0.00000510")
    assert pricing.cost("gemini-embedding-001", 1_000_000, 0) == Decimal("0.15000000")


def test_a_model_without_a_price_costs_zero_and_is_logged_once(caplog):
    pricing = Pricing({"m": ModelPrice(input_per_mtok=1, output_per_mtok=2)})
    with caplog.at_level(logging.INFO, logger="src.providers.costs"):
        assert pricing.cost("llama3.2", 100, 100) == Decimal(0)
        assert pricing.cost("llama3.2", 100, 100) == Decimal(0)
    assert caplog.messages == ["no price for model llama3.2 in providers.prices; its calls are recorded at $0"]


async def test_a_call_becomes_one_row(pool):
    ledger = CostLedger(pool, session_id="s1", prices=ProvidersSettings().prices, now=Clock())
    await ledger.record(provider="anthropic", model="claude-sonnet-4-5", purpose="escalation", ok=True,
                        usage=CallUsage(1000, 500, latency_ms=812.5))
    await ledger.record(provider="gemini", model="gemini-2.5-flash-lite", purpose="reply", ok=False,
                        usage=CallUsage(latency_ms=30.0),
                        error="ProviderUnavailable: gemini answered HTTP 503: overloaded")
    rows = await pool.fetch("SELECT at, session_id, provider, model, purpose, tokens_in, tokens_out, cost_usd,"
                            " latency_ms, ok, error FROM llm_calls ORDER BY id")
    assert [tuple(r) for r in rows] == [
        (NOW, "s1", "anthropic", "claude-sonnet-4-5", "escalation", 1000, 500, Decimal("0.01050000"), 812.5,
         True, None),
        (NOW, "s1", "gemini", "gemini-2.5-flash-lite", "reply", 0, 0, Decimal("0E-8"), 30.0, False,
         "ProviderUnavailable: gemini answered HTTP 503: overloaded"),
    ]
    assert ledger.pending == 0


async def _history(pool) -> tuple[CostLedger, Clock]:
    clock = Clock(NOW - timedelta(hours=30))
    old = CostLedger(pool, session_id="s0", prices=ProvidersSettings().prices, now=clock)
    await old.record(provider="anthropic", model="claude-sonnet-4-5", purpose="escalation", ok=True,
                     usage=CallUsage(100_000, 10_000))  # $0.45, lifetime only
    clock.at = NOW - timedelta(hours=2)
    await old.record(provider="gemini", model="gemini-2.5-flash-lite", purpose="reply", ok=True,
                     usage=CallUsage(1_000_000, 250_000))  # $0.20, last 24 h, not this session
    clock.at = NOW
    current = CostLedger(pool, session_id="s1", prices=ProvidersSettings().prices, now=clock)
    await current.record(provider="gemini", model="gemini-2.5-flash-lite", purpose="reply", ok=True,
                         usage=CallUsage(500_000, 125_000))  # $0.10
    await current.record(provider="gemini", model="gemini-2.5-flash-lite", purpose="reply", ok=False,
                         error="RateLimited: 429")
    await current.record(provider="gemini", model="gemini-embedding-001", purpose="embed:RETRIEVAL_QUERY",
                         ok=True, usage=CallUsage(200_000))  # $0.03
    return current, clock


async def test_totals_by_model_and_purpose_for_session_day_and_lifetime(pool):
    ledger, _ = await _history(pool)
    totals = await ledger.totals()
    summary = [(r.model, r.purpose, (r.session.calls, r.session.failed, r.session.cost_usd),
                (r.day.calls, r.day.cost_usd), (r.lifetime.calls, r.lifetime.tokens_in, r.lifetime.cost_usd))
               for r in totals.rows]
    assert summary == [
        ("claude-sonnet-4-5", "escalation", (0, 0, Decimal(0)), (0, Decimal(0)),
         (1, 100_000, Decimal("0.45"))),
        ("gemini-2.5-flash-lite", "reply", (2, 1, Decimal("0.10")), (3, Decimal("0.30")),
         (3, 1_500_000, Decimal("0.30"))),
        ("gemini-embedding-001", "embed:RETRIEVAL_QUERY", (1, 0, Decimal("0.03")), (1, Decimal("0.03")),
         (1, 200_000, Decimal("0.03"))),
    ]
    assert (totals.session_cost, totals.day_cost, totals.lifetime_cost) == (
        Decimal("0.13"), Decimal("0.33"), Decimal("0.78"))
    assert cost_summary_line(totals) == "Session cost: $0.13 | 24h: $0.33"
    assert await ledger.summary_line() == "Session cost: $0.13 | 24h: $0.33"


async def test_cost_table_for_the_cost_command(pool):
    ledger, _ = await _history(pool)
    assert format_cost_table(await ledger.totals()) == "\n".join([
        "                                              -- session ---  - last 24 h --  -- lifetime --",
        "model                  purpose                calls     cost  calls     cost  calls     cost  failed  cancelled",
        "claude-sonnet-4-5      escalation                 0  $0.0000      0  $0.0000      1  $0.4500       0          0",
        "gemini-2.5-flash-lite  reply                      2  $0.1000      3  $0.3000      3  $0.3000       1          0",
        "gemini-embedding-001   embed:RETRIEVAL_QUERY      1  $0.0300      1  $0.0300      1  $0.0300       0          0",
        "total                                             3  $0.1300      4  $0.3300      5  $0.7800       1          0",
    ])


async def test_a_call_the_mind_cancelled_is_counted_as_cancelled_not_failed(pool):
    ledger = CostLedger(pool, session_id="s1", prices=ProvidersSettings().prices, now=Clock())
    await ledger.record(provider="gemini", model="m", purpose="reply", ok=False, error="cancelled: a user's turn",
                        status="cancelled")
    await ledger.record(provider="gemini", model="m", purpose="reply", ok=False, error="RateLimited: 429")
    [row] = (await ledger.totals()).rows
    for window in (row.session, row.day, row.lifetime):     # the ledger's rows and the daily roll-up
        assert (window.calls, window.failed, window.cancelled) == (2, 1, 1)
    assert format_cost_table(await ledger.totals()).splitlines()[2].split()[-2:] == ["1", "1"]


def test_cost_table_when_nothing_was_called():
    assert format_cost_table(CostTotals(rows=[])) == "No language-model calls recorded yet."
    assert cost_summary_line(CostTotals(rows=[])) == "Session cost: $0.00 | 24h: $0.00"


async def test_a_refused_write_is_queued_and_flushed_with_the_next_one(pool, caplog):
    ledger = CostLedger(pool, session_id="s1", prices=ProvidersSettings().prices, now=Clock())
    await pool.execute("ALTER TABLE llm_calls RENAME TO llm_calls_away")
    with caplog.at_level(logging.WARNING, logger="src.providers.costs"):
        rec = await ledger.record(provider="gemini", model="gemini-2.5-flash-lite", purpose="reply", ok=True,
                                  usage=CallUsage(10, 2))
    assert rec.cost_usd == Decimal("0.00000180")
    assert ledger.pending == 1
    assert caplog.messages == ['could not write 1 llm_calls row(s) (UndefinedTableError: relation "llm_calls" '
                               'does not exist); keeping them in memory']
    with caplog.at_level(logging.WARNING, logger="src.providers.costs"):
        totals = await ledger.totals()
    assert (totals.pending, totals.rows[0].session.calls) == (1, 1)
    assert totals.database_error == 'UndefinedTableError: relation "llm_calls" does not exist'
    assert format_cost_table(totals).endswith(
        '(database unavailable: UndefinedTableError: relation "llm_calls" does not exist; '
        "showing only calls not yet written)")
    await pool.execute("ALTER TABLE llm_calls_away RENAME TO llm_calls")
    await ledger.record(provider="gemini", model="gemini-2.5-flash-lite", purpose="reply", ok=True,
                        usage=CallUsage(20, 4))
    assert ledger.pending == 0
    assert [r["tokens_in"] for r in await pool.fetch("SELECT tokens_in FROM llm_calls ORDER BY id")] == [10, 20]


async def test_the_queue_is_bounded_and_drops_the_oldest(pool, caplog):
    ledger = CostLedger(pool, session_id="s1", prices=ProvidersSettings().prices, max_pending=2, now=Clock())
    await pool.execute("ALTER TABLE llm_calls RENAME TO llm_calls_away")
    with caplog.at_level(logging.WARNING, logger="src.providers.costs"):
        for n in (1, 2, 3):
            await ledger.record(provider="gemini", model="m", purpose="reply", ok=True, usage=CallUsage(n))
    assert [r.tokens_in for r in ledger._pending] == [2, 3]
    assert "llm_calls queue full (2 rows): dropped the oldest row (1 dropped so far)" in caplog.messages
    await pool.execute("ALTER TABLE llm_calls_away RENAME TO llm_calls")
    assert await ledger.flush() == 2
    assert [r["tokens_in"] for r in await pool.fetch("SELECT tokens_in FROM llm_calls ORDER BY id")] == [2, 3]


async def test_queued_rows_count_in_the_totals(pool):
    ledger = CostLedger(pool, session_id="s1", prices=ProvidersSettings().prices, now=Clock())
    rec = await ledger.record(provider="gemini", model="gemini-2.5-flash-lite", purpose="reply", ok=True,
                              usage=CallUsage(1_000_000))
    ledger._pending.append(replace(rec))  # a copy waiting in the queue, as after a refused write
    totals = await ledger.totals()
    assert totals.pending == 1
    assert (totals.rows[0].session.calls, totals.session_cost) == (2, Decimal("0.20"))
    assert format_cost_table(totals).endswith(
        "(1 call(s) not yet written to the database; counted above)")

