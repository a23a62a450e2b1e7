"""Light consolidation (plan §4.1): the ticker in burst mode on 50 memories, real database."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

from src.consolidation.light.ticker import LightTicker
from src.consolidation.settings import ConsolidationSettings
from src.recall.co_access import co_access_upkeep, record_co_access
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.consolidation_fakes import ConsolidationModel, language_model
from tests.fakes import HashEmbedder

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self, start: datetime):
        self.now = start

    def __call__(self) -> datetime:
        return self.now


async def seed(pool, embedder) -> tuple[list[int], list[int]]:
    """30 memories unused for 10 days, 20 retrieved an hour ago."""
    ids = await MemoryStore(pool, embedder).store_many(
        [NewMemory(f"memory number {i} about topic {i % 7} and thing {i * 13 % 17}") for i in range(50)])
    old, recent = ids[:30], ids[30:]
    await pool.execute("UPDATE memories SET created_at = $1", NOW - timedelta(days=10))
    await pool.execute("UPDATE memories SET last_accessed = $2, access_count = 1 WHERE id = ANY($1::bigint[])",
                       recent, NOW - timedelta(hours=1))
    return old, recent


def ticker(pool, embedder, clock, llm=None, **light) -> LightTicker:
    settings = ConsolidationSettings(light={"contradiction_samples": 0, **light})
    return LightTicker(pool, embedder=embedder, llm=llm, safety=Safety(), settings=settings,
                       rng=random.Random(3), clock=clock)


async def test_decay_nudges_only_unused_memories_once_per_period(pool):
    embedder = HashEmbedder()
    old, recent = await seed(pool, embedder)
    clock = Clock(NOW)
    t = ticker(pool, embedder, clock)
    for _ in range(5):                       # five ticks, two minutes apart: one decay period
        await t.run(max_ticks=1, burst=True)
        clock.now += timedelta(minutes=2)
    weights = {r["id"]: (r["a"], r["b"]) for r in await pool.fetch(
        "SELECT id, depth_weight_alpha a, depth_weight_beta b FROM memories")}
    assert {weights[i] for i in old} == {(1.0, 4.01)}
    assert {weights[i] for i in recent} == {(1.0, 4.0)}
    # one summary audit row for the tick's whole decay batch, not one per memory
    log = await pool.fetch("SELECT memory_id, operation, actor, requested_delta, applied_delta, evidence "
                           "FROM consolidation_log")
    assert len(log) == 1
    row = log[0]
    assert (row["memory_id"], row["operation"], row["actor"]) == (None, "contradict", "light_consolidation")
    assert round(row["applied_delta"], 9) == round(0.01 * len(old), 9)
    assert json.loads(row["evidence"]) == {"summary": True, "memories": len(old), "first_id": min(old),
                                           "last_id": max(old)}

    clock.now += timedelta(hours=24)         # the next period: one more nudge each
    await t.run(max_ticks=1, burst=True)
    betas = {r["id"]: r["b"] for r in await pool.fetch("SELECT id, depth_weight_beta b FROM memories")}
    assert {round(betas[i], 9) for i in old} == {4.02}
    assert {betas[i] for i in recent} == {4.0}     # retrieved 25 h ago: still in use
    assert await pool.fetchval("SELECT count(*) FROM consolidation_log") == 2     # one row per decaying tick
    assert await pool.fetchval("SELECT count(*) FROM memory_decay_marks WHERE memory_id = ANY($1::bigint[])",
                               recent) == 0


async def test_decay_batch_takes_the_longest_unused_first(pool):
    embedder = HashEmbedder()
    old, _ = await seed(pool, embedder)
    await pool.execute("UPDATE memories SET created_at = $2 WHERE id = ANY($1::bigint[])",
                       old[:5], NOW - timedelta(days=30))
    t = ticker(pool, embedder, Clock(NOW), decay_batch=5)
    did = await t.tick()
    assert did["decay"] == 5
    assert sorted(r["memory_id"] for r in await pool.fetch("SELECT memory_id FROM memory_decay_marks")) == old[:5]


async def test_co_access_upkeep_halves_idle_pairs_and_prunes_below_threshold(pool):
    embedder = HashEmbedder()
    old, recent = await seed(pool, embedder)
    a, b, c, d = old[0], old[1], old[2], recent[0]
    await record_co_access(pool, [a, b], NOW - timedelta(days=8))          # seen once, idle: pruned
    for _ in range(5):
        await record_co_access(pool, [a, c], NOW - timedelta(days=8))      # seen 5 times, idle: 5 -> 2
    await record_co_access(pool, [b, d], NOW - timedelta(hours=2))         # fresh: untouched
    clock = Clock(NOW)
    t = ticker(pool, embedder, clock, co_access_interval_s=0)

    for _ in range(3):                                                     # one idle period: halved once
        await t.run(max_ticks=1, burst=True)
        clock.now += timedelta(minutes=1)
    pairs = {(r["memory_id_a"], r["memory_id_b"]): r["co_access_count"]
             for r in await pool.fetch("SELECT * FROM memory_co_access")}
    assert pairs == {tuple(sorted((a, c))): 2, tuple(sorted((b, d))): 1}

    clock.now += timedelta(days=7, minutes=1)                              # another idle period
    await t.run(max_ticks=1, burst=True)
    clock.now += timedelta(days=7, minutes=1)                              # and another: 1 -> 0, pruned
    await t.run(max_ticks=1, burst=True)
    pairs = {(r["memory_id_a"], r["memory_id_b"]): r["co_access_count"]
             for r in await pool.fetch("SELECT * FROM memory_co_access")}
    assert pairs == {}                                                     # the fresh pair went idle too


async def test_co_access_upkeep_reads_a_window_of_pages_a_round_and_sweeps_the_table(pool):
    # a round looks through `pages` heap pages from where the last stopped (a bounded read at
    # any size); the rounds of one sweep halve every idle pair once, then it starts over
    ids = [r["id"] for r in await pool.fetch(
        "INSERT INTO memories (content) SELECT 'memory ' || g FROM generate_series(1, 40) g RETURNING id")]
    await pool.execute(
        """INSERT INTO memory_co_access (memory_id_a, memory_id_b, co_access_count, last_co_accessed)
           SELECT a, b, 4, $2 FROM unnest($1::bigint[]) a, unnest($1::bigint[]) b WHERE a < b""",
        ids, NOW - timedelta(days=8))
    pairs = len(ids) * (len(ids) - 1) // 2
    table_pages = await pool.fetchval(
        "SELECT pg_relation_size('memory_co_access') / current_setting('block_size')::int")
    assert table_pages >= 4
    page, rounds, halved = 0, 0, 0
    while True:
        done = await co_access_upkeep(pool, NOW - timedelta(days=7), 1, 10_000, NOW, start_page=page, pages=1)
        rounds, halved, page = rounds + 1, halved + done.halved, done.next_page
        if page == 0:
            break
    assert rounds >= table_pages and halved == pairs     # (halved rows move to new pages: more rounds)
    assert await pool.fetchval("SELECT count(*) FROM memory_co_access WHERE co_access_count = 2") == pairs
    # a round that reaches its limit resumes on the page it stopped in, not past it
    later = NOW + timedelta(days=8)
    done = await co_access_upkeep(pool, NOW + timedelta(days=1), 1, 5, later, pages=10 * table_pages)
    first_idle = await pool.fetchval(      # the first pair still idle: none is left behind the cursor
        "SELECT min((ctid::text::point)[0])::int FROM memory_co_access WHERE decayed_at < $1", later)
    assert done.halved == 5 and done.next_page <= first_idle


async def test_contradiction_scan_and_pattern_detection_record_findings(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    pair = await store.store_many([NewMemory("I really love strong black coffee every single morning"),
                                   NewMemory("I do not love strong black coffee every single morning")])
    theme = await store.store_many([NewMemory(f"the rooftop garden tomatoes ripen slowly this cold summer {i}")
                                    for i in range(4)])
    t = ticker(pool, embedder, Clock(datetime.now(UTC)), contradiction_samples=20)
    did = await t.tick()
    assert did["contradiction"] == 1 and did["pattern"] >= 1 and did["monitors"] == 1
    found = await pool.fetchrow("SELECT memory_ids, details FROM consolidation_findings WHERE kind = 'contradiction'")
    assert sorted(found["memory_ids"]) == sorted(pair)
    assert json.loads(found["details"])["layer"] == "negation"
    themes = await pool.fetch("SELECT memory_ids, details FROM consolidation_findings WHERE kind = 'theme'")
    assert sorted(theme) in [sorted(r["memory_ids"]) for r in themes]
    # the same findings are not recorded twice
    t.last_run.clear()
    again = await t.tick()
    assert again["contradiction"] == 0 and again["pattern"] == 0
    assert await pool.fetchval("SELECT count(*) FROM llm_calls") == 0   # no model: layers 1-2 only


async def test_contradiction_scan_asks_the_model_only_for_undecided_pairs(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    await store.store_many([NewMemory("the office printer on floor three jams every monday"),
                            NewMemory("the office printer on floor three works every monday")])
    asked: list[str] = []
    backend = ConsolidationModel()
    backend.kind_of = staticmethod(lambda request: "contradiction")

    def answer(request):
        asked.append(request.messages[0].content)
        return json.dumps({"contradicts": True, "summary_a": "printer jams on mondays"})

    backend.push("contradiction", answer, answer)
    t = ticker(pool, embedder, Clock(datetime.now(UTC)), llm=language_model(backend, pool),
               contradiction_samples=20, contradiction_llm_pairs=1, pattern_interval_s=1e9)
    t.last_run["pattern"] = datetime.now(UTC)
    did = await t.tick()
    assert len(asked) == 1 and "Does A contradict B?" in asked[0]
    assert did["contradiction"] == 1
    assert [r["purpose"] for r in await pool.fetch("SELECT purpose FROM llm_calls")] == \
        ["consolidation:contradiction_scan"]
    layer = json.loads(await pool.fetchval("SELECT details FROM consolidation_findings"))["layer"]
    assert layer == "llm"
