"""A prompt laid out for the server's cache (issue 38 item 4): two consecutive turns'
requests share a prefix of at least 80% of their tokens.

A local server keeps the tokens of the last request and re-reads from the first one that
differs. With the recalled memories in the system prompt, ahead of the conversation, a 1.5B
model's server reused a median 176 of 1,202 tokens a turn. Here the whole mind runs on the
real database with the real providers against `FakeLlamaServer` (a ChatML template and a
tokenizer that is not ours, tests/context_window_fakes.py) with a 4,096-token window; only
the embedder is a stand-in. Each turn's request is rendered as the server renders it and
compared token by token with the turn before.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from src.db.manifest import record_start
from src.loop.prompts import CONTEXT_CLOSE, CONTEXT_OPEN
from src.mind import build_mind
from src.recall.store import MemoryStore, NewMemory
from src.recall.when import WHEN_NOTE
from tests.context_window_fakes import FakeLlamaServer, chatml, providers_for

STORED = [f"{who} {did} {what} on day {n}." for n, (who, did, what) in enumerate(
    (who, did, what)
    for who in ("My sister Ana", "My neighbour Tom", "The octopus Miso", "My colleague Rui")
    for did in ("talked about", "asked me about", "was curious about", "laughed at")
    for what in ("the tide tables", "the seminar in room 204", "the filter of the tank", "the harbour ferry",
                 "the twins' birthday", "a crab in the lab"))]
QUESTIONS = ["What did my sister Ana talk about?", "And what did Tom ask me about?", "Was Miso curious about the tank?",
             "Who laughed at the crab in the lab?", "What did Rui ask about the seminar?", "Tell me about the ferry.",
             "When is the twins' birthday?", "Did Ana laugh at the tide tables?", "What was Miso curious about?",
             "Who talked about the harbour ferry?", "What did Tom laugh at?", "Anything about room 204?"]


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


async def test_consecutive_turns_share_at_least_80_percent_of_their_prompt(pool, tmp_path):
    server = FakeLlamaServer(n_ctx=4096)
    settings, providers = await providers_for(server, pool, tmp_path, "cache-test")
    await MemoryStore(pool, providers.embedder).store_many([NewMemory(t) for t in STORED])
    manifest = await record_start(pool, "cache-test", providers.embedder.model_name)
    delivered: list[str] = []
    mind = await build_mind(settings, pool, providers, session_id="cache-test", manifest=manifest,
                            deliver=delivered.append, rng=np.random.default_rng(5))
    start = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    try:
        for turn, question in enumerate(QUESTIONS):
            await mind.loop.submit("user", question, now=start + timedelta(minutes=turn))
            await mind.loop.cycle(now=start + timedelta(minutes=turn, seconds=5))
    finally:
        await mind.close()
        await providers.aclose()

    answers = [b["messages"] for b in server.bodies if "response_format" not in b
               and "JSON Schema" not in b["messages"][0]["content"]]
    assert len(answers) == len(QUESTIONS) and len(delivered) == len(QUESTIONS)
    # the system prompt is the same every turn; each input goes after its context
    assert len({m[0]["content"] for m in answers}) == 1
    for messages, question in zip(answers, QUESTIONS, strict=True):
        last = messages[-1]["content"]
        assert last.startswith(CONTEXT_OPEN) and last.endswith(f"{CONTEXT_CLOSE}\n\n{question}")
    tokens = [server.tokenizer.encode(chatml(m), add_special_tokens=False).ids for m in answers]
    common = [_common_prefix(before, after) for before, after in zip(tokens, tokens[1:], strict=False)]
    # a turn re-reads only what it adds: the whole request before it is the start of its own
    # (all but the reply priming), except at a step, where the window's older contexts are
    # dropped (src/context/request.py) — at most one turn in three
    appended = [n >= len(before) - 4 for n, before in zip(common, tokens, strict=False)]
    assert sum(not a for a in appended) <= len(appended) // 3, appended
    shared = [n / len(after) for n, after, a in zip(common, tokens[1:], appended, strict=False) if a]
    # measured (Llama 2's tokenizer, a 4,096-token window, ~400 tokens added a turn): 0.58 on
    # the second turn, 0.73-0.85 later; the old layout (memories in the system prompt) 0.1-0.2
    assert sorted(shared)[len(shared) // 2] >= 0.75, [round(x, 2) for x in shared]
    # a state part said word for word in the newest context sent is not said again: the cost line
    # and the memory mode once while their context is in the window, not every turn
    costs = [sum("Session cost:" in (m.get("content") or "") for m in messages) for messages in answers]
    assert costs == [1] * len(costs), costs          # each turn's own context said it before
    # the time is said every turn, what it means for the memory lines once in the window
    notes = [sum(WHEN_NOTE in (m.get("content") or "") for m in messages) for messages in answers]
    assert notes == [1] * len(notes), notes
    assert all("Now: " in m[-1]["content"] for m in answers)
    # a memory an earlier context in the window lists is not listed again (but the top one)
    assert sum("listed earlier in this conversation)" in m[-1]["content"] for m in answers[1:]) >= len(answers) // 2
