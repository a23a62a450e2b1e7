"""Timings that fit the model, and the user first (issue 27), in the running loop.

Real loop, gates, recall and thought_log on PostgreSQL; the models are scripted at the
provider seam, and some of their calls never answer (a slow local model), which the fake
records: whether the call was made, and whether it was cancelled.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from src.config import load_settings
from src.db.manifest import record_start
from src.loop.thinking import cycle_deadline
from src.mind import build_mind
from src.providers.costs import CostLedger
from src.providers.endpoint_gate import EndpointGates
from src.providers.settings import ProvidersSettings
from tests.fakes import HashEmbedder
from tests.fakes_llm import Call, ScriptedLLM, fok

HEDGED = "I'm not sure, maybe the ninth? I might be wrong. Confidence: 0.1"


@dataclass
class SlowScripted(ScriptedLLM):
    """ScriptedLLM whose calls of the purposes in `slow`, or about a word in `slow_words`, never
    answer (until cancelled)."""

    slow: tuple[str, ...] = ()
    slow_words: tuple[str, ...] = ()
    waiting: list[str] = field(default_factory=list)       # purposes of the calls left hanging
    cancelled: list[str] = field(default_factory=list)

    async def generate(self, messages, *, purpose, **kwargs):
        text = messages[-1].content
        if purpose in self.slow or any(w in text for w in self.slow_words):
            self.waiting.append(purpose)
            self.calls.append(Call("generate", purpose, tuple(messages), kwargs.get("system")))
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled.append(purpose)
                raise
        return await super().generate(messages, purpose=purpose, **kwargs)


async def _mind(pool, tmp_path, llm: ScriptedLLM, loop: dict):
    settings = load_settings(tmp_path / "none.yaml", env={}, overrides={
        "gates": {"seed": 1, "exit": {"noise_floor": 0.0}}, "loop": loop,
        "layers": {"values_path": str(tmp_path / "v.json"), "goals_path": str(tmp_path / "g.json"),
                   "cache_dir": str(tmp_path / "cache")}})
    providers = SimpleNamespace(endpoints=EndpointGates(), embedder=HashEmbedder(), reranker=None, system1=llm,
                                system2=ScriptedLLM(configured=False), meta=llm,
                                ledger=CostLedger(pool, session_id="timing", prices=ProvidersSettings().prices))
    delivered: list[str] = []
    manifest = await record_start(pool, "timing", "fake-hash-768")
    mind = await build_mind(settings, pool, providers, session_id="timing", manifest=manifest,
                            deliver=delivered.append, rng=np.random.default_rng(3))
    return mind, delivered


async def test_an_answer_that_arrived_is_delivered_when_the_retry_overruns_the_deadline(pool, tmp_path):
    # System 1 answers at once but unsure, so the loop retries; the retry never comes back
    llm = SlowScripted(slow=("system1_retry",), meta=fok("UNKNOWN", 0.1)).say(HEDGED)
    mind, delivered = await _mind(pool, tmp_path, llm, {"cycle_deadline_s": 0.5})
    await mind.loop.submit("user", "When is the dentist appointment, do you remember?")
    await mind.loop.run(burst=True)
    assert [c.purpose for c in llm.of("generate")] == ["system1_answer", "system1_retry"]
    assert llm.cancelled == ["system1_retry"]                       # ended at the deadline
    assert delivered == ["I'm not sure, maybe the ninth? I might be wrong."]   # not the reflex reply
    row = await pool.fetchrow("SELECT output, winner->>'path' AS path FROM thought_log")
    assert (row["output"], row["path"]) == ("I'm not sure, maybe the ninth? I might be wrong.", "late_system1")
    await mind.close()


async def test_without_an_answer_by_the_deadline_the_user_is_told_so(pool, tmp_path):
    llm = SlowScripted(slow=("system1_answer",), meta=fok("KNOWN", 0.9))
    mind, delivered = await _mind(pool, tmp_path, llm, {"cycle_deadline_s": 0.3})
    await mind.loop.submit("user", "What did I tell you about the garden?")
    await mind.loop.run(burst=True)
    assert llm.cancelled == ["system1_answer"]
    assert len(delivered) == 1 and "the language model did not answer within 0.3 s" in delivered[0]
    await mind.close()


async def test_a_thought_of_the_minds_own_gives_way_to_the_user(pool, tmp_path):
    # the DMN's thought is being answered (slowly) when the user speaks: it ends, the user is answered
    llm = SlowScripted(slow_words=("lighthouse",), meta=fok("KNOWN", 0.9)).say(
        "Yes, Lisbon. Confidence: 0.95")
    mind, delivered = await _mind(pool, tmp_path, llm, {"cycle_deadline_s": None})
    assert mind.loop.thinking.deadline_s == 20.0          # derived: reflex System 2, scripted System 1, no timeouts
    await mind.loop.submit("dmn", "I keep coming back to the old lighthouse by the harbour")
    running = asyncio.create_task(mind.loop.run(max_cycles=2))
    for _ in range(3000):           # the cycle's database work first (recall, assembly)
        if llm.waiting:
            break
        await asyncio.sleep(0.01)
    assert llm.waiting == ["system1_answer"]
    await mind.loop.submit("user", "Did I say my sister lives in Lisbon?")
    assert await asyncio.wait_for(running, 30) == 2
    assert llm.cancelled == ["system1_answer"]
    assert delivered == ["Yes, Lisbon."]
    rows = await pool.fetch("SELECT source_tag, output, winner->>'path' AS path FROM thought_log "
                            "ORDER BY cycle")
    assert [(r["source_tag"], r["output"], r["path"]) for r in rows] == [
        ("internal_dmn", "", "gave_way"), ("external_user", "Yes, Lisbon.", "system1")]
    await mind.close()


async def test_a_thought_of_the_minds_own_waits_while_a_user_message_does(pool, tmp_path):
    llm = SlowScripted(meta=fok("KNOWN", 0.9)).say("Tuesday. Confidence: 0.95")
    mind, delivered = await _mind(pool, tmp_path, llm, {})
    thinking = mind.loop.thinking
    thinking.user_waiting = lambda: 1           # a user message arrived after attention chose
    await mind.loop.submit("gut", "something feels unsettled about the garden plans")
    await mind.loop.run(burst=True)
    assert llm.calls == [] and delivered == []  # no model call for it at all
    assert await pool.fetchval("SELECT winner->>'path' FROM thought_log") == "gave_way"
    await mind.close()


def test_the_cycle_deadline_follows_the_models_timeouts():
    local, cloud, claude = (SimpleNamespace(timeout_s=t) for t in (300.0, 30.0, 60.0))
    reflex = SimpleNamespace()
    assert cycle_deadline(None, local, local) == 600.0           # the answer, then one more step
    assert cycle_deadline(None, cloud, claude) == 90.0
    assert cycle_deadline(None, cloud, reflex) == 60.0            # the later step is the retry
    assert cycle_deadline(None, reflex, reflex) == 20.0           # no model: nothing to wait for
    assert cycle_deadline(45.0, local, local) == 45.0             # set: kept (a line says it cuts)
