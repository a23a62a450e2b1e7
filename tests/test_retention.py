"""Bounded history (issue 24): retention windows, per-day roll-ups, cost totals that survive."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from pydantic import ValidationError

from src.consolidation.light.retention import HISTORY_TABLES, enforce, table_sizes
from src.consolidation.light.ticker import LightTicker
from src.consolidation.settings import HISTORY_TABLE_NAMES, ConsolidationSettings, RetentionSettings
from src.providers.costs import CostLedger
from src.web import queries as q
from src.weights.safety import Safety
from tests.fakes import HashEmbedder

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


async def _calls(pool, at: datetime, n: int, *, purpose: str = "system1", cost: str = "0.01") -> None:
    await pool.execute(
        """INSERT INTO llm_calls (at, session_id, provider, model, purpose, tokens_in, tokens_out, cost_usd, ok)
           SELECT $1, 's', 'gemini', 'flash', $2, 100, 10, $3::numeric, g % 5 <> 0 FROM generate_series(1, $4) g""",
        at, purpose, cost, n)


async def _decisions(pool, at: datetime, n: int) -> None:
    await pool.execute(
        """INSERT INTO gate_decisions (at, gate, source_tag, content_preview, action, reason)
           SELECT $1, 'exit', 'external_user', 'x', CASE WHEN g % 2 = 0 THEN 'persist' ELSE 'skip' END, 'test'
             FROM generate_series(1, $2) g""", at, n)


def test_every_history_table_has_a_rollup_and_a_default_rule():
    assert set(HISTORY_TABLES) == set(HISTORY_TABLE_NAMES)
    defaults = RetentionSettings()
    assert set(defaults.tables) == set(HISTORY_TABLE_NAMES)
    assert all(rule.days is not None for rule in defaults.tables.values())


def test_a_table_named_in_yaml_replaces_only_its_own_rule():
    s = RetentionSettings(tables={"llm_calls": {"days": 30}})
    assert s.tables["llm_calls"].days == 30
    assert s.tables["gut_deltas"].max_rows == 100_000           # untouched default
    with pytest.raises(ValidationError, match="unknown history tables"):
        RetentionSettings(tables={"memories": {"days": 1}})


async def test_old_rows_leave_and_are_rolled_up_per_day(pool):
    await _decisions(pool, NOW - timedelta(days=40), 6)
    await _decisions(pool, NOW - timedelta(days=35), 4)
    await _decisions(pool, NOW - timedelta(days=2), 5)
    settings = RetentionSettings(tables={t: {"days": None} for t in HISTORY_TABLE_NAMES} | {"gate_decisions": {"days": 30}})
    deleted = await enforce(pool, settings, NOW)
    assert deleted == {"gate_decisions": 10}
    assert await pool.fetchval("SELECT count(*) FROM gate_decisions") == 5
    rolled = {(r["day"], r["key"]): r["rows"] for r in await pool.fetch(
        "SELECT day, key, rows FROM history_daily WHERE source = 'gate_decisions'")}
    d40, d35 = (NOW - timedelta(days=40)).date(), (NOW - timedelta(days=35)).date()
    assert rolled == {(d40, "exit|persist"): 3, (d40, "exit|skip"): 3, (d35, "exit|persist"): 2, (d35, "exit|skip"): 2}
    assert await enforce(pool, settings, NOW) == {}                # nothing more is due


async def test_a_round_deletes_at_most_batch_times_max_batches(pool):
    await _decisions(pool, NOW - timedelta(days=40), 50)
    settings = RetentionSettings(batch=7, max_batches=3,
                                 tables={t: {"days": None} for t in HISTORY_TABLE_NAMES} | {"gate_decisions": {"days": 30}})
    assert await enforce(pool, settings, NOW) == {"gate_decisions": 21}
    assert await enforce(pool, settings, NOW) == {"gate_decisions": 21}
    assert await enforce(pool, settings, NOW) == {"gate_decisions": 8}
    assert await pool.fetchval("SELECT sum(rows) FROM history_daily WHERE source = 'gate_decisions'") == 50


async def test_max_rows_keeps_the_newest(pool):
    for day in range(10):
        await _decisions(pool, NOW - timedelta(days=10 - day), 10)
    settings = RetentionSettings(tables={t: {"days": None} for t in HISTORY_TABLE_NAMES}
                                 | {"gate_decisions": {"days": None, "max_rows": 25}})
    await enforce(pool, settings, NOW)
    kept = await pool.fetch("SELECT at FROM gate_decisions ORDER BY id")
    assert len(kept) == 25
    assert min(r["at"] for r in kept) == NOW - timedelta(days=3)   # the oldest 75 went first


async def test_cost_totals_survive_the_ledger_losing_its_rows(pool):
    await _calls(pool, NOW - timedelta(days=200), 20, cost="0.05")
    await _calls(pool, NOW - timedelta(hours=1), 10, cost="0.01")
    ledger = CostLedger(pool, session_id="s", prices={}, now=lambda: NOW)
    before = await ledger.totals()
    assert await enforce(pool, RetentionSettings(), NOW) == {"llm_calls": 20}
    after = await ledger.totals()
    assert await pool.fetchval("SELECT count(*) FROM llm_calls") == 10
    [row] = after.rows
    assert (row.lifetime.calls, row.lifetime.failed, row.lifetime.cost_usd) == (30, 6, Decimal("1.1"))
    assert row.lifetime == before.rows[0].lifetime
    assert (row.day.calls, row.day.cost_usd) == (10, Decimal("0.1"))
    assert row.session.calls == 10                                 # the session's rows older than 90 days went


async def test_the_light_ticker_runs_retention_on_its_interval(pool):
    await _decisions(pool, NOW - timedelta(days=40), 5)
    clock_now = [NOW]
    settings = ConsolidationSettings(light={"contradiction_samples": 0, "retention": {"interval_s": 300}})
    t = LightTicker(pool, embedder=HashEmbedder(), llm=None, safety=Safety(), settings=settings,
                    rng=random.Random(1), clock=lambda: clock_now[0])
    assert (await t.tick())["retention"] == 5
    await _decisions(pool, NOW - timedelta(days=40), 5)
    clock_now[0] = NOW + timedelta(seconds=60)
    assert "retention" not in await t.tick()                      # not due yet
    clock_now[0] = NOW + timedelta(seconds=301)
    assert (await t.tick())["retention"] == 5


async def test_thirty_simulated_days_keep_every_table_flat(pool):
    """A day of history a day, 30 days on an injected clock: after the window, sizes stop growing."""
    settings = RetentionSettings(tables={"gate_decisions": {"days": 7}, "llm_calls": {"days": 7}})
    counts = []
    for day in range(30):
        now = NOW + timedelta(days=day)
        await _decisions(pool, now, 40)
        await _calls(pool, now, 20)
        await enforce(pool, settings, now)
        counts.append((await pool.fetchval("SELECT count(*) FROM gate_decisions"),
                       await pool.fetchval("SELECT count(*) FROM llm_calls")))
    assert counts[10:] == [(320, 160)] * 20                        # 8 days of rows, then flat
    assert await pool.fetchval("SELECT sum(calls) FROM llm_calls_daily") == 600
    sizes = await table_sizes(pool)
    assert {"gate_decisions", "llm_calls", "history_daily", "llm_calls_daily"} <= set(sizes)


async def test_the_lifetime_cycle_count_survives_retention(pool):
    """The overview's "cycles, lifetime" counts the cycles retention rolled up as well."""
    await pool.execute("INSERT INTO agent_manifest (id) VALUES (1) ON CONFLICT DO NOTHING")
    await pool.execute("""INSERT INTO thought_log (at, session_id, cycle, source_tag)
                          SELECT $1::timestamptz - (g % 2) * INTERVAL '40 days', 's', g, 'user'
                            FROM generate_series(1, 12) g""", NOW)
    assert (await q.manifest(pool))["cycles_total"] == 12
    settings = RetentionSettings(tables={t: {"days": None} for t in HISTORY_TABLE_NAMES} | {"thought_log": {"days": 30}})
    assert await enforce(pool, settings, NOW) == {"thought_log": 6}
    assert await pool.fetchval("SELECT count(*) FROM thought_log") == 6
    assert (await q.manifest(pool))["cycles_total"] == 12
