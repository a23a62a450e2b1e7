"""The trigger-kept center summary (sql/080) against a straightforward scan, on real PostgreSQL.

Every write path (single INSERT, the store's COPY, the bulk import's INSERT … SELECT,
the weight choke point, DELETE, TRUNCATE) must leave the summary equal to what a scan
of every memory computes: the overview's histogram (the old query), the contested and
uninformed counts, and the entropy of the old monitor's SQL (numeric log over every row).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import shutil
from datetime import UTC, datetime

import aiohttp
import asyncpg
import pytest

from src.consolidation import monitors
from src.consolidation.deep.deep_pass import PassReport, monitors_hook
from src.consolidation.light.ticker import LightTicker
from src.consolidation.settings import ConsolidationSettings
from src.db.migrations import SQL_DIR, apply_migrations
from src.recall.bulk_import import ImportRecord, write_batch
from src.recall.store import MemoryStore, NewMemory
from src.web import queries as q
from src.web.app import WebServer
from src.web.settings import WebSettings
from src.web.view import View
from src.weights.apply import AccessTouch, WeightChange, apply_weight_changes
from src.weights.center_summary import (
    CENTER_BINS,
    fold_summary,
    read_summary,
    rebuild_summary,
    share_entropy_bits,
    summary_differences,
    verify_summary,
)
from src.weights.safety import Safety, SafetyEvent
from src.weights.safety_rules import cba_coherence, shannon_entropy, value_coherence
from src.weights.stochastic import StochasticWeight
from tests.fakes import HashEmbedder

# The entropy monitor's query before sql/080, kept here as the reference.
_REFERENCE_ENTROPY = """
WITH c AS (SELECT depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS w FROM memories),
     t AS (SELECT sum(w) AS total, count(*) AS n FROM c)
