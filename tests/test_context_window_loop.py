"""50 turns through the real loop against a model that holds 4,096 tokens (issue 27 item 3).

The run that filed issue 27 failed every reply after ~25 cycles: "request (4387 tokens)
exceeds the available context size (4096 tokens)". Here the whole mind runs on the real
database with the real providers (build_providers: the OpenAI-compatible backend, the
resilient wrapper, the start-up probe) against `FakeLlamaServer` at the HTTP seam: it
says `n_ctx` 4,096 at /props, counts each prompt with Llama 2's tokenizer (not ours) and
refuses one that is too long as llama.cpp does. Long user messages, one far over the
window, and long DMN thoughts fill the conversation window. Only the embedder is a
stand-in (HashEmbedder).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from src.db.manifest import record_start
from src.mind import build_mind
from tests.context_window_fakes import FakeLlamaServer, providers_for

TURNS = 50
FACTS = ["I moved to Porto in 2019 and work at the marine lab near Matosinhos, studying octopus cognition.",
         "My cat Miso is 7 years old; she sleeps on the radiator from 16:30 until dinner at 19:15.",
         "On Tuesdays I teach a seminar, room 204, about cephalopod learning and tool use.",
         "My sister Ana lives in Lisbon; we call every Sunday at 10:00 and talk about her twins."]
THOUGHT = ("I just remembered that the octopus tank needs its filter changed before the seminar, and that connects "
           "to how Miso watches the fish tank for hours; curiosity looks the same in both. ")


def message(turn: int) -> str:
    body = " ".join(FACTS[(turn + k) % len(FACTS)] for k in range(1 + turn % 6)) * (1 + turn % 3)
    return f"turn {turn}: {body}"


async def test_fifty_turns_never_exceed_a_4096_token_window_and_every_turn_is_answered(pool, tmp_path):
    server = FakeLlamaServer(n_ctx=4096)
    settings, providers = await providers_for(server, pool, tmp_path, "window-test")
    assert server.props_requests == 1 and providers.system1.window.tokens == 4096
    delivered: list[str] = []
    manifest = await record_start(pool, "window-test", providers.embedder.model_name)
    mind = await build_mind(settings, pool, providers, session_id="window-test", manifest=manifest,
                            deliver=delivered.append, rng=np.random.default_rng(5))
    fifo = mind.loop.fifo
    assert fifo.max_tokens < 4096 - providers.system1.max_output_tokens     # the conversation's share

    start = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)
    for turn in range(TURNS):
        now = start + timedelta(minutes=turn)
        text = message(turn) if turn != 20 else "turn 20: " + " ".join(FACTS) * 60   # ~6,000 tokens alone
        await mind.loop.submit("user", text, now=now)
        if turn % 3 == 1:
            await mind.loop.submit("dmn", THOUGHT * (2 + turn % 4), now=now)
        assert await mind.loop.run(burst=True) >= 1

    assert server.rejected == []                      # not one request over the window
    assert server.no_room == []                       # and every one left its reply room
    answers = {turn: [d for d in delivered if f"turn {turn}:" in d] for turn in range(TURNS)}
    assert all(answers.values()), [t for t, a in answers.items() if not a]   # every turn, in the model's words
    assert not [d for d in delivered if "cannot answer in words" in d]
    failed = await pool.fetchval("SELECT count(*) FROM llm_calls WHERE NOT ok")
    assert failed == 0
    # the window kept working: the prompts grew to fill it, history gave way as the talk went on
    assert max(server.counted) > 2500
    histories = [len(b["messages"]) for b in server.bodies if "response_format" not in b
                 and "JSON Schema" not in b["messages"][0]["content"]]
    assert max(histories) > 3 and histories[-1] < 2 * TURNS
    assert fifo.tokens <= fifo.max_tokens
    await providers.aclose()
