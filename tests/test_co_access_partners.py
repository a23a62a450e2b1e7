"""Spreading's partner lookup (src/recall/co_access.py fetch_partners) on hub memories.

A memory injected every cycle gathers thousands of co-access partners; the lookup must
return the same top-k as ranking every edge, while reading only about k rows per seed
and side (the count indexes of sql/143), not the hub's every edge."""

from __future__ import annotations

import json

import pytest

from src.recall.co_access import CO_ACCESS_HALF, PARTNERS_SQL, fetch_partners, fetch_two_hops
from src.recall.store import StoreSize, count_memories

HUB_PARTNERS = 5_000


@pytest.fixture
async def hub_store(pool):
    """Memories 1..5001 (plus 5002..5011); memory 1 paired with all others (counts cycling
    1..50, so many ties), memory 2500 also with 5002..5011 from the other side."""
    await pool.execute("INSERT INTO memories (content) SELECT 'm ' || g FROM generate_series(1, $1) g",
                       HUB_PARTNERS + 11)
    await pool.execute("""INSERT INTO memory_co_access (memory_id_a, memory_id_b, co_access_count)
                          SELECT 1, g, 1 + g % 50 FROM generate_series(2, $1) g""", HUB_PARTNERS + 1)
    await pool.execute("""INSERT INTO memory_co_access (memory_id_a, memory_id_b, co_access_count)
                          SELECT 2500, g, 60 + g % 3 FROM generate_series(5002, 5011) g""")
    await pool.execute("ANALYZE memory_co_access")
    return pool


async def _reference(pool, seeds: list[int], k: int, exclude: list[int]) -> list[tuple[int, int, float]]:
    """Every edge of every seed ranked in Python: what the lookup must return."""
    rows = await pool.fetch("SELECT memory_id_a AS a, memory_id_b AS b, co_access_count AS n FROM memory_co_access")
    out = []
    for seed in sorted(set(seeds)):
        edges = [(r["b"] if r["a"] == seed else r["a"], r["n"]) for r in rows if seed in (r["a"], r["b"])]
        edges = sorted((e for e in edges if e[0] not in exclude), key=lambda e: (-e[1], e[0]))[:k]
        out += [(seed, partner, n / (n + CO_ACCESS_HALF)) for partner, n in edges]
    return out


@pytest.mark.parametrize("k", [1, 3, 7])
async def test_the_top_partners_of_hubs_equal_a_ranking_of_every_edge(hub_store, k):
    seeds, exclude = [1, 2500, 17, 5005, 1], [4999, 2549]
    got = await fetch_partners(hub_store, seeds, k, exclude)
    want = await _reference(hub_store, seeds, k, exclude)
    assert [(s, p) for s, p, _ in got] == [(s, p) for s, p, _ in want]
    assert [w for _, _, w in got] == pytest.approx([w for _, _, w in want])
    # the hub's best: count 50 (g % 50 = 49), lowest ids first
    assert [p for s, p, _ in got if s == 1] == [49, 99, 149, 199, 249, 299, 349][:k]


async def test_a_hub_costs_k_rows_per_side_not_its_every_edge(hub_store):
    plan = json.loads(await hub_store.fetchval(
        "EXPLAIN (ANALYZE, FORMAT JSON) " + PARTNERS_SQL, [1, 2500], 3, [], CO_ACCESS_HALF))[0]["Plan"]

    def rows_read(node: dict) -> int:
        own = (node.get("Actual Rows", 0) * node.get("Actual Loops", 1)
               if node.get("Relation Name") == "memory_co_access" else 0)
        return own + sum(rows_read(child) for child in node.get("Plans", []))
    # 2 seeds x 2 sides x k = 12; a full ranking would read the hub's 5,000 edges
    assert rows_read(plan) <= 12, plan


async def test_store_size_is_not_read_again_once_the_store_is_full(pool):
    now = [0.0]
    size = StoreSize(recheck_s=600.0, clock=lambda: now[0])
    await pool.execute("INSERT INTO memories (content) SELECT 'm ' || g FROM generate_series(1, 3) g")
    assert await size.count(pool, 5) == 3                     # below the cap: counted every time
    await pool.execute("INSERT INTO memories (content) SELECT 'n ' || g FROM generate_series(1, 3) g")
    assert await size.count(pool, 5) == 5
    await pool.execute("DELETE FROM memories")                # not read again within recheck_s ...
    now[0] = 599.0
    assert await size.count(pool, 5) == 5
    assert await size.count(pool, 10) == 0                    # ... for that cap; another cap counts
    now[0] = 1300.0
    assert await size.count(pool, 5) == await count_memories(pool, 5) == 0


async def test_two_hops_in_one_query_equal_two_lookups(hub_store):
    """Normal recall's spreading: hop 1 from every hop-0 partner that is no seed."""
    await hub_store.execute("""INSERT INTO memory_co_access (memory_id_a, memory_id_b, co_access_count)
                               SELECT g, g + 7, 1 + g % 4 FROM generate_series(2, 4000, 3) g
                               ON CONFLICT DO NOTHING""")
    for seeds in ([1], [2500, 17], [49, 99, 5003], [4242]):
        hop0, hop1 = await fetch_two_hops(hub_store, seeds, 3)
        assert hop0 == await fetch_partners(hub_store, seeds, 3)
        frontier = sorted({p for _, p, _ in hop0} - set(seeds))
        assert hop1 == await fetch_partners(hub_store, frontier, 3)
    assert await fetch_two_hops(hub_store, [], 3) == ([], [])
