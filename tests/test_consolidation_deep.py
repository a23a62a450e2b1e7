"""Deep consolidation (plan §4.2) against the real database, with a scripted model at the backend seam."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime

import pytest

from src.consolidation.deep.deep_pass import (
    DEEP_PHASES,
    ConsolidationParts,
    announce_hook,
    centroid_hook,
    run_deep_pass,
)
from src.consolidation.deep.why import format_chain, why_do_i_believe
from src.consolidation.settings import ConsolidationSettings
from src.gates.emotion import StoreCentroid
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.consolidation_fakes import INSIGHT, ConsolidationModel, language_model
from tests.fakes import HashEmbedder

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
RELATED = "I deploy my small projects with one simple shell script instead of kubernetes, note {}"


async def seed(pool, embedder) -> dict:
    store = MemoryStore(pool, embedder)
    related = await store.store_many([NewMemory(RELATED.format(i), compressed=f"uses a shell script ({i})")
                                      for i in range(20)])
    value = await store.store(NewMemory("I value honesty with the user above looking competent", "semantic",
                                        alpha=8.0, beta=2.0, metadata={"kind": "value"}))
    behaviour = await store.store(NewMemory("I told the user the build passed although I never ran the tests",
                                            source_tag="internal_self"))
    return {"related": related, "value": value, "behaviour": behaviour}


# part 1's phases only: the tests that count a pass's calls pin these (part 2's have their own tests)
PART1 = [p for p in DEEP_PHASES if p.name in ("questions", "insights", "merge", "narrative", "tension",
                                              "recompress")]


async def deep(pool, llm, embedder, **kw):
    return await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=llm, safety=Safety(),
                                                  settings=kw.pop("settings", ConsolidationSettings())),
                               trigger="manual", now=NOW, rng=random.Random(7), **kw)


async def rows(pool, sql, *args):
    return [dict(r) for r in await pool.fetch(sql, *args)]


async def test_deep_pass_with_a_model_writes_insights_narrative_tension_and_recompressions(pool):
    embedder = HashEmbedder()
    ids = await seed(pool, embedder)
    backend = ConsolidationModel()
    announced: list[tuple[str, str]] = []

    async def submit(source: str, text: str):
        announced.append((source, text))

    report = await deep(pool, language_model(backend, pool), embedder, after=[announce_hook(submit)])

    assert report.status == "done" and not report.resumed
    part1 = ["questions", "insights", "merge", "narrative", "tension", "recompress", "recompress"]
    # part 2 (issue 14) spends the rest of the budget on contextual retrieval batches; no conflict
    # or changed source exists here, so reconsolidation asks nothing
    assert backend.kinds() == part1 + ["contextual"] * (len(backend.kinds()) - 7)
    assert report.calls == len(backend.kinds()) and report.budget == 15 and report.calls > 7
    purposes = await rows(pool, "SELECT purpose, ok FROM llm_calls ORDER BY id")
    assert [p["purpose"] for p in purposes] == [f"consolidation:{k}" for k in backend.kinds()]
    assert all(p["ok"] for p in purposes)

    # phase 2: one insight, linked to exactly the three ids it cited, which were in its evidence
    insight_prompt = backend.requests[1].messages[0].content
    cited = [int(x) for x in __import__("re").findall(r"\[(\d+)\]", insight_prompt)][:3]
    q_insight = await rows(pool, "SELECT id, content, metadata FROM memories WHERE metadata->>'via' = 'insight'")
    assert len(q_insight) == 1 and q_insight[0]["content"] == INSIGHT
    links = await rows(pool, "SELECT source_id FROM memory_supersedes WHERE insight_id = $1 ORDER BY source_id",
                       q_insight[0]["id"])
    assert [r["source_id"] for r in links] == sorted(cited)
    # its evidence keeps its weight: an insight does not supersede what it was drawn from (issue 27)
    assert await pool.fetchval("SELECT count(*) FROM consolidation_log WHERE reason = $1",
                               f"superseded by reflection #{q_insight[0]['id']} (insight)") == 0

    # merge: the 20 related memories became one insight with 20 links; nothing deleted
    merged = await rows(pool, "SELECT id, metadata, depth_weight_alpha a, depth_weight_beta b FROM memories "
                              "WHERE metadata->>'via' = 'merge'")
    assert len(merged) == 1
    meta = json.loads(merged[0]["metadata"])
    assert meta["kind"] == "insight" and meta["extractive"] is False and meta["cluster_size"] == 20
    merge_links = await rows(pool, "SELECT source_id FROM memory_supersedes WHERE insight_id = $1 AND via = 'merge' "
                                    "ORDER BY source_id", merged[0]["id"])
    assert [r["source_id"] for r in merge_links] == sorted(ids["related"])
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE id = ANY($1::bigint[])", ids["related"]) == 20
    cluster = await pool.fetchrow("SELECT insight_id, member_ids FROM consolidation_clusters")
    assert cluster["insight_id"] == merged[0]["id"] and sorted(cluster["member_ids"]) == sorted(ids["related"])

    # narrative for the 3+ cluster, explaining the merge insight
    narrative = await rows(pool, "SELECT id, content, memory_type FROM memories WHERE memory_type = 'narrative'")
    assert len(narrative) == 1 and narrative[0]["content"].startswith("I came to value simple tools")
    assert await pool.fetchval("SELECT source_id FROM memory_supersedes WHERE insight_id = $1 AND via = 'narrative'",
                               narrative[0]["id"]) == merged[0]["id"]

    # why do I believe the narrative: narrative -> merge insight -> the 20 experiences
    chain = await why_do_i_believe(pool, narrative[0]["id"])
    assert [(c.memory_id, c.depth, c.via) for c in chain[:2]] == [(narrative[0]["id"], 0, None),
                                                                   (merged[0]["id"], 1, "narrative")]
    assert sorted(c.memory_id for c in chain[2:]) == sorted(ids["related"])
    assert {c.depth for c in chain[2:]} == {2} and {c.via for c in chain[2:]} == {"merge"}
    text = format_chain(narrative[0]["id"], chain)
    assert text.splitlines()[0].startswith(f"#{narrative[0]['id']} [narrative] ")
    assert f"    #{ids['related'][0]} [episodic <- merge] " in text

    # tension: Beta(1, 4), no salience bonus, citing the contradicting behaviour
    tension = await rows(pool, "SELECT content, depth_weight_alpha a, depth_weight_beta b, metadata FROM memories "
                               "WHERE memory_type = 'tension'")
    assert len(tension) == 1 and (tension[0]["a"], tension[0]["b"]) == (1.0, 4.0)
    tmeta = json.loads(tension[0]["metadata"])
    assert tmeta["value_id"] == ids["value"] and tmeta["behaviour_ids"] == [ids["behaviour"]]
    assert tmeta["resolved"] is False and tmeta["status"] == "open"
    assert tension[0]["content"].startswith("I claim to value \"I value honesty")
    tension_prompt = backend.requests[4].messages[0].content
    assert f"[{ids['behaviour']}] I told the user the build passed" in tension_prompt

    # re-compression: 16 gate-time lines regenerated with cluster context, the old line kept
    recompressed = await rows(pool, "SELECT id, compressed, metadata FROM memories WHERE metadata ? 'recompressed_at' "
                                    "ORDER BY id")
    assert len(recompressed) == 16
    first = recompressed[0]
    assert first["compressed"] == f"values simple, pragmatic tooling ({first['id']})"
    assert json.loads(first["metadata"])["gate_compressed"].startswith("uses a shell script (")
    assert "related: The user said: I deploy my small projects" in backend.requests[5].messages[0].content

    # the loop hears about the insights and the tension, as consolidation input
    assert [s for s, _ in announced] == ["consolidation"] * 3
    pass_row = await pool.fetchrow("SELECT status, llm_calls, llm_budget, counts FROM consolidation_passes")
    assert (pass_row["status"], pass_row["llm_calls"], pass_row["llm_budget"]) == ("done", report.calls, 15)
    assert json.loads(pass_row["counts"])["merge"]["counts"] == {"clusters": 1, "insights": 1, "superseded": 20}

    # a second pass over the same store creates no duplicates
    before = await rows(pool, "SELECT memory_type, count(*) n FROM memories GROUP BY 1 ORDER BY 1")
    links_before = await pool.fetchval("SELECT count(*) FROM memory_supersedes")
    second = await deep(pool, language_model(backend, pool), embedder)
    assert second.status == "done" and second.pass_id != report.pass_id
    assert await rows(pool, "SELECT memory_type, count(*) n FROM memories GROUP BY 1 ORDER BY 1") == before
    assert await pool.fetchval("SELECT count(*) FROM memory_supersedes") == links_before
    assert second.phases["questions"]["skipped"] == "no new memories since the last pass"
    first_calls = report.calls                                  # part 2's contextual batches vary
    assert [k for k in backend.kinds()[first_calls:] if k != "contextual"] == ["tension", "recompress"]


async def test_malformed_json_is_repaired_once_and_stored_once(pool):
    embedder = HashEmbedder()
    ids = await seed(pool, embedder)
    backend = ConsolidationModel().push("merge", '{"insights": [{"cluster": 1, "insight": "unterminated')
    phases = [p for p in DEEP_PHASES if p.name == "merge"]
    report = await deep(pool, language_model(backend, pool), embedder, phases=phases)

    assert backend.kinds() == ["merge", "merge"]
    repair = backend.requests[1].messages
    assert [m.role for m in repair] == ["user", "assistant", "user"]
    assert repair[1].content.startswith('{"insights": [{"cluster": 1')
    assert repair[2].content.startswith("Your previous reply could not be used: reply is not a valid MergeAnswer")
    assert [r["purpose"] for r in await rows(pool, "SELECT purpose FROM llm_calls ORDER BY id")] == \
        ["consolidation:merge", "consolidation:merge:repair"]
    assert report.calls == 2
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE metadata->>'via' = 'merge'") == 1
    assert await pool.fetchval("SELECT count(*) FROM memory_supersedes") == len(ids["related"])
    assert await pool.fetchval("SELECT count(*) FROM consolidation_failures") == 0


async def test_citations_outside_the_input_are_rejected_with_a_failure_row(pool):
    embedder = HashEmbedder()
    await seed(pool, embedder)
    bad = json.dumps({"insights": [{"insight": "Made up.", "cited_ids": [999999]}]})
    backend = ConsolidationModel().push("insights", bad)   # well-formed JSON, a citation not shown
    phases = [p for p in DEEP_PHASES if p.name in ("questions", "insights")]
    report = await deep(pool, language_model(backend, pool), embedder, phases=phases)

    assert backend.kinds() == ["questions", "insights"]
    assert report.calls == 2
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE metadata->>'kind' = 'insight'") == 0
    failure = await pool.fetchrow("SELECT phase, error, items FROM consolidation_failures")
    assert failure["phase"] == "insights"
    assert failure["error"] == "insight 0 cites memory ids not in the input: [999999]"
    assert json.loads(failure["items"]) == [{"question": "How does the agent deploy its projects?"}]


async def test_a_failing_batch_is_split_and_only_the_bad_half_is_skipped(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    # near-duplicates: one of ten or more content words differs (merge_overlap 0.8 lets that merge)
    a = await store.store_many([NewMemory(f"the garden tomatoes in the back bed need water every single summer "
                                          f"morning {i}") for i in range(3)])
    b = await store.store_many([NewMemory(f"my old bicycle chain squeaks loudly going up the steep hill to work {i}")
                                for i in range(3)])
    backend = ConsolidationModel().push("merge", "not json", "still not json",     # batch of 2, then repair
                                        "not json", "still not json")               # first half alone, twice
    phases = [p for p in DEEP_PHASES if p.name == "merge"]
    report = await deep(pool, language_model(backend, pool), embedder, phases=phases)

    # 2 clusters + repair, then each half alone: the first with its repair, the second answered
    assert backend.kinds() == ["merge"] * 5 and report.calls == 5
    assert [r.messages[0].content.count("Cluster ") for r in backend.requests] == [2, 2, 1, 1, 1]
    merged = await rows(pool, "SELECT m.id, array_agg(s.source_id ORDER BY s.source_id) src FROM memories m "
                              "JOIN memory_supersedes s ON s.insight_id = m.id GROUP BY m.id")
    assert len(merged) == 1
    skipped_half, kept_half = (a, b) if sorted(merged[0]["src"]) == sorted(b) else (b, a)
    assert sorted(merged[0]["src"]) == sorted(kept_half)
    failure = await pool.fetchrow("SELECT phase, error, items FROM consolidation_failures")
    assert failure["phase"] == "merge" and "still not a valid MergeAnswer after one repair" in failure["error"]
    assert json.loads(failure["items"]) == [{"cluster": sorted(skipped_half)}]


async def test_offline_pass_merges_extractively_and_logs_skipped_steps(pool, caplog):
    embedder = HashEmbedder()
    ids = await seed(pool, embedder)
    centroid = StoreCentroid(refresh_s=1e9, clock=lambda: 0.0)
    await centroid.get(pool, embedder.model_name)
    await MemoryStore(pool, embedder).store(NewMemory("a memory the cached centroid has not seen"))
    caplog.set_level("INFO", logger="src.consolidation")

    report = await deep(pool, None, embedder,
                        after=[centroid_hook(lambda: centroid.recompute(pool, embedder.model_name))])

    assert report.status == "done" and report.calls == 0
    assert await pool.fetchval("SELECT count(*) FROM llm_calls") == 0
    merged = await pool.fetchrow("SELECT id, content, metadata FROM memories WHERE metadata->>'via' = 'merge'")
    meta = json.loads(merged["metadata"])
    assert meta["extractive"] is True and sorted(meta["cited"]) == sorted(ids["related"])
    # the most central member's words, then what each other one adds (its number)
    central = await pool.fetchval("SELECT content FROM memories WHERE id = $1", meta["cited"][0])
    added = "; ".join(f"note {ids['related'].index(i)}" for i in meta["cited"][1:])
    assert merged["content"] == f"{central}. Also: {added}."
    assert sorted(r["source_id"] for r in await pool.fetch(
        "SELECT source_id FROM memory_supersedes WHERE insight_id = $1", merged["id"])) == sorted(ids["related"])
    assert await pool.fetchval("SELECT count(*) FROM consolidation_log WHERE actor = 'consolidation' "
                               "AND operation = 'contradict' AND requested_delta = 0.3") == 20
    skipped = json.loads(await pool.fetchval("SELECT skipped FROM consolidation_passes"))
    assert sorted(skipped) == ["contextual", "insights", "merge:llm_insight", "narrative", "questions",
                               "recompress", "reconsolidation", "skills", "tension"]
    assert all(v == "no language model is configured (reflex mode)" for v in skipped.values())
    skip_logs = [r.getMessage() for r in caplog.records if r.getMessage().startswith("deep pass 1: ")]
    assert len(skip_logs) == 9 and len(set(skip_logs)) == 9      # once per step per pass
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE memory_type IN ('narrative', 'tension')") == 0
    # the centroid was recomputed in full after the pass: it now counts every memory with a vector
    assert centroid._count == await pool.fetchval("SELECT count(*) FROM memories WHERE embedding IS NOT NULL")


async def test_one_pass_at_a_time_across_connections(pool):
    settings = ConsolidationSettings()
    async with pool.acquire() as other:
        await other.execute("SELECT pg_advisory_lock($1)", settings.deep.lock_key)
        assert await deep(pool, None, HashEmbedder(), settings=settings) is None
        await other.execute("SELECT pg_advisory_unlock($1)", settings.deep.lock_key)
    assert await pool.fetchval("SELECT count(*) FROM consolidation_passes") == 0


@pytest.mark.parametrize("aligned", [True])
async def test_tension_resolves_when_later_behaviour_aligns_and_tires_after_five_surfaces(pool, aligned):
    embedder = HashEmbedder()
    ids = await seed(pool, embedder)
    backend = ConsolidationModel()
    phases = [p for p in DEEP_PHASES if p.name == "tension"]
    await deep(pool, language_model(backend, pool), embedder, phases=phases)
    tension_id = await pool.fetchval("SELECT id FROM memories WHERE memory_type = 'tension'")

    later = await MemoryStore(pool, embedder).store(
        NewMemory("I told the user plainly that I had not run the tests yet", source_tag="internal_self"))
    backend.tension_contradicts = False
    await deep(pool, language_model(backend, pool), embedder, phases=phases)
    meta = json.loads(await pool.fetchval("SELECT metadata FROM memories WHERE id = $1", tension_id))
    assert meta["resolved"] is True and meta["status"] == "resolved" and later in meta["resolved_by"]
    assert ids["behaviour"] not in meta["resolved_by"]      # older than the tension: not evidence of change

    # fatigue: an unresolved tension retrieved more than 5 times is acknowledged
    backend.tension_contradicts = True
    await deep(pool, language_model(backend, pool), embedder, phases=phases)
    second = await pool.fetchval("SELECT id FROM memories WHERE memory_type = 'tension' AND id <> $1", tension_id)
    await pool.execute("UPDATE memories SET access_count = 6 WHERE id = $1", second)
    await deep(pool, language_model(backend, pool), embedder, phases=phases)
    meta2 = json.loads(await pool.fetchval("SELECT metadata FROM memories WHERE id = $1", second))
    assert (meta2["status"], meta2["surface_count"], meta2["resolved"]) == ("acknowledged", 6, False)
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE memory_type = 'tension'") == 2


async def test_a_pass_killed_mid_phase_resumes_without_duplicates(pool, db_dsn, tmp_path):
    import asyncio
    import signal
    import sys
    import time as _time

    from tests.consolidation_child import FIRST, SECOND
    from tests.proc import ROOT, agent_env

    embedder = HashEmbedder()
    ids = await seed(pool, embedder)
    marker = tmp_path / "frozen"
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.consolidation_child", db_dsn, str(marker), cwd=ROOT, env=agent_env(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        deadline = _time.monotonic() + 120
        while not marker.exists():
            assert child.returncode is None, (await child.stderr.read()).decode()
            assert _time.monotonic() < deadline, "the child never reached the second insight"
            await asyncio.sleep(0.1)
        child.send_signal(signal.SIGKILL)
        assert await asyncio.wait_for(child.wait(), 30) == -signal.SIGKILL
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()

    # the server lets go of a killed client's session (and its advisory lock) when it sees the
    # socket closed: under load that can come after the next pass asks for the lock
    for _ in range(300):
        if not await pool.fetchval("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"):
            break
        await asyncio.sleep(0.1)

    # the kill left: the pass 'running', phase 1 done, the answer of phase 2 saved, one insight written
    assert await pool.fetchval("SELECT status FROM consolidation_passes") == "running"
    assert [r["content"] for r in await pool.fetch(
        "SELECT content FROM memories WHERE metadata->>'via' = 'insight'")] == [FIRST]

    backend = ConsolidationModel()
    report = await deep(pool, language_model(backend, pool), embedder, phases=PART1)
    assert report.resumed and report.status == "done" and report.trigger == "manual"
    # not asked again: phase 1 was checkpointed, phase 2's answer was saved before the writes
    assert backend.kinds() == ["merge", "narrative", "tension", "recompress", "recompress"]
    insights = await pool.fetch("SELECT content FROM memories WHERE metadata->>'via' = 'insight' ORDER BY id")
    assert [r["content"] for r in insights] == [FIRST, SECOND]
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE metadata->>'via' = 'merge'") == 1
    row = await pool.fetchrow("SELECT count(*) n, max(resumed) resumed, max(llm_calls) calls FROM consolidation_passes")
    assert (row["n"], row["resumed"], row["calls"]) == (1, 1, 7)
    assert [r["purpose"] for r in await pool.fetch("SELECT purpose FROM llm_calls ORDER BY id")][:2] == \
        ["consolidation:questions", "consolidation:insights"]
    first_sources = await pool.fetch(
        "SELECT s.source_id FROM memory_supersedes s JOIN memories m ON m.id = s.insight_id WHERE m.content = $1",
        FIRST)
    assert len(first_sources) == 2 and all(r["source_id"] in ids["related"] for r in first_sources)


async def test_a_spent_budget_defers_work_to_the_next_pass(pool):
    embedder = HashEmbedder()
    await seed(pool, embedder)
    backend = ConsolidationModel()
    settings = ConsolidationSettings(deep={"max_llm_calls": 2})
    report = await deep(pool, language_model(backend, pool), embedder, settings=settings)

    assert backend.kinds() == ["questions", "insights"] and report.calls == 2
    assert report.skipped["merge:llm_insight"] == "the pass's 2 LLM calls are spent; 1 cluster(s) wait for the next pass"
    assert report.skipped["tension"] == "the pass's 2 LLM calls are spent"
    assert await pool.fetchval("SELECT count(*) FROM consolidation_clusters") == 0   # not merged extractively
    nxt = await deep(pool, language_model(backend, pool), embedder, settings=ConsolidationSettings())
    assert backend.kinds()[2] == "merge" and nxt.phases["merge"]["counts"]["insights"] == 1


async def test_a_cancelled_pass_stays_running_and_the_next_one_resumes_it(pool):
    import asyncio

    embedder = HashEmbedder()
    await seed(pool, embedder)
    reached = asyncio.Event()

    class Stalling(ConsolidationModel):
        async def complete(self, request):
            if self.kind_of(request) == "narrative":
                reached.set()
                await asyncio.sleep(3600)        # shutdown arrives while the model thinks
            return await super().complete(request)

    stalling = Stalling()
    task = asyncio.create_task(deep(pool, language_model(stalling, pool), embedder, phases=PART1))
    await asyncio.wait_for(reached.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    row = await pool.fetchrow("SELECT status, llm_calls FROM consolidation_passes")
    assert (row["status"], row["llm_calls"]) == ("running", 3)
    # the advisory lock went with the cancelled pass: the next one gets it and resumes
    backend = ConsolidationModel()
    report = await deep(pool, language_model(backend, pool), embedder, phases=PART1)
    assert report.resumed and report.status == "done"
    assert backend.kinds() == ["narrative", "tension", "recompress", "recompress"]
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE metadata->>'via' = 'merge'") == 1
