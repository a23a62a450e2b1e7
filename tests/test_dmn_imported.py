"""The DMN and imported strangers (issue 38 item 7), on the real loop and database, with fakes
only at the provider seam (HashEmbedder, ScriptedLLM): a thought that recalls a memory names
who said it, and says an imported conversation was someone else's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from src.dmn.generator import DmnGenerator, DmnQueue
from src.dmn.settings import DmnSettings
from src.recall.bulk_import import ImportRecord, write_batch
from src.recall.store import NewMemory
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM
from tests.test_loop import _mind

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
FRAME = "[internal thought — default mode] "
SOMEONE_ELSES = "in a conversation imported into my memory: someone else's conversation, not one with the user or with me"


def _generator(mind, *, seed: int = 5, **settings) -> DmnGenerator:
    return DmnGenerator(mind.pool, embed_model="fake-hash-768",
                        queue=DmnQueue(mind.loop.submit, lambda: mind.loop.queue.counts()["dmn"]),
                        rng=np.random.default_rng(seed),
                        settings=DmnSettings(**{"samples_per_tick": 1, "review_every": 1000, **settings}))


async def _import(pool, memories: list[NewMemory]) -> None:
    """Through the import path `python -m src.memory import` writes with (an import key per row)."""
    records = [ImportRecord(m, line=i + 1) for i, m in enumerate(memories)]
    assert (await write_batch(pool, HashEmbedder(), records, {})).inserted == len(memories)


# (how the one memory is stored, the memory, the thought the model is sent)
SPEAKERS = [
    ("store", NewMemory("I work as a paramedic", event_time=NOW - timedelta(days=3)),
     "This comes back to me, from 3 days ago: the user said 'I work as a paramedic'. Why does it matter now?"),
    ("store", NewMemory("Nice to meet you, Priya.", source_tag="internal_self", event_time=NOW - timedelta(days=9)),
     "This comes back to me, from 9 days ago: I said 'Nice to meet you, Priya.'. Why does it matter now?"),
    ("import", NewMemory("Jolene: I finally finished the quilt for my sister", source_tag="import",
                         metadata={"speaker": "Jolene"}, event_time=NOW - timedelta(days=1372)),
     "This comes back to me, from 1372 days ago: Jolene said 'I finally finished the quilt for my sister', "
     f"{SOMEONE_ELSES}. What does it tell me about Jolene?"),
    ("import", NewMemory("the ferry to the island leaves at noon", source_tag="import",
                         event_time=NOW - timedelta(days=400)),
     f"This comes back to me, from 400 days ago: 'the ferry to the island leaves at noon', {SOMEONE_ELSES}. "
     "What does it tell me?"),
]


@pytest.mark.parametrize(("how", "memory", "thought"), SPEAKERS, ids=["user", "self", "imported-named", "imported"])
async def test_the_thought_the_model_is_sent_names_who_said_the_memory(pool, tmp_path, how, memory, thought):
    llm = ScriptedLLM().say("It tells me something. Confidence: 0.9")
    mind, _ = await _mind(pool, tmp_path, system1=llm)
    if how == "store":
        await mind.store.store(memory)
    else:
        await _import(pool, [memory])
    gen = _generator(mind)
    report = await gen.tick(NOW)
    assert report.produced, report.reason
    await mind.loop.cycle(NOW)
    [call] = llm.of("generate")
    assert call.messages[-1].content == FRAME + thought
