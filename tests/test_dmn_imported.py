"""The DMN and imported strangers (issue 38 item 7), on the real loop and database, with fakes
only at the provider seam (HashEmbedder, ScriptedLLM): a thought that recalls a memory names
who said it and says an imported conversation was someone else's; imported strangers' memories
seed at most their share of the DMN's chances to think, and a store of nothing else still
thinks within it."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.bench_dmn import idle_stretch, load_store
from src.dmn.generator import DmnGenerator, DmnQueue
from src.dmn.imported_share import ImportedShare
from src.dmn.prompts import SOMEONE_ELSES
from src.dmn.sampling import about_self, draw, imported_stranger
from src.dmn.settings import DmnSettings
from src.recall.bulk_import import ImportRecord, write_batch
from src.recall.speakers import SELF, THOUGHT, USER, Speaker
from src.recall.store import NewMemory
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM
from tests.test_loop import _mind

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
FRAME = "[internal thought — default mode] "


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
     "in an imported conversation: someone else's conversation, not one with the user or with me. "
     "What does it tell me about Jolene?"),
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
    gen = _generator(mind, imported_share=1.0)
    report = await gen.tick(NOW)
    assert report.produced, report.reason
    await mind.loop.cycle(NOW)
    [call] = llm.of("generate")
    assert call.messages[-1].content == FRAME + thought


# --- the imported share (src/dmn/imported_share.py) -------------------------------------------------

@pytest.mark.parametrize(("share", "window", "pattern"), [
    (0.25, 20, [False, False, False, True] * 10),     # a stranger every fourth chance, from the first window on
    (0.5, 4, [False, True] * 10),
    (0.1, 10, ([False] * 9 + [True]) * 3),
    (0.0, 20, [False] * 30),
    (1.0, 20, [True] * 30),
])
def test_a_store_of_strangers_alone_gets_its_share_of_chances_and_no_more(share, window, pattern):
    """Every chance wants a stranger (nothing else is in reach): they get exactly their share."""
    rule = ImportedShare(share, window)
    got = []
    for _ in pattern:
        got.append(rule.allows())
        rule.record(got[-1])
    assert got == pattern


@given(share=st.sampled_from([0.1, 0.25, 0.3, 0.5, 0.75]), window=st.integers(2, 30),
       drawn=st.lists(st.booleans(), min_size=1, max_size=200))
def test_no_window_of_chances_holds_more_than_the_share(share, window, drawn):
    """`drawn[i]`: whether chance i's draw, allowed strangers, drew one. Whatever the draws, every
    `window` consecutive chances hold at most share × window strangers' thoughts, and the first
    n < window chances at most share × n."""
    rule = ImportedShare(share, window)
    taken = []
    for wants in drawn:
        taken.append(rule.allows() and wants)
        rule.record(taken[-1])
    for end in range(1, len(taken) + 1):
        recent = taken[max(0, end - window):end]
        assert sum(recent) <= share * len(recent) + 1e-9


JOLENE = Speaker("person", "Jolene")


@pytest.mark.parametrize(("speaker", "imported", "kind", "content", "stranger"), [
    (USER, False, None, "I work as a paramedic", False),
    (USER, True, None, "I work as a paramedic", False),            # an export of the user's words, re-imported
    (SELF, False, None, "Nice to meet you", False),
    (JOLENE, True, None, "Jolene: I finished the quilt", True),
    (None, True, None, "the ferry leaves at noon", True),          # imported, nobody named
    (None, False, None, "the ferry leaves at noon", False),        # a seed the mind wrote
    (None, True, "goal", "learn to bake bread", False),            # a goal is the mind's
    (THOUGHT, False, None, f"This comes back to me: Jolene said 'hi', {SOMEONE_ELSES}.", True),
    (THOUGHT, False, None, "This comes back to me: the user said 'hi'.", False),
])
def test_whose_memory_is_an_imported_strangers(speaker, imported, kind, content, stranger):
    assert imported_stranger(speaker, imported, kind, content) is stranger


def test_the_draw_never_leaves_its_only_mask_and_says_so_when_nothing_is_left():
    rng = np.random.default_rng(3)
    only = np.array([False, True, False, True, False])
    weights = np.array([9.0, 1.0, 9.0, 1.0, 9.0])
    drawn = np.concatenate([draw(weights, 2, rng, only=only) for _ in range(50)])
    assert set(drawn.tolist()) == {1, 3}
    # the stuck topic's exclusion is ignored when it would leave nothing; `only` never is
    assert draw(weights, 2, rng, only=only, exclude=np.array([False, True, False, True, False])).tolist() in (
        [1, 3], [3, 1])
    assert draw(weights, 2, rng, only=np.zeros(5, bool)).tolist() == []
    assert draw(weights, 1, rng, only=only, broadened=True).tolist()[0] in (1, 3)


# --- on the real loop: what the model is sent over an idle stretch ---------------------------------

def _answers(n: int) -> ScriptedLLM:
    """A model that answers each thought in its own words (a reply said to every message is a repeat)."""
    return ScriptedLLM().say(*[lambda call: f"It reminds me of {call.messages[-1].content[-60:]}. Confidence: 0.9"
                               for _ in range(n)])


def _thoughts_sent(llm: ScriptedLLM) -> list[str]:
    return [c.messages[-1].content for c in llm.of("generate") if c.messages[-1].content.startswith(FRAME)]


async def test_imported_strangers_seed_at_most_their_share_and_the_users_words_the_rest(pool, tmp_path):
    """300 imported turns beside 20 of the user's statements: drawn by number, nearly every thought
    would be a stranger's. Over 80 chances with a fixed rng, strangers' thoughts hold at most their
    share of every window of 20, close to all of it, and the user's statements seed the rest."""
    llm = _answers(200)
    mind, _ = await _mind(pool, tmp_path, system1=llm)
    await load_store(pool, mind.providers.embedder, imported=300, user=20)
    gen = _generator(mind, samples_per_tick=3, review_every=3)
    stretch = await idle_stretch(mind, gen, 80, calls=lambda: len(llm.calls))
    assert stretch.chances == len(stretch.thoughts) == 80 and stretch.quiet_for_share == 0
    for end in range(1, 81):
        assert sum(stretch.thoughts[max(0, end - 20):end]) <= 0.25 * min(end, 20)
    assert 18 <= stretch.stranger_thoughts <= 20
    # the model's calls: every one made for a thought, strangers' thoughts within their share of them
    assert stretch.calls_strangers + stretch.calls_own == len(llm.calls)
    assert 0 < stretch.calls_strangers <= 0.25 * len(llm.calls)
    sent = _thoughts_sent(llm)
    assert len(sent) == 80
    strangers = [t for t in sent if SOMEONE_ELSES in t]
    assert len(strangers) == stretch.stranger_thoughts
    assert all(re.search(r"\b(Jolene|Deb|Emi|Kate|Marco|Ines) said '", t) for t in strangers)
    own = [t for t in sent if SOMEONE_ELSES not in t]
    assert all("the user said '" in t or t.startswith(FRAME + "Last cycle I prioritised") for t in own)


