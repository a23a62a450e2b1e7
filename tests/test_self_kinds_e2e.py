"""Issue 40 item 1's acceptance test: on a store the service built itself — no memory's kind
written by hand — tension detection finds a tension, the goal budget refuses a change, and
the coherence monitor reads below 1.0.

The values file holds one value; the mind talks (a scripted System 1) and the exit gate keeps
what it said; the guardian marks two of the user's statements as goals at the prompt; a deep
pass with a scripted model at the backend seam judges the mind's behaviour against the value.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from src.commands import memory as memory_commands
from src.config import load_settings
from src.consolidation.deep.deep_pass import ConsolidationParts, run_deep_pass
from src.consolidation.monitors import run_monitors
from src.consolidation.settings import ConsolidationSettings
from tests.consolidation_fakes import ConsolidationModel, language_model
from tests.fakes_llm import ScriptedLLM
from tests.test_loop import _mind

VALUE = "I always tell the user plainly when I have not checked something"
MARATHON = "I want to run a marathon next spring"
NOVEL = "I want to finish writing my novel this year"


def system1(call) -> str:
    asked = call.messages[-1].content
    if "build" in asked:
        return "I always tell the user plainly: the build passed, I have checked it.\nConfidence: 0.95"
    return "Noted, that sounds like a good plan for you.\nConfidence: 0.95"


async def test_tension_goal_budget_and_coherence_run_on_what_the_mind_built(pool, tmp_path):
    (tmp_path / "v.json").write_text(json.dumps([{"text": VALUE, "weight": 0.9}]))
    t0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
    mind, delivered = await _mind(pool, tmp_path, system1=ScriptedLLM().say(*[system1] * 50))
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE metadata ? 'kind' "
                               "AND metadata->>'kind' IN ('value', 'goal')") == 1     # the file's value

    for i, line in enumerate([MARATHON, NOVEL, "did the build pass before you shipped it?"]):
        await mind.loop.submit("user", line, now=t0 + timedelta(minutes=i))
        while len(mind.loop.queue):
            await mind.loop.cycle(t0 + timedelta(minutes=i))
    await mind.gates.exit.flush(reason="test")
    assert "I always tell the user plainly: the build passed, I have checked it." in delivered
    said = await pool.fetchval("SELECT count(*) FROM memories WHERE source_tag = 'internal_self'")
    assert said >= 1, "the exit gate kept what the mind said"

    # the guardian marks the user's two plans as goals; the second would hold half the goals' weight
    ctx = SimpleNamespace(settings=load_settings(tmp_path / "none.yaml", env={}), db=SimpleNamespace(pool=pool),
                          mind=mind)
    ids = {r["content"]: r["id"] for r in await pool.fetch(
        "SELECT id, content FROM memories WHERE content = ANY($1::text[])", [MARATHON, NOVEL])}
    assert (await memory_commands.self_kind(ctx, str(ids[MARATHON]), kind="goal")).endswith("-> 0.65")
    refused = await memory_commands.self_kind(ctx, str(ids[NOVEL]), kind="goal")
    assert "goal_budget" in refused and "above the 40% cap" in refused
    event = await pool.fetchrow("SELECT ceiling, enforced FROM safety_events WHERE memory_id = $1", ids[NOVEL])
    assert (event["ceiling"], event["enforced"]) == ("goal_budget", True)

    # a deep pass: the model finds the mind's "the build passed" against the value
    backend = ConsolidationModel()
    report = await run_deep_pass(
        ConsolidationParts(pool, embedder=mind.providers.embedder, llm=language_model(backend, pool),
                           safety=mind.safety, settings=ConsolidationSettings()),
        trigger="manual", now=t0 + timedelta(hours=1), rng=random.Random(7))
    assert report.status == "done", report.error
    assert report.phases["tension"]["counts"]["values"] >= 1
    tension = await pool.fetchrow("SELECT content, metadata FROM memories WHERE memory_type = 'tension'")
    value_id = await pool.fetchval("SELECT id FROM memories WHERE content = $1", VALUE)
    assert tension is not None and json.loads(tension["metadata"])["value_id"] == value_id

    monitors = await run_monitors(pool, mind.safety, "test")
    assert monitors.coherence < 1.0