SELECT COALESCE(-sum((w / t.total) * log(2.0, (w / t.total)::numeric)), 0)::float8 AS h, max(t.n) AS n
  FROM c, t WHERE w > 0 AND t.total > 0"""

# edge cases: bucket boundaries (0.05, 0.25, 0.5), centers near 0 and 1, the
# uninformed / contested borders (2 and 5 are neither)
_EDGES = [(1.0, 19.0), (1.0, 3.0), (1.0, 1.0), (1e-6, 50.0), (1e6, 1e-3), (1.9, 1.9), (2.0, 1.0),
          (5.0, 5.0), (5.1, 5.1), (50.0, 1.0)]


def _weights(rng: random.Random, n: int) -> list[tuple[float, float]]:
    return [(rng.choice([rng.uniform(0.2, 3.0), rng.uniform(1.0, 40.0)]),
             rng.choice([rng.uniform(0.2, 3.0), rng.uniform(1.0, 40.0)])) for _ in range(n)]


async def _reference(pool) -> dict:
    """What a scan of every memory says, by the pre-080 queries and in Python."""
    rows = await pool.fetch("SELECT depth_weight_alpha AS a, depth_weight_beta AS b FROM memories")
    ref = await pool.fetchrow(_REFERENCE_ENTROPY)
    centers = [r["a"] / (r["a"] + r["b"]) for r in rows]
    return {
        "histogram": [r["n"] for r in await q.center_histogram_scan(pool, CENTER_BINS)],
        "shapes": await q.shape_counts_scan(pool),
        "memories": len(rows),
        "entropy_sql": float(ref["h"] or 0.0),
        "entropy_py": shannon_entropy(centers),
        "sum_center": sum(centers),
    }


async def _assert_matches(pool) -> None:
    ref = await _reference(pool)
    s = await read_summary(pool)
    assert list(s.counts) == ref["histogram"]
    assert (s.contested, s.uninformed, s.memories) == (
        ref["shapes"]["contested"], ref["shapes"]["uninformed"], ref["shapes"]["total"])
    assert s.memories == ref["memories"]
    assert s.entropy_bits() == pytest.approx(ref["entropy_sql"], rel=1e-12, abs=1e-12)
    assert s.entropy_bits() == pytest.approx(ref["entropy_py"], rel=1e-12, abs=1e-12)
    assert float(s.sum_center) == pytest.approx(ref["sum_center"], rel=1e-12)
    assert await summary_differences(pool) == []          # exact, bucket by bucket
    # the web's queries read the summary and show what the scan showed
    assert [r["n"] for r in await q.center_histogram(pool, CENTER_BINS)] == ref["histogram"]
    assert await q.shape_counts(pool) == ref["shapes"]


def _records(weights: list[tuple[float, float]], start: int) -> list[ImportRecord]:
    return [ImportRecord(NewMemory(f"imported memory number {start + i}", alpha=a, beta=b), line=i + 1)
            for i, (a, b) in enumerate(weights)]


async def test_every_write_path_keeps_the_summary_equal_to_a_scan(pool):
    rng = random.Random(80)
    await _assert_matches(pool)                                   # empty: all zeros, entropy 0
    assert (await read_summary(pool)).entropy_bits() == 0.0
    store = MemoryStore(pool, HashEmbedder())
    # the store's COPY (the exit gate writes through the same copy_memories)
    ids = await store.store_many([NewMemory(f"copied memory {i}", alpha=a, beta=b)
                                  for i, (a, b) in enumerate(_weights(rng, 300) + _EDGES)])
    await _assert_matches(pool)
    # a single INSERT
    ids.append(await store.store(NewMemory("one more memory", alpha=7.0, beta=6.0)))
    # the bulk import (COPY into a stage, INSERT … SELECT ON CONFLICT DO NOTHING), twice
    batch = _records(_weights(rng, 120), 0)
    assert (await write_batch(pool, HashEmbedder(), batch, {})).inserted == 120
    assert (await write_batch(pool, HashEmbedder(), batch, {})).inserted == 0
    await _assert_matches(pool)
    # the weight choke point: reinforce, contradict, with access bookkeeping
    all_ids = [r["id"] for r in await pool.fetch("SELECT id FROM memories ORDER BY id")]
    picked = rng.sample(all_ids, 80)
    changes = [WeightChange(mid, rng.choice(["reinforce", "contradict"]), rng.uniform(0.05, 3.0), "test", "mixed")
               for mid in picked]
    await apply_weight_changes(pool, changes, safety=Safety(),
                               touch=AccessTouch(picked[:10], datetime(2026, 6, 1, tzinfo=UTC)))
    await _assert_matches(pool)
    # deletion (memories are never deleted by the mind; the operator may)
    await pool.execute("DELETE FROM memories WHERE id = ANY($1::bigint[])", rng.sample(all_ids, 40))
    await _assert_matches(pool)
    # folding changes the rows, not the sums
    before = await read_summary(pool)
    assert await pool.fetchval("SELECT count(*) FROM memory_center_summary") > CENTER_BINS
    assert await fold_summary(pool) == before
    assert await pool.fetchval("SELECT count(*) FROM memory_center_summary") <= CENTER_BINS
    await _assert_matches(pool)
    # TRUNCATE empties it; writes after it count again
    await pool.execute("TRUNCATE memories CASCADE")
    assert await pool.fetchval("SELECT count(*) FROM memory_center_summary") == 0
    await store.store_many([NewMemory(f"after truncate {i}", alpha=a, beta=b) for i, (a, b) in enumerate(_EDGES)])
    await _assert_matches(pool)


async def test_updates_that_change_no_weight_record_nothing(pool):
    store = MemoryStore(pool, HashEmbedder())
    ids = await store.store_many([NewMemory(f"memory {i}", alpha=1.0 + i, beta=2.0) for i in range(5)])
    rows = await pool.fetchval("SELECT count(*) FROM memory_center_summary")
    await pool.execute("UPDATE memories SET metadata = metadata || '{\"k\": 1}', access_count = access_count + 1")
    await apply_weight_changes(pool, [], safety=Safety(), touch=AccessTouch(ids, datetime(2026, 6, 1, tzinfo=UTC)))
    assert await pool.fetchval("SELECT count(*) FROM memory_center_summary") == rows
    await _assert_matches(pool)


async def test_entropy_on_a_seeded_store_equals_the_reference(pool):
    """2,000 memories from a fixed seed: the fast entropy is the old SQL's to 1e-12."""
    rng = random.Random(2026)
    store = MemoryStore(pool, HashEmbedder())
    weights = _weights(rng, 2000)
    for i in range(0, 2000, 500):
        await store.store_many([NewMemory(f"seeded memory {i + k}", alpha=a, beta=b)
                                for k, (a, b) in enumerate(weights[i:i + 500])])
    ref = await _reference(pool)
    s = await fold_summary(pool)
    assert s.memories == 2000
    assert s.entropy_bits() == pytest.approx(ref["entropy_sql"], rel=1e-12)
    assert 10.0 < s.entropy_bits() < 11.0                        # log2(2000) = 10.97: near-uniform shares
    assert list(s.counts) == ref["histogram"]
    report = await monitors.run_monitors(pool, Safety(), "test")
    assert (report.memories, report.entropy_bits) == (2000, s.entropy_bits())


def test_share_entropy_formula():
    # two equal shares: 1 bit; one memory: 0 bits; no weight: 0
    c = 0.3
    assert share_entropy_bits(2 * c, 2 * c * math.log(c)) == pytest.approx(1.0, rel=1e-15)
    assert share_entropy_bits(0.7, 0.7 * math.log(0.7)) == pytest.approx(0.0, abs=1e-15)
    assert share_entropy_bits(0, 0) == 0.0


