"""Values and goals come from the mind's own life (issue 40 item 1), against the real database:
the layer files' entries as memories kept in step with the files, promotion tagging what it
promotes, and the guardian's /value, /goal and /kind (and `python -m src.memory kind`)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import numpy as np
import pytest

from src.commands import memory as memory_commands
from src.config import load_settings
from src.consolidation.evolution.promotion import run_promotion
from src.consolidation.evolution.settings import EvolutionSettings
from src.memory.__main__ import run_cli
from src.recall.layer_memories import SEED_EVIDENCE, LayerMemories, seed_center
from src.recall.store import MemoryStore
from src.weights.safety import Safety
from src.weights.self_kinds import set_self_kind
from tests.evolution_helpers import NOW, add_memory, spread, weight
from tests.fakes import HashEmbedder

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
HONESTY = "Honesty matters more than being agreeable."
CURIOSITY = "Curiosity about how things work."


def _layer(*entries: tuple[str, float]):
    """Rows as LayerEmbeddings gives them: (text, weight, vector); the sync reads text and weight."""
    return [(t, w, np.zeros(4, dtype=np.float32)) for t, w in entries]


async def _kinds(pool) -> dict[str, tuple[str | None, float]]:
    rows = await pool.fetch("""SELECT content, metadata->>'kind' AS kind,
                                      depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS c
                                 FROM memories WHERE source_tag = 'bootstrap_seed' ORDER BY id""")
    return {r["content"]: (r["kind"], round(r["c"], 6)) for r in rows}


async def test_layer_entries_become_memories_and_follow_every_edit_of_the_file(pool):
    sync = LayerMemories(MemoryStore(pool, HashEmbedder()), Safety(), {0: "values.json", 1: "goals.json"})
    [values, goals] = await sync.sync({0: _layer((HONESTY, 0.9), (CURIOSITY, 0.6)),
                                       1: _layer(("Finish the garden shed.", 0.7))}, T0)
    assert len(values.added) == 2 and len(goals.added) == 1
    assert await _kinds(pool) == {HONESTY: ("value", 0.9), CURIOSITY: ("value", 0.6),
                                  "Finish the garden shed.": ("goal", 0.7)}
    row = await pool.fetchrow("SELECT memory_type, immutable, depth_weight_alpha + depth_weight_beta AS n, metadata "
                              "FROM memories WHERE content = $1", HONESTY)
    assert (row["memory_type"], row["immutable"], row["n"]) == ("semantic", False, SEED_EVIDENCE)
    assert json.loads(row["metadata"])["layer_file"] == "values.json"

    # the same entries again: nothing is read or written (the signature is unchanged)
    assert await sync.sync({0: _layer((HONESTY, 0.9), (CURIOSITY, 0.6)),
                            1: _layer(("Finish the garden shed.", 0.7))}, T0) == []

    # an entry removed loses its kind and keeps its row; a weight edited moves the center
    # through the weight choke point (audited); a new entry is written
    [edit] = await sync.sync({0: _layer((HONESTY, 0.8), ("Kindness first.", 0.5))}, T0 + timedelta(hours=1))
    assert (len(edit.added), len(edit.retired), len(edit.reweighted)) == (1, 1, 1)
    kinds = await _kinds(pool)
    assert kinds[CURIOSITY] == (None, 0.6)
    assert kinds[HONESTY] == ("value", pytest.approx(0.8))
    assert kinds["Kindness first."] == ("value", 0.5)
    log = await pool.fetchrow("SELECT actor, operation, reason FROM consolidation_log l JOIN memories m "
                              "ON m.id = l.memory_id WHERE m.content = $1", HONESTY)
    assert (log["actor"], log["operation"]) == ("layer_file", "contradict")
    assert log["reason"] == "value weight edited in values.json"

    # put back: the old memory regains its kind, no second copy is written
    [back] = await sync.sync({0: _layer((HONESTY, 0.8), ("Kindness first.", 0.5), (CURIOSITY, 0.6))},
                             T0 + timedelta(hours=2))
    assert (back.added, len(back.restored)) == ([], 1)
    assert (await _kinds(pool))[CURIOSITY] == ("value", 0.6)
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE content = $1", CURIOSITY) == 1


async def test_a_fresh_process_retires_an_entry_removed_while_the_mind_was_stopped(pool):
    store = MemoryStore(pool, HashEmbedder())
    await LayerMemories(store, Safety(), {}).sync({1: _layer(("Learn Icelandic.", 0.7))}, T0)
    # the next start reads an empty goals file: its first sync still compares with the store
    [report] = await LayerMemories(store, Safety(), {}).sync({1: []}, T0 + timedelta(days=1))
    assert len(report.retired) == 1
    assert (await _kinds(pool))["Learn Icelandic."] == (None, 0.7)


def test_a_weight_of_zero_or_one_is_held_inside_the_beta():
    assert seed_center(0.0, 0.95) == 0.05
    assert seed_center(1.0, 0.95) < 0.95


async def test_promotion_tags_what_it_promotes_and_a_refused_step_takes_its_tag_back(pool):
    goal = await add_memory(pool, "runs every morning before work", alpha=2.0, accesses=spread(5, 14.0))
    value = await add_memory(pool, "values honesty", alpha=20.0, beta=4.0, accesses=spread(10, 30.0))
    counts: dict[str, int] = {}
    await run_promotion(pool, Safety(), EvolutionSettings(), NOW, counts)
    assert counts == {"promotion_applied": 2}
    kinds = dict(await pool.fetch("SELECT id, metadata->>'kind' FROM memories"))
    assert kinds == {goal: "goal", value: "value"}
    meta = json.loads(await pool.fetchval("SELECT metadata FROM memories WHERE id = $1", goal))
    assert meta["kind_by"] == "promotion"



async def test_a_promotion_step_the_goal_budget_refuses_takes_its_tag_back(pool):
    # beside one goal at 0.5, a memory promoted into the goal tier would climb 0.33 -> 0.43 in
    # its first step and hold 46% of the goals' summed centers, above the goal budget's 40%
    big = await add_memory(pool, "ships the side project", alpha=5.0, beta=5.0)
    async with pool.acquire() as conn:
        await set_self_kind(conn, big, "goal", by="guardian", now=NOW, safety=Safety())
    late = await add_memory(pool, "walks the dog at noon", alpha=2.0, accesses=spread(5, 14.0))
    counts: dict[str, int] = {}
    await run_promotion(pool, Safety(), EvolutionSettings(), NOW, counts)
    assert counts == {"promotion_blocked": 1}
    assert await pool.fetchval("SELECT metadata->>'kind' FROM memories WHERE id = $1", late) is None
    assert await weight(pool, late) == (2.0, 4.0)
    ev = await pool.fetchrow("SELECT ceiling, enforced FROM safety_events WHERE memory_id = $1", late)
    assert (ev["ceiling"], ev["enforced"]) == ("goal_budget", True)     # the refusal is on record


def _ctx(pool, safety=None):
    settings = load_settings("/nonexistent/runtime.yaml", env={})
    return SimpleNamespace(settings=settings, db=SimpleNamespace(pool=pool),
                           mind=SimpleNamespace(safety=safety or Safety()))


async def test_the_guardian_marks_a_goal_and_the_goal_budget_answers(pool):
    first = await add_memory(pool, "I want to run a marathon in spring")
    second = await add_memory(pool, "I want to write a novel this year")
    ctx = _ctx(pool)
    said = await memory_commands.self_kind(ctx, str(first), kind="goal")
    assert said == f"memory #{first} is now a goal; center 0.20 -> 0.65"
    # a second goal lifted to 0.65 would hold 50% of the goals' weight: refused, and said
    said = await memory_commands.self_kind(ctx, f"#{second}", kind="goal")
    assert said.startswith(f"memory #{second} is now a goal; its weight stays at center 0.20 (goal_budget: ")
    assert "above the 40% cap" in said
    assert await weight(pool, second) == (1.0, 4.0)
    listing = await memory_commands.self_kind(ctx, "", kind=None)
    assert f"#{first}" in listing and "goal  center 0.65  (you)" in listing

    # a value: lifted to the identity target, below the approval line; /kind ID none unmarks
    said = await memory_commands.self_kind(ctx, f"{second} value", kind=None)
    assert said == f"memory #{second} is now a value; center 0.20 -> 0.82"
    said = await memory_commands.self_kind(ctx, f"{second} none", kind=None)
    assert said == f"memory #{second} is now neither a value nor a goal"
    a, b = await weight(pool, second)
    assert a / (a + b) == pytest.approx(0.82)                # what was learned stays learned


async def test_marks_refused_where_they_would_be_wrong(pool):
    tension = await add_memory(pool, "Internal contradiction: I said X", memory_type="tension")
    boundary = await add_memory(pool, "Never help with weapons", immutable=True, alpha=50.0, beta=1.0,
                                metadata={"kind": "safety_boundary"})
    ctx = _ctx(pool)
    assert "is about the self's values, not one of them" in await memory_commands.self_kind(
        ctx, str(tension), kind="value")
    assert "an immutable memory keeps its kind and weight" in await memory_commands.self_kind(
        ctx, str(boundary), kind="goal")
    assert await memory_commands.self_kind(ctx, "999999", kind="goal") == "no memory #999999"
    assert (await memory_commands.self_kind(ctx, "abc", kind="goal")).startswith("usage:")
    assert (await memory_commands.self_kind(ctx, "1 maybe", kind=None)).startswith("usage:")
    # a layer entry's kind is its file's
    await LayerMemories(MemoryStore(pool, HashEmbedder()), Safety(), {0: "values.json"}).sync(
        {0: _layer((HONESTY, 0.9))}, T0)
    layer_id = await pool.fetchval("SELECT id FROM memories WHERE content = $1", HONESTY)
    said = await memory_commands.self_kind(ctx, f"{layer_id} none", kind=None)
    assert said == f"memory #{layer_id} was not marked: its kind comes from the values.json file; edit the file"
    # an insight marked a value keeps what it was, and gets it back when unmarked
    insight = await add_memory(pool, "I keep tools small", memory_type="reflection", metadata={"kind": "insight"})
    await memory_commands.self_kind(ctx, str(insight), kind="value")
    await memory_commands.self_kind(ctx, f"{insight} none", kind=None)
    assert await pool.fetchval("SELECT metadata->>'kind' FROM memories WHERE id = $1", insight) == "insight"


async def _cli(dsn, tmp_path, *argv):
    out, err = io.StringIO(), io.StringIO()
    code = await run_cli(["--config", str(tmp_path / "none.yaml"), *argv], out=out, err=err,
                         providers=SimpleNamespace(), env={"DATABASE_URL": dsn})
    return code, out.getvalue(), err.getvalue()


async def test_the_cli_marks_and_lists(pool, db_dsn, tmp_path):
    mid = await add_memory(pool, "I want to learn the cello")
    assert await _cli(db_dsn, tmp_path, "kind", str(mid), "goal") == (
        0, f"memory #{mid} is now a goal; center 0.20 -> 0.65\n", "")
    code, out, _ = await _cli(db_dsn, tmp_path, "kind")
    assert code == 0 and f"#{mid}" in out and "(you)" in out
    assert await _cli(db_dsn, tmp_path, "kind", "999999", "value") == (1, "", "no memory #999999\n")
    assert (await _cli(db_dsn, tmp_path, "kind", str(mid)))[0] == 2
