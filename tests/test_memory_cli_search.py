"""`python -m src.memory search / reindex / stats` against the real database."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from src.db.instance_lock import InstanceLock
from src.recall.search import search_hybrid
from src.weights.stochastic import diminished_gain
from tests.fakes import HashEmbedder
from tests.memory_cli_helpers import cli, write_jsonl
from tests.proc import ROOT, agent_env

FACTS = ["Hannah moved to Porto for a new job", "I drink green tea every morning",
         "Marco plays the cello on Sundays", "the garage roof leaks in winter",
         "Priya adopted a beagle called Biscuit", "we plan a trip to Lisbon in June"]

SEARCH_KEYS = ["id", "final", "memory_type", "source_tag", "center", "alpha", "beta", "search", "act_r",
               "relevance", "coactivation", "weighted", "rerank", "content", "metadata", "event_time", "created_at",
               "said"]


async def _load(db_dsn, tmp_path, embedder=None) -> None:
    f = write_jsonl(tmp_path / "facts.jsonl", [{"content": t, "metadata": {"n": i}} for i, t in enumerate(FACTS)])
    r = await cli(db_dsn, "import", str(f), embedder=embedder or HashEmbedder())
    assert r.code == 0, r.err


async def _state(pool) -> list[tuple]:
    rows = await pool.fetch("""SELECT id, depth_weight_alpha, depth_weight_beta, access_count, last_accessed,
                                      access_timestamps FROM memories ORDER BY id""")
    return [tuple(r) for r in rows] + [(await pool.fetchval("SELECT count(*) FROM memory_co_access"),
                                        await pool.fetchval("SELECT count(*) FROM consolidation_log"))]


async def test_search_json_has_every_component_and_changes_nothing(pool, db_dsn, tmp_path):
    await _load(db_dsn, tmp_path)
    before = await _state(pool)
    embedder = HashEmbedder()
    r = await cli(db_dsn, "search", "where did Hannah move", "--k", "3", "--json", "--seed", "4", embedder=embedder)
    assert r.code == 0, r.err
    [answer] = r.json_lines
    assert list(answer) == ["query", "blend", "reranked", "rerank_skipped_reason", "degraded", "results", "working"]
    assert answer["working"] == []          # nothing said in this store is waiting for the gate
    assert answer["query"] == "where did Hannah move"
    assert list(answer["blend"]) == ["semantic", "coactivation", "noise", "emotional", "recency"]
    assert (answer["reranked"], answer["rerank_skipped_reason"]) == (False, "no reranker configured")
    assert len(answer["results"]) == 3
    top = answer["results"][0]
    assert list(top) == SEARCH_KEYS
    assert top["content"] == FACTS[0] and top["metadata"] == {"n": 0}
    assert list(top["search"]) == ["score", "rrf", "vector_rank", "cosine", "fulltext_rank", "fulltext_score",
                                   "own_rank", "recency"]
    assert list(top["act_r"]) == ["B", "S", "P", "noise", "A", "p_retrieve"]
    assert top["search"]["fulltext_rank"] == 1 and top["search"]["vector_rank"] == 1
    a = top["act_r"]
    assert a["A"] == pytest.approx(a["B"] + a["S"] + a["P"] + a["noise"], abs=2e-4)
    assert [c.task_type for c in embedder.calls] == ["RETRIEVAL_QUERY"]
    assert await _state(pool) == before                  # read-only: no weight, access or co-access change


async def test_search_with_mutate_applies_retrieval_effects(pool, db_dsn, tmp_path):
    await _load(db_dsn, tmp_path)
    r = await cli(db_dsn, "search", "where did Hannah move", "--k", "2", "--json", "--mutate", "--seed", "4",
                  embedder=HashEmbedder())
    ids = [x["id"] for x in r.json_lines[0]["results"]]
    touched = await pool.fetch("SELECT id, access_count, depth_weight_alpha FROM memories WHERE access_count > 0 "
                               "ORDER BY id")
    assert [(t["id"], t["access_count"], t["depth_weight_alpha"]) for t in touched] == [
        (i, 1, 1.0 + diminished_gain(0.1, 5.0)) for i in sorted(ids)]   # Beta(1, 4): evidence 5
    assert await pool.fetchval("SELECT count(*) FROM memory_co_access") == 1


async def test_search_text_output_names_each_stage(pool, db_dsn, tmp_path):
    await _load(db_dsn, tmp_path)
    r = await cli(db_dsn, "search", "green tea\x1b[31m", "--k", "1", "--seed", "1", embedder=HashEmbedder())
    lines = r.out.splitlines()
    assert lines[0] == "query: green tea\\x1b[31m"          # control characters escaped
    assert lines[2] == "rerank skipped: no reranker configured"
    assert lines[3].startswith("1. #2  final ")
    assert lines[4].startswith("   search: score ") and " full-text #1 idf " in lines[4]
    assert lines[5].startswith("   act-r: B ") and " P(retrieve) " in lines[5]
    assert lines[6].startswith("   relevance ") and " from semantic " in lines[6]
    assert lines[7].startswith("   weighted ") and lines[7].endswith("  rerank —")
    assert lines[8:] == [f"   content: {FACTS[1]}", "   metadata: n 1"]      # words, not JSON (issue 26)


async def test_search_batch_prints_one_json_line_per_query_in_order(pool, db_dsn, tmp_path):
    await _load(db_dsn, tmp_path)
    queries = tmp_path / "q.txt"
    queries.write_text("cello on Sundays\n\nbeagle Biscuit\nLisbon trip\n")
    r = await cli(db_dsn, "search", "--batch", str(queries), "--k", "1", "--seed", "2", embedder=HashEmbedder())
    answers = r.json_lines
    assert [a["query"] for a in answers] == ["cello on Sundays", "", "beagle Biscuit", "Lisbon trip"]
    assert [a["results"][0]["content"] if a["results"] else None for a in answers] == [
        FACTS[2], None, FACTS[4], FACTS[5]]
    assert answers[1]["degraded"] == ["empty query: nothing to recall"]


async def test_search_usage_errors(db_dsn):
    r = await cli(db_dsn, "search", embedder=HashEmbedder())
    assert (r.code, r.err) == (2, 'search: give either a query or --batch FILE (search "what did I plan?")\n')


async def test_reindex_after_switching_models_lets_the_vector_arm_see_the_rows(pool, db_dsn, tmp_path):
    await _load(db_dsn, tmp_path, HashEmbedder(model_name="model-a"))
    new = HashEmbedder(model_name="model-b")
    query = (await new.embed(["Priya beagle"], "RETRIEVAL_QUERY"))[0]
    hits = await search_hybrid(pool, "Priya beagle", query, embed_model="model-b")
    assert all(h.vec_rank is None for h in hits)          # model-a vectors are never compared
    r = await cli(db_dsn, "reindex", "--batch-size", "4", embedder=new)
    assert r.code == 0, r.err
    assert r.out.startswith("re-embedded 6 memories with model-b in ")
    assert r.out.endswith("s (0 left stale: changed meanwhile or failing)\n")
    hits = await search_hybrid(pool, "Priya beagle", query, embed_model="model-b")
    assert hits[0].content == FACTS[4] and hits[0].vec_rank == 1
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE embed_model = 'model-b'") == 6
    again = await cli(db_dsn, "reindex", embedder=new)
    assert again.out.startswith("re-embedded 0 memories")


class CrashingEmbedder(HashEmbedder):
    """Dies (like a killed process) on the embed call numbered `crash_at`."""

    def __init__(self, crash_at: int, **kw):
        super().__init__(**kw)
        self.crash_at = crash_at

    async def embed(self, texts, task_type, titles=None):
        if len(self.calls) == self.crash_at:
            raise KeyboardInterrupt
        return await super().embed(texts, task_type, titles)


async def test_reindex_all_resumes_after_a_crash(pool, db_dsn, tmp_path):
    await _load(db_dsn, tmp_path, HashEmbedder(model_name="model-a"))
    ids = [r["id"] for r in await pool.fetch("SELECT id FROM memories ORDER BY id")]
    try:
        await cli(db_dsn, "reindex", "--all", "--batch-size", "2", embedder=CrashingEmbedder(2, model_name="model-b"))
    except KeyboardInterrupt:
        pass
    run = await pool.fetchrow("SELECT last_id, done, finished_at FROM reindex_runs")
    assert (run["last_id"], run["done"], run["finished_at"]) == (ids[3], 4, None)
    resumed = HashEmbedder(model_name="model-b")
    r = await cli(db_dsn, "reindex", "--all", "--batch-size", "2", embedder=resumed)
    assert r.out.splitlines()[0] == (f"resuming the all re-embedding with model-b after memory #{ids[3]} "
                                     "(4 done before)")
    assert [len(c.texts) for c in resumed.calls] == [2]   # only the last two rows
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE embed_model = 'model-b'") == 6
    assert await pool.fetchval("SELECT finished_at IS NOT NULL FROM reindex_runs") is True


async def test_stats_counts_weights_models_and_sizes(pool, db_dsn, tmp_path):
    await _load(db_dsn, tmp_path)
    await pool.execute("UPDATE memories SET memory_type = 'semantic', source_tag = 'book' WHERE id <= 2")
    await pool.execute("INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta) "
                       "VALUES ('contested', 6, 7), ('fresh', 1, 1.5)")
    r = await cli(db_dsn, "stats", "--json", embedder=HashEmbedder())
    st = r.json_lines[0]
    assert st["memories"] == 8
    assert st["by_type"] == {"episodic": 6, "semantic": 2}
    assert st["by_source"] == {"import": 4, "external_user": 2, "book": 2}
    assert st["weights"] == {"center_mean": round((6 * 0.2 + 6 / 13 + 0.4) / 8, 4), "center_p10": 0.2,
                             "center_p50": 0.2, "center_p90": st["weights"]["center_p90"], "contested": 1,
                             "uninformed": 1, "dormant": 0, "immutable": 0}
    assert st["embed_models"] == {"fake-hash-768": 6, "(no embedding)": 2}
    assert st["hnsw_index"] == "valid"
    assert st["tables"]["memories"]["bytes"] > 0
    text = await cli(db_dsn, "stats", embedder=HashEmbedder())
    assert text.out.splitlines()[:3] == ["memories: 8", "by type: episodic 6, semantic 2",
                                         "by source: import 4, book 2, external_user 2"]


async def test_the_cli_works_while_the_instance_lock_is_held(tmp_path):
    """The service holds the data dir's lock; a read-only search must still run beside it."""
    config = tmp_path / "runtime.yaml"
    config.write_text(f"database: {{data_dir: {tmp_path / 'pg'}, stop_embedded_on_exit: true}}\n")
    with InstanceLock(tmp_path):                     # as a running service would hold it
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "src.memory", "--config", str(config), "search", "anything", "--json",
            cwd=ROOT, env=agent_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode == 0, err.decode()
    answer = json.loads(out)
    assert (answer["query"], answer["results"]) == ("anything", [])
