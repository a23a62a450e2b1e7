"""`python -m src.memory import` and `export` against the real database."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from datetime import UTC, datetime

import asyncpg
import pytest

from src.db.pool import create_pool
from src.memory.importer import rebuild_pays
from src.recall import hnsw
from tests.fakes import HashEmbedder
from tests.memory_cli_helpers import cli, write_jsonl
from tests.proc import ROOT, agent_env

GOOD = [
    {"content": "My sister Hannah moved to Porto in March.", "event_time": "2026-03-02T10:00:00+00:00",
     "metadata": {"session": 3}},
    {"content": "I prefer green tea in the morning.", "memory_type": "preference", "source_tag": "chat-export"},
    {"content": "Trip to Lisbon planned for June."},
]


async def test_import_skips_bad_lines_naming_them_and_stores_the_rest(pool, db_dsn, tmp_path):
    f = write_jsonl(tmp_path / "in.jsonl", [
        GOOD[0], "{not json", {"memory_type": "semantic"}, GOOD[1], "", {"content": "x", "memory_type": "dream"},
        {"content": "y", "colour": "red"}, {"content": "z", "event_time": "last tuesday"}, GOOD[2], "[1, 2]",
    ])
    r = await cli(db_dsn, "import", str(f), embedder=HashEmbedder())
    assert r.code == 0
    assert r.err.splitlines() == [
        f"{f}:2: not valid JSON (Expecting property name enclosed in double quotes at column 2)",
        f"{f}:3: 'content' is missing",
        f"{f}:6: unknown memory_type 'dream'; expected one of: episodic, semantic, procedural, preference, "
        "reflection, correction, narrative, tension",
        f"{f}:7: unknown field(s) 'colour'; known: content, memory_type, event_time, source_tag, metadata, conversation, turn "
        "(and the export fields)",
        f"{f}:8: 'event_time' is not an ISO 8601 time: 'last tuesday'",
        f"{f}:10: expected a JSON object, got list",
    ]
    assert r.out.startswith(f"imported 3 new memories from {f} in ")
    assert r.out.endswith("s (0 already present, 6 bad lines skipped, 0 stored without embedding, "
                          "0 supersedes links; HNSW index kept)\n")
    rows = await pool.fetch("SELECT content, memory_type, source_tag, event_time, metadata, embed_model, "
                            "import_key IS NOT NULL AS keyed FROM memories ORDER BY id")
    assert [(x["content"], x["memory_type"], x["source_tag"], x["embed_model"], x["keyed"]) for x in rows] == [
        (GOOD[0]["content"], "episodic", "import", "fake-hash-768", True),
        (GOOD[1]["content"], "preference", "chat-export", "fake-hash-768", True),
        (GOOD[2]["content"], "episodic", "import", "fake-hash-768", True),
    ]
    assert rows[0]["event_time"] == datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    assert json.loads(rows[0]["metadata"]) == {"session": 3}


async def test_reimport_of_the_same_file_adds_nothing_and_embeds_nothing(pool, db_dsn, tmp_path):
    f = write_jsonl(tmp_path / "in.jsonl", GOOD + [GOOD[0]])       # a repeated line is one memory
    first = await cli(db_dsn, "import", str(f), "--batch-size", "2", embedder=HashEmbedder())
    assert "imported 3 new memories" in first.out and "(1 already present," in first.out
    again = HashEmbedder()
    second = await cli(db_dsn, "import", str(f), embedder=again)
    assert second.out.startswith(f"imported 0 new memories from {f} in ")
    assert "(4 already present, 0 bad lines skipped" in second.out
    assert again.calls == []                                      # nothing re-embedded
    assert await pool.fetchval("SELECT count(*) FROM memories") == 3


async def test_two_concurrent_imports_of_one_file_store_each_line_once(pool, db_dsn, tmp_path):
    rows = [{"content": f"fact number {i} about the garden"} for i in range(60)]
    f = write_jsonl(tmp_path / "in.jsonl", rows)
    a, b = await asyncio.gather(
        cli(db_dsn, "import", str(f), "--batch-size", "7", embedder=HashEmbedder()),
        cli(db_dsn, "import", str(f), "--batch-size", "5", embedder=HashEmbedder()))
    assert (a.code, b.code) == (0, 0)
    assert await pool.fetchval("SELECT count(*) FROM memories") == 60
    assert await pool.fetchval("SELECT count(DISTINCT content) FROM memories") == 60


async def test_a_killed_import_leaves_whole_batches_and_the_rerun_completes(pool, db_dsn, tmp_path):
    rows = [{"content": f"line {i}: the heron waited by the canal number {i}", "metadata": {"i": i}}
            for i in range(4000)]
    f = write_jsonl(tmp_path / "big.jsonl", rows)
    args = ["-m", "src.memory", "import", str(f), "--batch-size", "50", "--index", "live"]
    env = agent_env(DATABASE_URL=db_dsn)
    proc = await asyncio.create_subprocess_exec(sys.executable, *args, cwd=ROOT, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        for _ in range(10**6):                       # poll the committed count until 200
            if (await pool.fetchval("SELECT count(*) FROM memories") >= 200 or time.monotonic() > deadline
                    or proc.returncode is not None):
                break
            await asyncio.sleep(0.05)
        proc.kill()                                  # SIGKILL: no cleanup, mid-batch
    finally:
        await proc.communicate()
    kept = await pool.fetchval("SELECT count(*) FROM memories")
    assert 200 <= kept < 4000, "the import should have been killed part way"
    assert kept % 50 == 0                            # whole batches only
    rerun = await asyncio.create_subprocess_exec(sys.executable, *args, cwd=ROOT, env=env,
                                                 stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(rerun.communicate(), 300)
    assert rerun.returncode == 0, err.decode()
    assert f"imported {4000 - kept} new memories" in out.decode()
    assert f"({kept} already present, 0 bad lines skipped" in out.decode()
    assert await pool.fetchval("SELECT count(*) FROM memories") == 4000
    assert await pool.fetchval("SELECT count(DISTINCT metadata->>'i') FROM memories") == 4000


async def test_export_then_import_restores_an_equivalent_store(pool, db_dsn, empty_db, tmp_path):
    t0 = datetime(2026, 5, 1, 9, 30, tzinfo=UTC)
    t1 = datetime(2026, 6, 2, 14, 0, 5, 123000, tzinfo=UTC)
    t2 = datetime(2026, 7, 3, 8, 15, tzinfo=UTC)
    ids = [await pool.fetchval(
        """INSERT INTO memories (content, memory_type, depth_weight_alpha, depth_weight_beta, immutable,
               source_tag, source_confidence, compressed, access_count, last_accessed, access_timestamps,
               event_time, created_at, metadata, utility_score)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::jsonb, $15) RETURNING id""",
        *row) for row in [
        ("Hannah moved to Porto.", "episodic", 3.5, 1.25, False, "external_user", 1.0, "Hannah → Porto",
         2, t2, [t1, t2], t0, t0, '{"session": 1}', 0.0),
        ("Hannah moved to Porto.", "episodic", 1.0, 4.0, False, "external_user", 1.0, None,
         0, None, [], None, t1, '{}', 0.0),                         # same words, stored later: kept apart
        ("I value honesty.", "narrative", 9.0, 1.0, True, "bootstrap", 0.9, None, 0, None, [], None, t1,
         '{"kind": "value"}', 0.25),
        ("Insight: Hannah's move went well.", "reflection", 2.0, 2.0, False, "internal_consolidation", 0.8,
         None, 1, t2, [t2], t2, t2, '{"nested": {"a": [1, 2]}}', 0.0),
    ]]
    await pool.execute("INSERT INTO memory_supersedes (insight_id, source_id, via) VALUES ($1, $2, 'merge'), "
                       "($1, $3, 'insight')", ids[3], ids[0], ids[1])
    # issue 26: protected, content_contextualized and the links' via were left out (242 merges came back
    # as insights)
    await pool.execute("UPDATE memories SET protected = true WHERE id = $1", ids[2])
    await pool.execute("UPDATE memories SET content_contextualized = $2 WHERE id = $1", ids[0],
                       "Said while planning a visit.\n\nHannah moved to Porto.")
    export_file = tmp_path / "export.jsonl"
    r = await cli(db_dsn, "export", str(export_file), embedder=HashEmbedder())
    assert r.code == 0 and r.out.startswith(f"exported 4 memories to {export_file} in ")
    lines = [json.loads(x) for x in export_file.read_text().splitlines()]
    assert lines[3]["supersedes"] == [{"id": ids[0], "via": "merge"}, {"id": ids[1], "via": "insight"}]
    assert lines[0]["access_timestamps"] == [t1.isoformat(), t2.isoformat()]
    assert [x["protected"] for x in lines] == [False, False, True, False]

    r = await cli(empty_db, "import", str(export_file), "--batch-size", "2", embedder=HashEmbedder())
    assert r.code == 0 and "imported 4 new memories" in r.out and "2 supersedes links" in r.out
    # every column but what a store assigns itself (id), what import re-derives (the vector and its
    # model: embedded again) and import's own key: a column added later is compared too
    columns = ", ".join(await _restorable_columns(pool))
    assert "protected" in columns and "content_contextualized" in columns
    target = await create_pool(empty_db, min_size=1, max_size=2)
    try:
        before = [dict(x) for x in await pool.fetch(f"SELECT {columns} FROM memories ORDER BY id")]
        after = [dict(x) for x in await target.fetch(f"SELECT {columns} FROM memories ORDER BY id")]
        assert after == before
        links = """SELECT i.content, s.content, l.via FROM memory_supersedes l JOIN memories i ON i.id = l.insight_id
                   JOIN memories s ON s.id = l.source_id ORDER BY s.created_at"""
        assert [tuple(x) for x in await target.fetch(links)] == [tuple(x) for x in await pool.fetch(links)]
        again = await cli(empty_db, "import", str(export_file), embedder=HashEmbedder())
        assert "imported 0 new memories" in again.out
        assert await target.fetchval("SELECT count(*) FROM memories") == 4
    finally:
        await target.close()


async def _restorable_columns(pool) -> list[str]:
    rows = await pool.fetch("""SELECT column_name FROM information_schema.columns
                                WHERE table_name = 'memories' AND table_schema = current_schema()
                                ORDER BY ordinal_position""")
    return [r["column_name"] for r in rows if r["column_name"] not in ("id", "embedding", "embed_model", "import_key")]


async def test_export_refuses_to_overwrite_without_force(db_dsn, tmp_path):
    existing = tmp_path / "out.jsonl"
    existing.write_text("keep me\n")
    r = await cli(db_dsn, "export", str(existing), embedder=HashEmbedder())
    assert (r.code, r.err) == (1, f"export: {existing} exists; pass --force to overwrite it\n")
    assert existing.read_text() == "keep me\n"


@pytest.mark.parametrize("command", ["import", "search", "export", "reindex", "stats"])
def test_every_subcommand_has_help(command):
    done = subprocess.run([sys.executable, "-m", "src.memory", command, "--help"], cwd=ROOT, env=agent_env(),
                          capture_output=True, timeout=60)
    assert done.returncode == 0
    assert done.stdout.decode().startswith(f"usage: python -m src.memory {command} [-h]")


@pytest.mark.parametrize(("new", "existing", "rebuild"), [
    (999, 0, False), (1000, 0, True), (1500, 10_000, True), (1499, 10_000, False), (20_000, 100_000, True),
])
def test_rebuild_pays_from_the_measured_break_even(new, existing, rebuild):
    assert rebuild_pays(new, existing) is rebuild


async def _index_state(dsn: str) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        return await hnsw.index_state(conn)
    finally:
        await conn.close()


async def test_auto_rebuilds_a_large_import_when_the_service_is_away(db_dsn, tmp_path):
    f = write_jsonl(tmp_path / "in.jsonl", [{"content": f"note {i} about the orchard"} for i in range(1000)])
    r = await cli(db_dsn, "import", str(f), embedder=HashEmbedder())
    assert "imported 1000 new memories" in r.out and "HNSW index rebuilt in " in r.out
    assert await _index_state(db_dsn) == "valid"


async def test_auto_keeps_the_live_index_while_the_service_is_connected(pool, db_dsn, tmp_path):
    # `pool` connects as application_name "moltbot", as the service does
    f = write_jsonl(tmp_path / "in.jsonl", [{"content": f"note {i} about the orchard"} for i in range(1000)])
    r = await cli(db_dsn, "import", str(f), embedder=HashEmbedder())
    assert r.out.endswith("HNSW index kept)\n")


async def test_the_next_import_rebuilds_an_index_a_crash_left_missing(pool, db_dsn, tmp_path):
    await hnsw.drop_index(pool)                  # as if an import died between drop and rebuild
    f = write_jsonl(tmp_path / "in.jsonl", GOOD[:1])
    r = await cli(db_dsn, "import", str(f), "--index", "live", embedder=HashEmbedder())
    assert "HNSW index rebuilt in " in r.out
    assert await hnsw.index_state(pool) == "valid"
    stats = await cli(db_dsn, "stats", embedder=HashEmbedder())
    assert "HNSW index: valid" in stats.out.splitlines()