async def test_a_write_that_bypassed_the_triggers_is_found_and_repaired(pool, caplog):
    store = MemoryStore(pool, HashEmbedder())
    await store.store_many([NewMemory(f"memory {i}", alpha=1.0, beta=1.0) for i in range(3)])   # bucket 11
    async with pool.acquire() as conn:
        await conn.execute("SET session_replication_role = replica")    # triggers off, as in a raw restore
        await conn.execute("INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta) "
                           "VALUES ('behind its back', 1.0, 4.0)")       # center 0.2: bucket 5
        await conn.execute("RESET session_replication_role")
    diffs = await summary_differences(pool)
    assert diffs == [{"bucket": 5, "kept_memories": None, "fresh_memories": 1}]
    with caplog.at_level(logging.WARNING, logger="src.weights.center_summary"):
        assert await verify_summary(pool) == diffs
    assert caplog.messages == ["memory center summary differed from memories in 1 bucket(s) "
                               "(bucket 5: None kept vs 1 stored); rebuilt it"]
    assert await summary_differences(pool) == []
    await _assert_matches(pool)
    assert await verify_summary(pool) == []                      # consistent: nothing to do


async def test_the_deep_pass_hook_repairs_the_summary_before_the_monitors(pool):
    await pool.execute("INSERT INTO memories (content) VALUES ('counted')")
    await pool.execute("DELETE FROM memory_center_summary")          # lost, somehow
    await monitors_hook(pool, Safety())(PassReport(1, "manual", "done", False, 0, 15, 0, 0, {}))
    await _assert_matches(pool)


async def test_concurrent_writers_fold_and_rebuild_stay_consistent(pool):
    """A writer's uncommitted rows are neither folded nor counted twice by a rebuild."""
    store = MemoryStore(pool, HashEmbedder())
    ids = await store.store_many([NewMemory(f"memory {i}", alpha=1.0 + i % 7, beta=2.0 + i % 5) for i in range(50)])
    writer = await pool.acquire()
    try:
        tx = writer.transaction()
        await tx.start()
        await apply_weight_changes(writer, [WeightChange(mid, "reinforce", 2.0, "test", "concurrent")
                                            for mid in ids[:20]], safety=Safety())
        await writer.execute("INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta) "
                             "VALUES ('uncommitted', 30.0, 1.0)")
        # neither waits for the writer: they only touch rows it cannot see yet
        await asyncio.wait_for(fold_summary(pool), 5)
        await asyncio.wait_for(rebuild_summary(pool), 5)
        await asyncio.wait_for(fold_summary(pool), 5)
        await tx.commit()
    finally:
        await pool.release(writer)
    await _assert_matches(pool)
    await fold_summary(pool)
    await _assert_matches(pool)


async def test_migration_summarises_memories_stored_before_it(empty_db, tmp_path):
    """A mind from before sql/080 gets its summary when it migrates."""
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir()
    after.mkdir()
    for f in SQL_DIR.glob("*.sql"):
        shutil.copy(f, after / f.name)
        if int(f.name[:3]) < 80:
            shutil.copy(f, before / f.name)
    conn = await asyncpg.connect(empty_db)
    try:
        await apply_migrations(conn, before)
        await conn.execute("""INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta)
                              SELECT 'old memory ' || g, 1 + g % 9, 1 + g % 4 FROM generate_series(1, 60) g""")
        applied = await apply_migrations(conn, after)
        assert applied[:2] == ["080_memory_center_summary.sql", "081_memory_value_tension_indexes.sql"]
        assert await summary_differences(conn) == []
        assert (await read_summary(conn)).memories == 60
    finally:
        await conn.close()


async def test_monitor_pass_writes_only_its_own_events(pool):
    """A foreign event waiting in the shared Safety is not written by the monitors."""
    safety = Safety()
    foreign = SafetyEvent("hard_ceiling", "A", "someone else's", True, action={"actor": "elsewhere"})
    safety.pending.append(foreign)
    await pool.execute("INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta) "
                       "SELECT 'settled ' || g, 9, 1 FROM generate_series(1, 4) g")
    first = await monitors.run_monitors(pool, safety, "light_consolidation")
    assert (first.coherence, first.events) == (1.0, 0)
    # half the memories contested now: epistemic 0.5, C = 0.5^(1/3) — a drop beyond tolerance
    await pool.execute("INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta) "
                       "SELECT 'contested ' || g, 6, 6 FROM generate_series(1, 4) g")
    second = await monitors.run_monitors(pool, safety, "light_consolidation")
    assert second.coherence == pytest.approx(0.5 ** (1 / 3))
    assert (second.events, second.passed["coherence"]) == (1, True)     # phase C shadow: logged only
    rows = await pool.fetch("SELECT ceiling, enforced, reason, action FROM safety_events")
    assert [(r["ceiling"], r["enforced"], r["reason"]) for r in rows] == [
        ("cba_coherence", False, "coherence fell from 1.000 to 0.794, a drop of 0.206 (tolerance 0.1)")]
    assert json.loads(rows[0]["action"])["epistemic"] == 0.5
    assert safety.pending == [foreign]                                  # still its owner's


