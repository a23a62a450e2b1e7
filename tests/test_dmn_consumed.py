"""Every DMN channel ends somewhere (issue 25 item 4, plan §4.7): self-prompts are consumed
by the loop, creative associations and identity signals by the next deep pass's insights
(with `why` showing where an insight came from), and what nothing takes expires."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

from src.consolidation.deep.deep_pass import DEEP_PHASES, ConsolidationParts, run_deep_pass
from src.consolidation.deep.why import format_chain, why_do_i_believe
from src.consolidation.settings import ConsolidationSettings
from src.dmn import repository as repo
from src.dmn.settings import DmnSettings
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.consolidation_fakes import ConsolidationModel, ids_in, language_model
from tests.fakes import HashEmbedder
from tests.test_dmn import _generator
from tests.test_loop import _mind

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
INSIGHTS = [p for p in DEEP_PHASES if p.name == "insights"]
CONNECTION = "Blue paint every spring links the harbour door and the beehives."
VALUE = "Mara painting the beehives blue each spring shows careful craft."


async def _item(pool, channel: str, memory_ids: list[int], detail: dict, at: datetime, text: str = "an item") -> int:
    return await pool.fetchval("INSERT INTO dmn_items (at, channel, memory_ids, text, detail) "
                               "VALUES ($1, $2, $3, $4, $5::jsonb) RETURNING id",
                               at, channel, memory_ids, text, json.dumps(detail))


def _answer(request) -> str:
    """The model's reply to a DMN question: an insight citing the item's memories (shown first)."""
    prompt = request.messages[0].content
    ids = ids_in(prompt)
    if prompt.startswith("Question: What connects '"):
        assert "', 40 days apart, and what does the connection show?" in prompt.splitlines()[0]
        return json.dumps({"insights": [{"insight": CONNECTION, "cited_ids": ids[:2]}]})
    assert prompt.startswith("Question: Does '") and "my value 'I value careful craft'" in prompt
    return json.dumps({"insights": [{"insight": VALUE, "cited_ids": ids[:1]}]})


async def _pass(pool, backend, embedder):
    return await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=language_model(backend, pool),
                                                  safety=Safety(), settings=ConsolidationSettings()),
                               trigger="manual", now=NOW, rng=random.Random(7), phases=INSIGHTS)


async def test_the_queued_self_prompt_is_consumed_by_the_loop(pool, tmp_path):
    mind, _ = await _mind(pool, tmp_path)
    await mind.store.store_many([
        NewMemory("tomato seedlings planted in the garden bed", event_time=NOW - timedelta(days=40)),
        NewMemory("tomato plants in the garden bed need more sun", event_time=NOW)])
    gen = await _generator(mind, settings=DmnSettings(samples_per_tick=2, creative_low=0.5, creative_high=0.8))
    report = await gen.tick(NOW)
    items = {r["channel"]: r for r in await pool.fetch("SELECT * FROM dmn_items")}
    assert report.queued_item_id == items["self_prompt"]["id"]
    assert (items["self_prompt"]["consumed_by"], items["self_prompt"]["consumed_at"]) == ("loop", NOW)
    assert (items["creative"]["consumed_by"], items["creative"]["consumed_at"]) == (None, None)   # for the deep pass


async def test_associations_become_insights_of_the_next_deep_pass_and_why_shows_them(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    door = await store.store(NewMemory("The lighthouse keeper painted the harbour door blue in spring."))
    hives = await store.store(NewMemory("My sister Mara paints the beehives blue every spring."))
    creative = await _item(pool, "creative", [door, hives], {"days_apart": 40.0, "similarity": 0.4},
                           NOW - timedelta(hours=1), "A connection across 40 days: ...")
    twin = await _item(pool, "creative", [door, hives], {"days_apart": 40.0}, NOW - timedelta(hours=3))
    identity = await _item(pool, "identity", [hives], {"value": "I value careful craft"},
                           NOW - timedelta(hours=2), "'My sister Mara paints...' touches my value ...")
    backend = ConsolidationModel().push("insights", _answer, _answer)
    report = await _pass(pool, backend, embedder)

    assert backend.kinds() == ["insights", "insights"] and report.calls == 2
    made = {r["dmn_item_id"]: r for r in await pool.fetch(
        "SELECT id, content, (metadata->>'dmn_item_id')::bigint AS dmn_item_id, metadata->>'dmn_channel' AS ch, "
        "metadata->>'question' AS question FROM memories WHERE metadata ? 'dmn_item_id'")}
    assert set(made) == {creative, identity}
    assert (made[creative]["content"], made[creative]["ch"]) == (CONNECTION, "creative")
    assert made[identity]["question"].startswith("Does 'My sister Mara paints the beehives blue every spring.' ")
    rows = {r["id"]: r for r in await pool.fetch("SELECT id, consumed_at, consumed_by, outcome FROM dmn_items")}
    assert {i: (r["consumed_at"], r["consumed_by"]) for i, r in rows.items()} == {
        creative: (NOW, "deep_pass"), twin: (NOW, "deep_pass"), identity: (NOW, "deep_pass")}
    assert json.loads(rows[creative]["outcome"])["insight_ids"] == [made[creative]["id"]]
    assert json.loads(rows[twin]["outcome"]) == {"same_as": creative}          # surfaced twice, asked once

    text = format_chain(made[creative]["id"], await why_do_i_believe(pool, made[creative]["id"]))
    lines = text.splitlines()
    assert lines[0].startswith(f"#{made[creative]['id']} [reflection] ") and CONNECTION in lines[0]
    assert lines[1] == (f"  from DMN creative association #{creative} "
                        f"({NOW - timedelta(hours=1):%Y-%m-%d %H:%M}): A connection across 40 days: ...")
    assert sorted(line.split()[0] for line in lines[2:]) == [f"#{door}", f"#{hives}"]    # its sources
    # nothing waits any more: the next pass asks nothing
    again = ConsolidationModel()
    await _pass(pool, again, embedder)
    assert again.kinds() == []


async def test_an_unusable_answer_consumes_the_item_and_no_model_leaves_it_waiting(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    hives = await store.store(NewMemory("My sister Mara paints the beehives blue every spring."))
    item = await _item(pool, "identity", [hives], {"value": "I value careful craft"}, NOW - timedelta(hours=1))
    # offline (no model): the insights phase is skipped and the item waits
    await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=None, safety=Safety(),
                                           settings=ConsolidationSettings()),
                        trigger="manual", now=NOW, rng=random.Random(7), phases=INSIGHTS)
    assert await pool.fetchval("SELECT consumed_at FROM dmn_items WHERE id = $1", item) is None
    bad = json.dumps({"insights": [{"insight": "Made up.", "cited_ids": [999999]}]})
    backend = ConsolidationModel().push("insights", bad)
    await _pass(pool, backend, embedder)
    row = await pool.fetchrow("SELECT consumed_by, outcome FROM dmn_items WHERE id = $1", item)
    assert row["consumed_by"] == "deep_pass"
    assert json.loads(row["outcome"])["reason"] == "no usable answer"
    assert json.loads(row["outcome"])["insight_ids"] == []


async def test_what_nothing_consumes_expires_in_small_batches(pool, tmp_path):
    old = [await _item(pool, "creative", [], {}, NOW - timedelta(days=d)) for d in (9, 8)]
    young = await _item(pool, "identity", [], {}, NOW - timedelta(days=6))
    taken = await _item(pool, "creative", [], {}, NOW - timedelta(days=20))
    await repo.consume_item(pool, taken, by="deep_pass", at=NOW - timedelta(days=19), outcome={})
    assert await repo.expire_items(pool, NOW, ttl_days=7, batch=1) == 1            # oldest first
    mind, _ = await _mind(pool, tmp_path)
    gen = await _generator(mind, settings=DmnSettings(item_ttl_days=7, expire_batch=1))
    await gen.tick(NOW)                                                             # the tick expires the rest
    rows = {r["id"]: r for r in await pool.fetch("SELECT id, consumed_at, consumed_by, outcome FROM dmn_items")}
    assert [(rows[i]["consumed_by"], rows[i]["consumed_at"]) for i in old] == [("expired", NOW)] * 2
    assert json.loads(rows[old[0]]["outcome"]) == {"expired_after_days": 7.0}
    assert rows[young]["consumed_at"] is None and rows[taken]["consumed_by"] == "deep_pass"
    assert gen.expired == 1
