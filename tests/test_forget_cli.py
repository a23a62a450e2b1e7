"""Issue 39 items 1, 3, 5 and 6 from the shell: `python -m src.memory forget` and `correct`,
the dry run's receipt, and an export made before a forget that does not bring it back."""

from __future__ import annotations

import json

from src.recall.store import MemoryStore, NewMemory
from tests.fakes import HashEmbedder
from tests.memory_cli_helpers import cli

SECRET = "My gym locker code is zebrafish 7419."
MARK = "zebrafish"


async def _store(pool, *texts):
    store = MemoryStore(pool, HashEmbedder())
    return [await store.store(NewMemory(t, "episodic", source_tag="external_user")) for t in texts]


async def test_dry_run_lists_and_counts_and_changes_nothing(pool, db_dsn):
    (a,) = await _store(pool, SECRET)
    r = await cli(db_dsn, "forget", "--match", MARK, "--dry-run", embedder=HashEmbedder())
    assert r.code == 0, r.err
    assert f"1. memory #{a} (episodic, external_user)" in r.out
    assert "dry run, nothing was changed: would forget 1 memory" in r.out
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE id = $1", a) == 1
    assert await pool.fetchval("SELECT count(*) FROM forget_receipts") == 0


async def test_forget_needs_yes_off_a_terminal_and_names_missing_ids(pool, db_dsn):
    (a,) = await _store(pool, SECRET)
    r = await cli(db_dsn, "forget", str(a), embedder=HashEmbedder())
    assert r.code == 2 and "add --yes" in r.err
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE id = $1", a) == 1
    r = await cli(db_dsn, "forget", "999999", embedder=HashEmbedder())
    assert r.code == 1 and "no memory #999999" in r.err
    r = await cli(db_dsn, "forget", embedder=HashEmbedder())
    assert r.code == 2


async def test_forget_by_id_prints_the_receipt_and_writes_one_row(pool, db_dsn):
    a, b = await _store(pool, SECRET, "My sister lives in Porto.")
    r = await cli(db_dsn, "forget", str(a), "--yes", embedder=HashEmbedder())
    assert r.code == 0, r.err
    assert "forgot 1 memory" in r.out and "receipt #1 (cli," in r.out
    assert [x["id"] for x in await pool.fetch("SELECT id FROM memories WHERE NOT immutable")] == [b]
    row = await pool.fetchrow("SELECT who, memories, counts FROM forget_receipts")
    assert row["who"] == "cli" and row["memories"] == 1
    assert MARK not in row["counts"] and "locker" not in row["counts"]        # no word in the receipt


async def test_an_export_made_before_a_forget_does_not_bring_it_back(pool, db_dsn, tmp_path):
    a, b = await _store(pool, SECRET, "My sister lives in Porto.")
    out = tmp_path / "before.jsonl"
    assert (await cli(db_dsn, "export", str(out), embedder=HashEmbedder())).code == 0
    assert (await cli(db_dsn, "forget", str(a), "--yes", embedder=HashEmbedder())).code == 0
    await pool.execute("DELETE FROM memories WHERE id = $1", b)      # so the import has one line to add
    r = await cli(db_dsn, "import", str(out), embedder=HashEmbedder())
    assert r.code == 0, r.err
    assert "1 line was of forgotten memories, skipped" in r.err and "--include-forgotten" in r.err
    contents = {x["content"] for x in await pool.fetch("SELECT content FROM memories WHERE NOT immutable")}
    assert contents == {"My sister lives in Porto."}
    r = await cli(db_dsn, "import", str(out), "--include-forgotten", embedder=HashEmbedder())
    assert r.code == 0, r.err
    assert SECRET in {x["content"] for x in await pool.fetch("SELECT content FROM memories")}


async def test_correct_supersedes_and_keeps_the_weight(pool, db_dsn):
    (a,) = await _store(pool, "My dentist appointment is on Tuesday.")
    await pool.execute("UPDATE memories SET depth_weight_alpha = 7, depth_weight_beta = 2, access_count = 5 "
                       "WHERE id = $1", a)
    r = await cli(db_dsn, "correct", str(a), "My dentist appointment is on Thursday.", embedder=HashEmbedder())
    assert r.code == 0, r.err
    new = await pool.fetchrow("SELECT id, depth_weight_alpha AS a, depth_weight_beta AS b, access_count, "
                              "source_tag, metadata FROM memories WHERE content LIKE '%Thursday%'")
    assert (new["a"], new["b"], new["access_count"], new["source_tag"]) == (7, 2, 5, "external_user")
    assert json.loads(new["metadata"])["correction_of"] == a
    assert await pool.fetchval("SELECT via FROM memory_supersedes WHERE insight_id = $1 AND source_id = $2",
                               new["id"], a) == "correction"
    why = await cli(db_dsn, "correct", "999999", "x", embedder=HashEmbedder())
    assert why.code == 1 and "no memory #999999" in why.err
    r = await cli(db_dsn, "correct", str(new["id"]), "My dentist appointment is on Friday.", "--forget-old",
                  embedder=HashEmbedder())
    assert r.code == 0, r.err
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE content LIKE '%Thursday%'") == 0
    assert await pool.fetchval("SELECT who FROM forget_receipts ORDER BY id DESC LIMIT 1") == "correction"
    # the Tuesday stays earlier: the Friday now corrects it
    friday = await pool.fetchval("SELECT id FROM memories WHERE content LIKE '%Friday%'")
    assert await pool.fetchval("SELECT via FROM memory_supersedes WHERE insight_id = $1 AND source_id = $2",
                               friday, a) == "correction"
