"""Issue 39 items 2, 3 and 7: one forget removes a memory, re-derives or removes what was
built from it, scrubs its words from every table, and writes a receipt — all or nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from src.erasure import derived, matches
from src.erasure.forget import digest, forget
from src.erasure.placeholder import forgotten_text, needles, parts
from src.recall.store import MemoryStore, NewMemory
from tests.fakes import HashEmbedder

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
SECRET = "My gym locker code is zebrafish 7419, the blue locker by the pool."
#: searched for in every row (digits alone also match the text form of a vector)
MARK = "zebrafish"


async def _store(pool, *texts, tag="external_user", mtype="episodic"):
    store = MemoryStore(pool, HashEmbedder())
    return [await store.store(NewMemory(t, mtype, source_tag=tag)) for t in texts]


async def _link(pool, derived_id, sources, via):
    await pool.execute("INSERT INTO memory_supersedes (insight_id, source_id, via) "
                       "SELECT $1, unnest($2::bigint[]), $3", derived_id, sources, via)


async def _holding(pool, word: str) -> dict[str, int]:
    tables = [r["table_name"] for r in await pool.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
        "AND table_type = 'BASE TABLE'")]
    out = {}
    for t in tables:
        n = await pool.fetchval(f'SELECT count(*) FROM "{t}" AS x WHERE x::text ILIKE $1', f"%{word}%")
        if n:
            out[t] = n
    return out


def test_placeholder_and_needles():
    assert forgotten_text("my code is 7419") == "[forgotten: 4 words]"
    assert forgotten_text("x") == "[forgotten: 1 word]"
    found = needles(parts('He said "7419" twice.\nThen left.'))
    assert 'he said "7419" twice. then left.' in found
    assert 'he said \\"7419\\" twice. then left.' in found      # as a JSON column writes it
    assert all(n == n.lower() and len(n) >= 3 for n in found)


async def test_a_merge_is_rewritten_without_the_source_and_an_insight_goes(pool):
    a, b, c = await _store(pool, SECRET, "I train at the gym on Mondays.", "The gym pool opens at 7am.")
    merge = (await _store(pool, f"{SECRET} Also: train at the gym on Mondays; gym pool opens at 7am.",
                          tag="internal_consolidation", mtype="reflection"))[0]
    insight = (await _store(pool, "The user keeps locker zebrafish at the gym.", tag="internal_consolidation",
                            mtype="reflection"))[0]
    narrative = (await _store(pool, "A story of the gym with code zebrafish.", tag="internal_consolidation",
                              mtype="reflection"))[0]
    await _link(pool, merge, [a, b, c], "merge")
    await _link(pool, insight, [a, b], "insight")
    await _link(pool, narrative, [merge], "narrative")
    plan = await derived.plan(pool, [a])
    assert sorted(plan.removed) == sorted([a, insight, narrative])
    assert [r.id for r in plan.rewrites] == [merge] and sorted(plan.rewrites[0].sources) == [b, c]
    assert MARK not in plan.rewrites[0].content and "Mondays" in plan.rewrites[0].content

    found, missing = await matches.by_ids(pool, [a, 999999])
    assert missing == [999999]
    rec, gone = await forget(pool, HashEmbedder(), found, who="cli", now=NOW)
    assert rec.id is not None and rec.memories == 3 and rec.rewritten == 1
    assert sorted(gone.memory_ids) == sorted([a, insight, narrative])
    left = {r["id"]: r["content"] for r in await pool.fetch("SELECT id, content FROM memories")}
    assert a not in left and insight not in left and narrative not in left
    assert MARK not in left[merge] and {b, c} <= set(left)
    assert await pool.fetchval("SELECT embedding IS NOT NULL FROM memories WHERE id = $1", merge)
    assert sorted(r["source_id"] for r in await pool.fetch(
        "SELECT source_id FROM memory_supersedes WHERE insight_id = $1", merge)) == [b, c]
    assert await _holding(pool, MARK) == {}
    row = await pool.fetchrow("SELECT who, memories, counts FROM forget_receipts WHERE id = $1", rec.id)
    assert row["who"] == "cli" and row["memories"] == 3
    assert json.loads(row["counts"])["memories"]["deleted"] == 3
    assert await pool.fetchval("SELECT count(*) FROM forgotten_contents WHERE digest = $1", digest(SECRET)) == 1


async def test_the_words_leave_every_log_and_the_counters_stay_true(pool):
    (a,) = await _store(pool, SECRET)
    (keep,) = await _store(pool, "My sister lives in Porto.")
    await pool.execute("INSERT INTO input_journal (session_id, kind, line, state) VALUES ('s', 'message', $1, 'done')",
                       SECRET)
    # the code alone, in a line that holds no clause of the memory: its token is enough
    await pool.execute("INSERT INTO input_journal (session_id, kind, line, state) "
                       "VALUES ('s', 'command', '/memory 7419', 'done')")
    await pool.execute(
        "INSERT INTO thought_log (session_id, cycle, source_tag, attention_focus, candidates, output) "
        "VALUES ('s', 1, 'external_user', $1, $2::jsonb, 'Noted: code zebrafish it is.')",
        SECRET, json.dumps([{"preview": SECRET[:60] + "…", "id": a}, {"preview": "My sister lives in Porto."}]))
    await pool.execute("INSERT INTO gate_decisions (gate, source_tag, content_preview, rule, memory_id, action, reason) "
                       "VALUES ('exit', 'external_user', $1, 'statement', $2, 'persist', 'a fact')", SECRET[:80], a)
    await pool.execute("INSERT INTO dmn_items (channel, memory_ids, text) VALUES ('creative', $1, 'a thought')", [a])
    await pool.execute("INSERT INTO near_miss_pending (at, memory_ids, amount, query) VALUES (now(), $1, 0.1, 'gym?')", [a, keep])
    await pool.execute("INSERT INTO scratch_buffer (content, source_tag, expires_at) "
                       "VALUES ($1, 'external_user', now() + interval '1 hour')", SECRET)
    await pool.execute("UPDATE memories SET conversation_context = $1, compressed = 'lives in Porto after zebrafish', "
                       "metadata = metadata || '{\"gate_compressed\": \"sister in Porto\"}' WHERE id = $2",
                       SECRET, keep)
    kinds_before = await pool.fetchval("SELECT sum(memories) FROM memory_kind_counts")
    found, _ = await matches.by_ids(pool, [a])
    dry, _ = await forget(pool, None, found, who="guardian command", words="zebrafish", dry_run=True, now=NOW)
    assert dry.id is None and dry.memories == 1
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE id = $1", a) == 1     # nothing changed
    assert await pool.fetchval("SELECT count(*) FROM forget_receipts") == 0
    rec, _ = await forget(pool, None, found, who="guardian command", words="zebrafish", now=NOW)
    assert rec.counts == dry.counts                     # the dry run counted the same statements
    assert await _holding(pool, MARK) == {}
    assert await _holding(pool, "blue locker") == {}
    assert rec.counts["dmn_items"] == {"deleted": 1} and rec.counts["scratch_buffer"] == {"deleted": 1}
    assert rec.counts["near_miss_pending"] == {"deleted": 1}
    assert rec.counts["input_journal"] == {"scrubbed": 2} and rec.counts["thought_log"] == {"scrubbed": 1}
    assert await pool.fetchval("SELECT count(*) FROM input_journal WHERE line LIKE '%7419%'") == 0
    focus, cands, output = await pool.fetchrow("SELECT attention_focus, candidates, output FROM thought_log")
    assert focus == forgotten_text(SECRET) and output.startswith("[forgotten: ")
    assert json.loads(cands)[1]["preview"] == "My sister lives in Porto."      # the rest of the row stays
    kept = await pool.fetchrow("SELECT compressed, conversation_context FROM memories WHERE id = $1", keep)
    assert kept["compressed"] == "sister in Porto" and kept["conversation_context"] is None
    assert await pool.fetchval("SELECT sum(memories) FROM memory_kind_counts") == kinds_before - 1
    assert await pool.fetchval("SELECT count(*) FROM memory_standing WHERE id = $1", a) == 0


async def test_by_words_lists_memories_and_lines(pool):
    (a,) = await _store(pool, SECRET)
    await pool.execute("INSERT INTO input_journal (session_id, kind, line, state) VALUES ('s', 'message', $1, 'done')",
                       "remember 7419 for the locker")
    found = await matches.by_words(pool, "7419")
    assert [(m.kind, m.id) for m in found][0] == ("memory", a)
    assert [m.kind for m in found] == ["memory", "journal"]
    text = matches.listing(found, NOW)
    assert "1. memory #" in text and "2. input line" in text
    assert matches.choose("2", found) == [found[1]]
    assert matches.choose("y", found) == found and matches.choose("n", found) == []
    assert "no item 3" in matches.choose("3", found)
    assert matches.choose("what about it?", found) is None



async def test_a_recompression_drawn_beside_a_forgotten_memory_is_undone(pool):
    a, b, c = await _store(pool, SECRET, "I swim at the gym on Mondays.", "I lift weights at the gym.")
    await pool.execute("INSERT INTO consolidation_clusters (fingerprint, member_ids) VALUES ('f1', $1)", [a, b, c])
    await pool.execute(
        "UPDATE memories SET compressed = 'keeps fit at the gym (locker by the pool)', metadata = metadata || "
        "jsonb_build_object('recompressed_at', now(), 'recompressed_by_pass', 1, 'gate_compressed', 'swims Mondays') "
        "WHERE id = $1", b)
    found, _ = await matches.by_ids(pool, [a])
    rec, _ = await forget(pool, None, found, who="cli", now=NOW)
    assert rec.counts["memories"]["recompressed_reset"] == 1
    row = await pool.fetchrow("SELECT compressed, metadata FROM memories WHERE id = $1", b)
    assert row["compressed"] == "swims Mondays" and "recompressed_at" not in json.loads(row["metadata"])
    assert await pool.fetchval("SELECT count(*) FROM consolidation_clusters") == 0
