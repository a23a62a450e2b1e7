"""Memories per type and source kept by triggers (sql/142), against a GROUP BY over memories.

Every write path (the store's COPY, a single INSERT, the bulk import, a retag, DELETE,
TRUNCATE) leaves the counts equal to a scan; folding changes the rows, not the sums; a
write that bypassed the triggers is found and repaired by the deep pass's hook; the web
overview and the /memories form read the counts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from datetime import UTC, datetime

import aiohttp

from src.consolidation.deep.deep_pass import PassReport, monitors_hook
from src.consolidation.light.ticker import LightTicker
from src.consolidation.settings import ConsolidationSettings
from src.recall import kind_counts
from src.recall.bulk_import import ImportRecord, write_batch
from src.recall.store import MemoryStore, NewMemory
from src.web import queries as q
from src.web.app import WebServer
from src.web.settings import WebSettings
from src.web.view import View
from src.weights.apply import AccessTouch, WeightChange, apply_weight_changes
from src.weights.safety import Safety
from tests.fakes import HashEmbedder

TYPES = ["episodic", "semantic", "reflection", "preference"]
TAGS = ["external_user", "internal_consolidation", "imported", "internal_thought"]


async def _scan(pool) -> dict[tuple[str, str], int]:
    rows = await pool.fetch("SELECT memory_type, source_tag, count(*) AS n FROM memories GROUP BY 1, 2")
    return {(r["memory_type"], r["source_tag"]): r["n"] for r in rows}


async def _kept(pool) -> dict[tuple[str, str], int]:
    rows = await pool.fetch("""SELECT memory_type, source_tag, sum(memories) AS n FROM memory_kind_counts
                                GROUP BY 1, 2 HAVING sum(memories) <> 0""")
    return {(r["memory_type"], r["source_tag"]): r["n"] for r in rows}


async def _assert_matches(pool) -> None:
    scan = await _scan(pool)
    assert await _kept(pool) == scan
    assert await kind_counts.differences(pool) == []
    by_type: dict[str, int] = {}
    for (mtype, _), n in scan.items():
        by_type[mtype] = by_type.get(mtype, 0) + n
    assert {r["memory_type"]: r["n"] for r in await q.memories_by_type(pool)} == by_type
    per_tag: dict[str, int] = {}
    for (_, tag), n in scan.items():
        per_tag[tag] = per_tag.get(tag, 0) + n
    assert await q.source_tags(pool, 50) == sorted(per_tag, key=lambda t: (-per_tag[t], t))


def _memories(rng: random.Random, n: int, prefix: str) -> list[NewMemory]:
    return [NewMemory(f"{prefix} {i}", memory_type=rng.choice(TYPES), source_tag=rng.choice(TAGS))
            for i in range(n)]


async def test_every_write_path_keeps_the_counts_equal_to_a_scan(pool):
    rng = random.Random(142)
    await _assert_matches(pool)                                      # empty
    store = MemoryStore(pool, HashEmbedder())
    ids = await store.store_many(_memories(rng, 200, "copied"))
    await _assert_matches(pool)
    ids.append(await store.store(NewMemory("one more", memory_type="tension", source_tag="internal_dmn")))
    batch = [ImportRecord(m, line=i + 1) for i, m in enumerate(_memories(rng, 80, "imported"))]
    assert (await write_batch(pool, HashEmbedder(), batch, {})).inserted == 80
    assert (await write_batch(pool, HashEmbedder(), batch, {})).inserted == 0
    await _assert_matches(pool)
    # a weight change with access bookkeeping writes no count row
    before = await pool.fetchval("SELECT count(*) FROM memory_kind_counts")
    await apply_weight_changes(pool, [WeightChange(mid, "reinforce", 0.5, "test", "x") for mid in ids[:30]],
                               safety=Safety(), touch=AccessTouch(ids[:5], datetime(2026, 6, 1, tzinfo=UTC)))
    assert await pool.fetchval("SELECT count(*) FROM memory_kind_counts") == before
    # retags and reclassifications move counts between pairs (old rows retagged, as sql/100 did)
    await pool.execute("UPDATE memories SET source_tag = 'internal_consolidation' WHERE id % 4 = 0")
    await pool.execute("UPDATE memories SET memory_type = 'semantic', source_tag = 'imported' WHERE id % 7 = 0")
    await _assert_matches(pool)
    await pool.execute("DELETE FROM memories WHERE id = ANY($1::bigint[])", rng.sample(ids, 50))
    await _assert_matches(pool)
    # folding: one row per pair, same sums
    assert await pool.fetchval("SELECT count(*) FROM memory_kind_counts") > len(await _scan(pool))
    await kind_counts.fold(pool)
    assert await pool.fetchval("SELECT count(*) FROM memory_kind_counts") == len(await _scan(pool))
    await _assert_matches(pool)
    await pool.execute("TRUNCATE memories CASCADE")
    assert await pool.fetchval("SELECT count(*) FROM memory_kind_counts") == 0
    await store.store_many(_memories(rng, 20, "after truncate"))
    await _assert_matches(pool)


async def test_a_write_that_bypassed_the_triggers_is_repaired_by_the_deep_pass_hook(pool, caplog):
    await MemoryStore(pool, HashEmbedder()).store_many(
        [NewMemory(f"memory {i}", source_tag="external_user") for i in range(3)])
    async with pool.acquire() as conn:
        await conn.execute("SET session_replication_role = replica")    # triggers off, as in a raw restore
        await conn.execute("INSERT INTO memories (content, memory_type, source_tag) "
                           "VALUES ('behind its back', 'semantic', 'imported')")
        await conn.execute("RESET session_replication_role")
    assert await kind_counts.differences(pool) == [
        {"memory_type": "semantic", "source_tag": "imported", "kept": 0, "stored": 1}]
    with caplog.at_level(logging.WARNING, logger="src.recall.kind_counts"):
        await monitors_hook(pool, Safety())(PassReport(1, "manual", "done", False, 0, 15, 0, 0, {}))
    assert "memory kind counts differed from memories for 1 pair(s) (semantic/imported: 0 kept vs 1 stored)" \
        in caplog.text
    await _assert_matches(pool)


async def test_a_fold_does_not_wait_for_or_lose_a_concurrent_writer(pool):
    store = MemoryStore(pool, HashEmbedder())
    await store.store_many(_memories(random.Random(1), 30, "m"))
    writer = await pool.acquire()
    try:
        tx = writer.transaction()
        await tx.start()
        await writer.execute("INSERT INTO memories (content, memory_type, source_tag) "
                             "VALUES ('uncommitted', 'reflection', 'internal_dmn')")
        await asyncio.wait_for(kind_counts.fold(pool), 5)
        await asyncio.wait_for(kind_counts.rebuild(pool), 5)
        await tx.commit()
    finally:
        await pool.release(writer)
    await _assert_matches(pool)


async def test_the_light_ticker_folds_the_counts(pool):
    rng = random.Random(7)
    for k in range(4):
        await MemoryStore(pool, HashEmbedder()).store_many(_memories(rng, 10, f"batch {k}"))
    assert await pool.fetchval("SELECT count(*) FROM memory_kind_counts") > len(await _scan(pool))
    ticker = LightTicker(pool, embedder=HashEmbedder(), llm=None, safety=Safety(),
                         settings=ConsolidationSettings(light={"monitors": False}), rng=random.Random(1))
    await ticker.monitors(datetime(2026, 6, 1, tzinfo=UTC))
    assert await pool.fetchval("SELECT count(*) FROM memory_kind_counts") == len(await _scan(pool))
    await _assert_matches(pool)


async def test_the_pages_read_the_counts_and_a_mind_not_yet_migrated_is_scanned(pool):
    await MemoryStore(pool, HashEmbedder()).store_many(
        [NewMemory("a", memory_type="semantic", source_tag="imported"),
         NewMemory("b", memory_type="semantic", source_tag="imported"), NewMemory("c")])
    server = WebServer(View(pool=pool, settings=WebSettings(port=0), mode="test"))
    url = await server.start()
    try:
        async with aiohttp.ClientSession() as s:
            async with s.get(url + "?format=json") as resp:
                assert json.loads(await resp.text())["memories_by_type"] == [
                    {"memory_type": "semantic", "n": 2}, {"memory_type": "episodic", "n": 1}]
            async with s.get(url + "memories") as resp:
                page = await resp.text()
            assert page.index('value="imported"') < page.index('value="external_user"')
            # the standalone viewer applies no migrations: without the counts it scans
            await pool.execute("DROP TABLE memory_kind_counts CASCADE")
            await pool.execute("DROP TRIGGER memory_kind_insert ON memories")
            await pool.execute("INSERT INTO memories (content) VALUES ('d')")
            async with s.get(url + "?format=json") as resp:
                assert json.loads(await resp.text())["memories_by_type"] == [
                    {"memory_type": "episodic", "n": 2}, {"memory_type": "semantic", "n": 2}]
    finally:
        await server.stop()
