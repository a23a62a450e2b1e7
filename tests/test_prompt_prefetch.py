"""The prompt's reads start as recall's search returns (src/loop/composing.py `start_reads`,
called by the cycle): after the search (on two cores, beside it they slowed it), once per
cycle, and dropped cleanly when the cycle does not get to build its prompt."""

from __future__ import annotations

import asyncio

import pytest

from src.recall import search
from src.recall.store import MemoryStore, NewMemory
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM
from tests.test_loop import CONFIDENT, _mind

#: the second answer is about the keeper (the same answer to another question is a repeat)
KEEPER = "The keeper rows to the village on sundays. Confidence: 0.95"


async def _seeded(pool, tmp_path):
    mind, delivered = await _mind(pool, tmp_path, system1=ScriptedLLM().say(CONFIDENT, KEEPER))
    await MemoryStore(pool, HashEmbedder()).store_many([
        NewMemory("The lighthouse lamp is lit every evening at dusk."),
        NewMemory("The lighthouse keeper rows to the village on sundays.")])
    return mind, delivered


async def test_the_reads_start_after_the_search_once_a_cycle_and_the_prompt_uses_them(pool, tmp_path, monkeypatch):
    mind, delivered = await _seeded(pool, tmp_path)
    events: list[str] = []
    real_search, assembler = search.search_hybrid, mind.loop.composing.assembler
    real_read = assembler.read_identity

    async def search_hybrid(*args, **kwargs):
        hits = await real_search(*args, **kwargs)
        events.append("searched")
        return hits

    async def read_identity(**kwargs):
        events.append("identity read")
        return await real_read(**kwargs)

    retriever = mind.loop.recalling.retriever
    real_rerank = retriever._rerank

    async def rerank(*args):
        events.append("scored")
        return await real_rerank(*args)

    monkeypatch.setattr(search, "search_hybrid", search_hybrid)
    monkeypatch.setattr(assembler, "read_identity", read_identity)
    monkeypatch.setattr(retriever, "_rerank", rerank)
    for text in ("tell me about the lighthouse lamp", "and the keeper?"):
        await mind.loop.submit("user", text)
        record = await mind.loop.cycle()
        assert record.retrieval.ids and record.timings_ms["assembly"] >= 0
    # the identity read went out before recall scored its hits, once a cycle
    assert events == ["searched", "identity read", "scored"] * 2
    assert len(delivered) == 2


async def test_reads_of_a_cycle_that_builds_no_prompt_are_dropped(pool, tmp_path, monkeypatch):
    mind, delivered = await _seeded(pool, tmp_path)
    started = asyncio.Event()
    real_read = mind.loop.composing.assembler.read_identity

    async def slow_read(**kwargs):
        started.set()
        await asyncio.sleep(10)
        return await real_read(**kwargs)

    monkeypatch.setattr(mind.loop.composing.assembler, "read_identity", slow_read)

    async def broken_build(*args, **kwargs):
        await started.wait()
        raise RuntimeError("assembly broke")

    monkeypatch.setattr(mind.loop.composing, "build", broken_build)
    started_reads = []
    real_start = mind.loop.composing.start_reads

    def start_reads(*args):
        reads = real_start(*args)
        started_reads.extend(reads)
        return reads

    monkeypatch.setattr(mind.loop.composing, "start_reads", start_reads)
    await mind.loop.submit("user", "tell me about the lighthouse lamp")
    with pytest.raises(RuntimeError, match="assembly broke"):
        await mind.loop.cycle()
    await asyncio.sleep(0.01)
    assert len(started_reads) == 3
    assert started_reads[0].cancelled()            # the identity read, still waiting, was cancelled
    assert all(read.done() for read in started_reads)
    assert not delivered