async def test_coherence_axes_come_from_the_indexed_rows(pool):
    await pool.execute("""INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta, metadata)
                          VALUES ('value one', 8, 2, '{"kind": "value"}'), ('goal one', 3, 3, '{"kind": "goal"}'),
                                 ('plain', 1, 4, '{}')""")
    await pool.execute("""INSERT INTO memories (content, memory_type, metadata)
                          VALUES ('open tension', 'tension', '{}'),
                                 ('settled tension', 'tension', '{"resolved": true}')""")
    report = await monitors.run_monitors(pool, Safety(), "test")
    # epistemic 1 (nothing contested), action 1 − 1/2, value from the two Beta weights
    expected = cba_coherence(1.0, 0.5, value_coherence([StochasticWeight(8, 2), StochasticWeight(3, 3)]))
    assert report.coherence == pytest.approx(expected, rel=1e-12)
    async with pool.acquire() as conn:      # a tiny table is seq-scanned; show the indexes serve the query
        await conn.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + monitors._VALUE_AXES))
        await conn.execute("RESET enable_seqscan")
    assert "idx_memories_value_goal" in plan and "idx_memories_tension" in plan


async def test_monitors_run_on_every_light_tick_by_default(pool):
    ticker = LightTicker(pool, embedder=HashEmbedder(), llm=None, safety=Safety(),
                         settings=ConsolidationSettings(), rng=random.Random(1))
    t0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    first = await ticker.tick(t0)
    second = await ticker.tick(t0.replace(second=10))                  # the next tick, 10 s later
    assert (first["monitors"], second["monitors"]) == (1, 1)
    assert "decay" not in second                                        # the others keep their intervals


async def _overview_json(pool) -> dict:
    server = WebServer(View(pool=pool, settings=WebSettings(port=0), mode="test"))
    url = await server.start()
    try:
        async with aiohttp.ClientSession() as s, s.get(url + "?format=json") as resp:
            return json.loads(await resp.text())
    finally:
        await server.stop()


async def test_overview_page_shows_the_scan_numbers(pool):
    rng = random.Random(16)
    await MemoryStore(pool, HashEmbedder()).store_many(
        [NewMemory(f"memory {i}", alpha=a, beta=b) for i, (a, b) in enumerate(_weights(rng, 200) + _EDGES)])
    ref = await _reference(pool)
    data = await _overview_json(pool)
    assert [r["n"] for r in data["center_histogram"]] == ref["histogram"]
    assert [r["bin"] for r in data["center_histogram"]] == list(range(1, CENTER_BINS + 1))
    assert data["shapes_now"] == ref["shapes"]
    with pytest.raises(ValueError, match="the center summary keeps 20 bins, not 10"):
        await q.center_histogram(pool, 10)


async def test_overview_of_a_mind_not_yet_migrated_scans(pool):
    """The standalone viewer applies no migrations: without the summary it scans, as before."""
    await pool.execute("INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta) VALUES ('x', 3, 1)")
    await pool.execute("DROP TABLE memory_center_summary CASCADE")
    await pool.execute("DROP TRIGGER memory_center_insert ON memories; DROP TRIGGER memory_center_update ON memories;"
                       "DROP TRIGGER memory_center_delete ON memories; DROP TRIGGER memory_center_truncate ON memories")
    data = await _overview_json(pool)
    assert [r["n"] for r in data["center_histogram"]][15] == 1         # center 0.75: bin 16
    assert data["shapes_now"] == {"contested": 0, "uninformed": 0, "total": 1}


async def test_the_ticker_folds_the_summary_even_with_the_monitors_off(pool):
    await MemoryStore(pool, HashEmbedder()).store_many([NewMemory(f"m {i}", alpha=1.0 + i, beta=2.0) for i in range(40)])
    for k in range(3):                                              # three statements: more rows than buckets
        await pool.execute("UPDATE memories SET depth_weight_beta = depth_weight_beta + 0.5 WHERE id % 3 = $1", k)
    assert await pool.fetchval("SELECT count(*) FROM memory_center_summary") > CENTER_BINS
    ticker = LightTicker(pool, embedder=HashEmbedder(), llm=None, safety=Safety(),
                         settings=ConsolidationSettings(light={"monitors": False}), rng=random.Random(1))
    assert await ticker.monitors(datetime(2026, 6, 1, tzinfo=UTC)) == 0
    assert await pool.fetchval("SELECT count(*) FROM memory_center_summary") <= CENTER_BINS
    assert await pool.fetchval("SELECT count(*) FROM safety_events") == 0
    await _assert_matches(pool)
