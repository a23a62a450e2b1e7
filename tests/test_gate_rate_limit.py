"""Burst pruning: at most one embedding call per interval, the rest queued and batched
(plan §2.9, §3.3). The clock and sleep are fakes; the embedder is the hashing fake."""

from __future__ import annotations

import asyncio
import json
import random
from datetime import timedelta

import numpy as np
import pytest

from src.errors import ProviderUnavailable
from src.gates.entry import EntryGate
from src.gates.exit import ExitGate, ExitSetup
from src.gates.memory_gate import Gates
from src.gates.rate_limit import RateLimitedEmbedder
from src.gates.scratch import ScratchLifecycle
from src.weights.safety import Safety
from tests.fakes import HashEmbedder
from tests.gate_fakes import ScriptedMetaLLM, gate_settings


class Clock:
    """A fake monotonic clock that the fake sleep moves forward."""

    def __init__(self):
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


class TimedEmbedder(HashEmbedder):
    """The hashing fake, also noting when (on the fake clock) each call arrived."""

    def __init__(self, clock: Clock, fail: bool = False):
        super().__init__()
        self.clock = clock
        self.at: list[float] = []
        self.fail = fail

    async def embed(self, texts, task_type, titles=None):
        self.at.append(self.clock())
        if self.fail:
            self.calls.append(None)
            raise ProviderUnavailable("down", provider="fake")
        return await super().embed(texts, task_type, titles)


def limited(clock, inner=None, **kw):
    inner = inner or TimedEmbedder(clock)
    return RateLimitedEmbedder(inner, clock=clock, sleep=clock.sleep, **kw), inner


async def test_concurrent_requests_share_one_call_and_the_next_waits():
    clock = Clock()
    embedder, inner = limited(clock)
    parts = await asyncio.gather(*(embedder.embed([f"text {i}", f"more {i}"], "RETRIEVAL_DOCUMENT")
                                   for i in range(5)))
    assert [c.texts for c in inner.calls] == [[f"{w} {i}" for i in range(5) for w in ("text", "more")]]
    expected = await HashEmbedder().embed(["text 3", "more 3"], "RETRIEVAL_DOCUMENT")
    assert np.array_equal(parts[3], expected)
    await embedder.embed(["later"], "RETRIEVAL_DOCUMENT")
    assert (inner.at, clock.sleeps, embedder.calls) == ([0.0, 5.0], [5.0], 2)


async def test_task_types_are_not_mixed_and_each_call_waits_its_turn():
    clock = Clock()
    embedder, inner = limited(clock)
    await asyncio.gather(embedder.embed(["a"], "RETRIEVAL_DOCUMENT", titles=["episodic"]),
                         embedder.embed(["b"], "RETRIEVAL_QUERY"),
                         embedder.embed(["c"], "RETRIEVAL_DOCUMENT"))
    assert [(c.texts, c.task_type, c.titles) for c in inner.calls] == [
        (["a", "c"], "RETRIEVAL_DOCUMENT", ["episodic", None]), (["b"], "RETRIEVAL_QUERY", None)]
    assert inner.at == [0.0, 5.0]


async def test_batches_are_capped():
    clock = Clock()
    embedder, inner = limited(clock, max_batch=100)
    await asyncio.gather(*(embedder.embed([f"t{i}-{k}" for k in range(60)], "CLUSTERING") for i in range(3)))
    assert [len(c.texts) for c in inner.calls] == [60, 60, 60]
    assert inner.at == [0.0, 5.0, 10.0]


async def test_a_failed_call_fails_every_waiting_caller():
    clock = Clock()
    embedder, inner = limited(clock, inner=TimedEmbedder(clock, fail=True))
    results = await asyncio.gather(embedder.embed(["a"], "CLUSTERING"), embedder.embed(["b"], "CLUSTERING"),
                                   return_exceptions=True)
    assert [type(r).__name__ for r in results] == ["ProviderUnavailable", "ProviderUnavailable"]
    assert len(inner.calls) == 1


async def test_a_cancelled_caller_is_dropped_from_the_batch():
    clock = Clock()
    embedder, inner = limited(clock)
    await embedder.embed(["first"], "CLUSTERING")            # the next call must wait 5 s
    waiting = asyncio.create_task(embedder.embed(["cancelled"], "CLUSTERING"))
    kept = asyncio.create_task(embedder.embed(["kept"], "CLUSTERING"))
    await asyncio.sleep(0)
    waiting.cancel()
    await kept
    assert [c.texts for c in inner.calls] == [["first"], ["kept"]]


def test_it_refuses_a_bare_string():
    embedder, _ = limited(Clock())
    with pytest.raises(TypeError):
        asyncio.run(embedder.embed("not a list", "CLUSTERING"))


async def test_burst_pruning_through_the_gate_is_rate_limited(pool):
    clock = Clock()
    inner = TimedEmbedder(clock)
    settings = gate_settings(noise_floor=0.0)
    pruning = RateLimitedEmbedder(inner, interval_s=5.0, clock=clock, sleep=clock.sleep)
    rng = random.Random(3)
    exit_gate = ExitGate(pool, HashEmbedder(), ScriptedMetaLLM(configured=False), settings, rng,
                         Safety(), ExitSetup(prune_embedder=pruning))
    gates = Gates(pool, EntryGate(pool, settings.entry, rng, timedelta(hours=24)), exit_gate,
                  ScratchLifecycle(pool, exit_gate, settings.scratch), settings)
    bursts = [[f"pruned message {b}.{k} about topic {b * 10 + k}" for k in range(4)] for b in range(3)]
    reports = await asyncio.gather(*(gates.prune(texts, source_tag="assistant") for texts in bursts))

    assert [r.evaluated for r in reports] == [4, 4, 4]
    # flushes run one at a time; each burst is two embedding calls 5 s apart: the storage
    # vectors (RETRIEVAL_DOCUMENT) and the novelty lookup's (SEMANTIC_SIMILARITY, plan §2.1)
    assert inner.at == [0.0, 5.0, 10.0, 15.0, 20.0, 25.0]
    assert [(len(c.texts), c.task_type) for c in inner.calls] == [
        (4, "RETRIEVAL_DOCUMENT"), (4, "SEMANTIC_SIMILARITY")] * 3
    for document, novelty in zip(inner.calls[::2], inner.calls[1::2], strict=True):
        assert document.texts == novelty.texts
    assert sorted(t for c in inner.calls[::2] for t in c.texts) == sorted(
        f"Personal experience memory: {t}" for texts in bursts for t in texts)
    rows = await pool.fetch("SELECT d.gate, d.rule, d.action, d.details, s.tags, s.source_tag "
                            "FROM gate_decisions d JOIN scratch_buffer s ON s.id = d.scratch_id ORDER BY d.id")
    assert [(r["gate"], r["rule"], r["action"]) for r in rows if r["gate"] == "entry"] == [
        ("entry", "pruned", "buffer")] * 12
    assert {json.loads(r["details"])["flush"] for r in rows if r["gate"] == "exit"} == {"context pruning"}
    assert {(tuple(r["tags"]), r["source_tag"]) for r in rows} == {(("pruned",), "assistant")}


async def test_pruning_nothing_does_nothing(pool):
    gates = Gates.build(pool, HashEmbedder(), ScriptedMetaLLM(configured=False), gate_settings(),
                        Safety(), rng=random.Random(0))
    report = await gates.prune(["", "  \x00 "], source_tag="assistant")
    assert (report.evaluated, await pool.fetchval("SELECT count(*) FROM scratch_buffer")) == (0, 0)