async def test_a_store_of_imported_strangers_alone_still_thinks_within_the_share(pool, tmp_path):
    llm = _answers(40)
    mind, _ = await _mind(pool, tmp_path, system1=llm)
    await load_store(pool, mind.providers.embedder, imported=200, user=0)
    gen = _generator(mind, samples_per_tick=3)
    reports = []
    for i in range(40):
        now = NOW + timedelta(seconds=30 * i)
        reports.append(await gen.tick(now))
        while len(mind.loop.queue):
            await mind.loop.cycle(now)
    assert [r.produced for r in reports] == [False, False, False, True] * 10
    assert reports[4].reason == ("imported strangers' share of idle thought taken (1 of the last 4 chances went "
                                 "to imported strangers; their share is 25%); nothing of the user's or my own in "
                                 "the pool")
    sent = _thoughts_sent(llm)
    assert len(sent) == 10 and all(SOMEONE_ELSES in t for t in sent)
    assert len(llm.of("generate")) == 10          # the quiet chances cost the model nothing


def test_a_kept_thought_about_a_stranger_is_not_about_the_self():
    """The words that say a conversation was someone else's are not the mind speaking of itself:
    kept, such a thought is not drawn for introspection (src/dmn/sampling.about_self)."""
    thought = f"This comes back to me, from 1372 days ago: Jolene said 'we went hiking', {SOMEONE_ELSES}."
    assert not about_self("internal_dmn", None, "episodic", None, thought)
