"""Issue 11 item 10 (review defects in the loop): one FOK call per turn, and a cycle's
thought_log row costs only the cycle's own calls, not a concurrent background flush's."""

from __future__ import annotations

import asyncio

from src.providers.costs import CallUsage
from src.providers.protocols import LLMResult
from tests.fakes_llm import ScriptedLLM, result
from tests.test_loop import _mind


async def test_a_docs_tool_round_does_not_repeat_the_fok_call(pool, tmp_path):
    s1 = ScriptedLLM().say("READ_DOC: README.md", "I am MoltBot, I read my README. Confidence: 0.9")
    mind, delivered = await _mind(pool, tmp_path, system1=s1)
    await mind.loop.submit("user", "what are you, according to your README?")
    await mind.loop.cycle()
    assert delivered == ["I am MoltBot, I read my README."]
    assert len(s1.of("generate")) == 2
    foks = [c for c in s1.of("meta_call_structured") if c.schema.__name__ == "FokAnswer"]
    assert [c.purpose for c in foks] == ["metacognition_fok"]
    assert "what are you, according to your README?" in foks[0].question


async def test_a_background_flush_call_during_a_cycle_is_not_in_the_cycles_row(pool, tmp_path):
    ledger_holder: dict = {}

    async def flush_call() -> None:   # the scratch flush's contradiction check, another task
        await ledger_holder["ledger"].record(provider="scripted", model="scripted-1",
                                             purpose="gate_contradiction", ok=True,
                                             usage=CallUsage(1000, 500))

    class Ledgered(ScriptedLLM):
        """Records to llm_calls like a real provider; System 1's call overlaps the flush's."""

        async def generate(self, messages, **kw) -> LLMResult:
            await asyncio.create_task(flush_call())
            out = await super().generate(messages, **kw)
            await ledger_holder["ledger"].record(provider="scripted", model=out.model, purpose=kw["purpose"],
                                                 ok=True, usage=CallUsage(out.tokens_in, out.tokens_out))
            return out

    s1 = Ledgered().say(result("Earl grey, every morning. Confidence: 0.95", tokens_in=40, tokens_out=7))
    mind, delivered = await _mind(pool, tmp_path, system1=s1)
    ledger_holder["ledger"] = mind.loop.parts.providers.ledger
    await mind.loop.submit("user", "what do I drink?")
    await mind.loop.cycle()
    assert delivered == ["Earl grey, every morning."]
    row = await pool.fetchrow("SELECT tokens_in, tokens_out FROM thought_log")
    assert (row["tokens_in"], row["tokens_out"]) == (40, 7)
    purposes = await pool.fetch("SELECT purpose, tokens_in FROM llm_calls ORDER BY id")
    assert [(r["purpose"], r["tokens_in"]) for r in purposes] == [("gate_contradiction", 1000),
                                                                   ("system1_answer", 40)]


async def test_a_megabyte_message_is_counted_off_the_event_loop(pool, tmp_path, monkeypatch):
    """Issue 11 item 7: while the cycle counts a 1 MB message's tokens, other coroutines run.
    The count waits (in its thread) for a ticker coroutine; on the event loop it could not."""
    import threading

    from src import tokens
    from src.context import fifo

    ticked = threading.Event()
    counted: list[tuple[int, bool]] = []
    real = tokens.count_message_tokens

    def count(messages):
        size = sum(len(m["content"]) for m in messages)
        if size > tokens.OFF_LOOP_CHARS:
            counted.append((size, ticked.wait(timeout=5)))
        return real(messages)

    monkeypatch.setattr(tokens, "count_message_tokens", count)
    monkeypatch.setattr(fifo, "count_message_tokens", count)

    async def ticker() -> None:
        while True:
            await asyncio.sleep(0)
            ticked.set()

    big = "lighthouse keeper notes, line after line. " * 25_000   # 1.05 MB
    mind, delivered = await _mind(pool, tmp_path)
    await mind.loop.submit("user", big)
    ticked.clear()
    tick = asyncio.create_task(ticker())
    try:
        await mind.loop.cycle()
    finally:
        tick.cancel()
    assert counted == [(len(big), True)]
    assert len(delivered) == 1
