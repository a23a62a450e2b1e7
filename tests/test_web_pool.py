"""The web view cannot slow the mind (issue 24): its pages read through a small pool of their
own — read-only sessions with a statement timeout — so polling clients never hold one of the
mind's connections; the overview shows what the background budget has left.

Each test starts the view as the service does (`start_beside_mind`) on a fresh migrated
database and reads it over HTTP. Pages start at a bounded pace (a token
bucket). The loop's cycle time under polling is the bench's (`python -m bench web_polling`),
not a timing assert here.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace

import aiohttp
import asyncpg
import pytest

from src.config import load_settings
from src.db.pool import create_pool
from src.providers.budget import BackgroundBudget
from src.providers.settings import BudgetSettings
from src.recall.retrieval import Retriever
from src.recall.settings import RetrievalSettings
from src.recall.store import MemoryStore, NewMemory
from src.web.__main__ import _budget_from_ledger
from src.web.pace import Pace
from src.web.serve import WEB_APPLICATION, open_view_pool, start_beside_mind
from src.weights.safety import Safety
from tests.fakes import HashEmbedder


def _settings(tmp_path, **web):
    return load_settings(tmp_path / "none.yaml", env={}, overrides={"web": {"port": 0, **web}})


def _mind(pool, budget=None):
    """What the view reads of a running mind (src/web/serve.py ViewedMind)."""
    return SimpleNamespace(pool=pool, providers=SimpleNamespace(report=["test providers"]), safety=Safety(),
                           retriever=Retriever(pool, HashEmbedder(), None, Safety(), RetrievalSettings()),
                           loop=SimpleNamespace(cycles=7), budget=budget)


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with session.get(url) as resp:
        return resp.status, await resp.text()


async def test_the_views_pool_is_its_own_small_read_only_one_with_a_statement_timeout(pool, db_dsn, tmp_path):
    server, line = await start_beside_mind(_settings(tmp_path), _mind(pool), "s1", dsn=db_dsn)
    view_pool = server.view.pool
    try:
        assert line == f"web view (read-only): {server.url}"
        assert view_pool is not pool and view_pool.get_max_size() == 2
        for _ in range(3):                   # on every use of a connection, not only its first
            async with view_pool.acquire() as conn:
                assert await conn.fetchval("SHOW statement_timeout") == "5s"
                assert await conn.fetchval("SHOW default_transaction_read_only") == "on"
                assert await conn.fetchval("SELECT current_setting('application_name')") == WEB_APPLICATION
                with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
                    await conn.execute("INSERT INTO llm_calls (provider, model, purpose, ok) VALUES ('p', 'm', 'x', true)")
    finally:
        await server.stop()
    assert view_pool.is_closing()            # stopping the view closes its pool


async def test_a_slow_page_statement_is_cut_by_the_timeout(db_dsn, tmp_path):
    view_pool = await open_view_pool(_settings(tmp_path, statement_timeout_s=0.2), db_dsn)
    try:
        with pytest.raises(asyncpg.QueryCanceledError, match="statement timeout"):
            await view_pool.fetchval("SELECT pg_sleep(3)")
        assert await view_pool.fetchval("SELECT 1") == 1
    finally:
        await view_pool.close()


async def test_pages_and_search_are_served_while_the_mind_holds_all_its_connections(db_dsn, tmp_path):
    mind_pool = await create_pool(db_dsn, min_size=2, max_size=2)
    store = MemoryStore(mind_pool, HashEmbedder())
    await store.store(NewMemory("the spare key is under the blue flowerpot"))
    server, _ = await start_beside_mind(_settings(tmp_path), _mind(mind_pool), "s1", dsn=db_dsn)
    held = [await mind_pool.acquire() for _ in range(2)]        # the loop busy on every connection
    try:
        async with aiohttp.ClientSession() as session:
            base = server.url.rstrip("/")
            pages = ["/", "/memories", "/memories?q=where+is+the+spare+key", "/thoughts", "/gates",
                     "/consolidation", "/gut"] * 3
            answers = await asyncio.wait_for(asyncio.gather(*(_get(session, base + p) for p in pages)), 60)
        assert [status for status, _ in answers] == [200] * len(pages)
        search = answers[2][1]
        assert "the spare key is under the blue flowerpot" in search
        busy = await held[0].fetchval("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                                      WEB_APPLICATION)
        assert busy <= 2                                          # never more than its own pool
    finally:
        for conn in held:
            await mind_pool.release(conn)
        await server.stop()
        await mind_pool.close()


async def test_the_overview_shows_what_the_background_budget_has_left(pool, db_dsn, tmp_path):
    now = datetime.now(UTC)
    budget = BackgroundBudget(BudgetSettings(hourly_calls=20, idle_share=0.5, daily_cost_usd=0.25))

    class Rec:
        def __init__(self, caller, cost):
            self.at, self.caller, self.cost_usd, self.purpose = now, caller, Decimal(cost), "system1_answer"

    for caller, cost in (("dmn", "0.01"), ("dmn", "0.01"), ("consolidation", "0.03")):
        budget.observe(Rec(caller, cost))
    server, _ = await start_beside_mind(_settings(tmp_path), _mind(pool, budget), "s1", dsn=db_dsn)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(server.url + "?format=json") as resp:
                data = await resp.json()
            _, html = await _get(session, server.url)
    finally:
        await server.stop()
    assert data["budget"] == {"enabled": True, "calls_used": 3, "calls_limit": 20, "idle_used": 2, "idle_limit": 10,
                              "cost_used_usd": 0.05, "cost_limit_usd": 0.25,
                              "consolidation_calls_left": 17, "idle_calls_left": 8}
    assert "Background budget (what the mind&#x27;s own work may still spend)" in html
    assert "<td>calls this hour</td><td>3 of 20</td>" in html
    assert "<td>spent in 24 h (USD)</td><td>0.0500 of 0.25</td>" in html


async def test_the_standalone_viewer_reads_the_budget_from_the_ledger(pool, tmp_path):
    await pool.execute("""INSERT INTO llm_calls (at, provider, model, purpose, cost_usd, ok, caller)
                          VALUES (now(), 'p', 'm', 'system1_answer', 0.02, true, 'gut'),
                                 (now(), 'p', 'm', 'system1_answer', 9, true, NULL)""")
    left = await _budget_from_ledger(_settings(tmp_path), pool)()
    assert (left.calls_used, left.idle_used, left.cost_used) == (1, 1, Decimal("0.02"))


def test_the_pace_lets_a_burst_through_then_spaces_requests_and_refuses_a_long_wait():
    pace = Pace(rate=5.0, burst=3, max_wait_s=1.0)
    assert [pace.take(10.0) for _ in range(3)] == [0.0, 0.0, 0.0]       # a guardian opening pages: no wait
    waits = [pace.take(10.0) for _ in range(6)]
    assert waits[:5] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])          # each in its turn, 1/rate apart
    assert waits[5] is None                                                # 1.2 s > max_wait_s: refused
    assert pace.take(10.0) is None                                         # a refusal reserves nothing
    # 2 s later: 10 tokens earned, 5 owed, the bucket full again (at most `burst`)
    assert [pace.take(12.0) for _ in range(4)] == pytest.approx([0.0, 0.0, 0.0, 0.2])


async def test_a_request_over_the_pace_is_answered_503_not_queued_forever(pool, db_dsn, tmp_path):
    settings = _settings(tmp_path, max_requests_per_s=0.01, burst=1, max_wait_s=1)
    server, _ = await start_beside_mind(settings, _mind(pool), "s1", dsn=db_dsn)
    try:
        async with aiohttp.ClientSession() as session:
            assert (await _get(session, server.url + "thoughts"))[0] == 200
            async with session.get(server.url + "gates") as resp:
                assert resp.status == 503 and resp.headers["Retry-After"] == "5"
                assert "the web view is busy: too many requests" in await resp.text()
    finally:
        await server.stop()
