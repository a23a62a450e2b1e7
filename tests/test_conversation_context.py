"""Conversation context (issue 35 item 1, src/recall/conversation.py, sql/150): a turn is
found by the words of the turns before it, imported or live; what is shown stays the turn."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import numpy as np

from src.gates.memory_gate import Gates
from src.gates.scratch import turn_contexts
from src.providers.embedding import embed_memories
from src.recall.conversation import SaidTurn, Threads
from src.recall.retrieval import Retriever
from src.recall.settings import RetrievalSettings
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.fakes import HashEmbedder
from tests.gate_fakes import ScriptedMetaLLM, gate_settings
from tests.memory_cli_helpers import cli, write_jsonl

T0 = datetime(2026, 5, 1, 18, 0, tzinfo=UTC)
#: The fake embedder matches content words only, as a real one mostly does (its bag of words
#: would otherwise rank rows by the stop words they share with the question).
STOP_WORDS = frozenset("a an and at did do get i in is my on the to up was we what with you".split())
QUESTION = "What did Jo get up to in the Highlands last weekend?"
ANSWER = "Climbed Ben Nevis with my cousin!"
# other conversations: one word of the question in two (with the question itself they outrank
# the answer without its context), the answer's words in none
OTHERS = ["the last bus leaves at nine", "the weekend market sells cheese", "the tram fare went up again",
          "I got a new sofa", "the office printer jams every morning",
          "my sister adopted a grey kitten", "the river flooded the lower fields", "I need new running shoes",
          "the bakery on Elm Street closed", "her violin lessons start in May", "the tram fare went up again",
          "we planted tulips by the gate"]


def _chat() -> list[dict]:
    rows = [{"content": text, "event_time": (T0 - timedelta(days=3, minutes=i)).isoformat(),
             "conversation": f"other-{i}", "metadata": {"speaker": "Kim"}} for i, text in enumerate(OTHERS)]
    turns = [("Mel", "Hey, good to hear from you!"), ("Mel", "What did you get up to last weekend in the Highlands?"), ("Jo", ANSWER),
             ("Mel", "Wow, sounds amazing"), ("Jo", "My legs still hurt, haha")]
    rows += [{"content": text, "event_time": (T0 + timedelta(minutes=i)).isoformat(), "conversation": "mel-jo",
              "turn": i, "metadata": {"speaker": who}} for i, (who, text) in enumerate(turns)]
    return rows


async def _found_in_top_5(pool, embedder, seeds: int = 20) -> int:
    """How many of `seeds` draws of the read-only pipeline (`search`'s path) put the answer in
    the top 5, asked an hour after the import (ACT-R's ages pinned)."""
    now = await pool.fetchval("SELECT max(created_at) FROM memories") + timedelta(hours=1)
    retriever = Retriever(pool, embedder, None, Safety(), RetrievalSettings())
    found = 0
    for seed in range(seeds):
        result = await retriever.retrieve(QUESTION, rng=np.random.default_rng(seed), now=now, mutate=False)
        found += ANSWER in [m.hit.content for m in result.memories]
    return found


async def test_an_imported_answer_is_found_by_the_question_asked_in_the_turn_before_it(pool, db_dsn, tmp_path):
    embedder = HashEmbedder(ignore=STOP_WORDS)
    imported = await cli(db_dsn, "import", str(write_jsonl(tmp_path / "chat.jsonl", _chat())), embedder=embedder)
    assert imported.code == 0, imported.err
    stored = await pool.fetchrow("SELECT content, conversation_context FROM memories WHERE content = $1", ANSWER)
    assert stored["content"] == ANSWER                      # what is shown stays the turn itself
    assert stored["conversation_context"] == ("Mel: Hey, good to hear from you!\n"
                                             "Mel: What did you get up to last weekend in the Highlands?\n(Jo)")
    assert await _found_in_top_5(pool, embedder) >= 18      # the pipeline's noise may move it once or twice
    searched = await cli(db_dsn, "search", QUESTION, "--k", "5", "--json", "--seed", "1", embedder=embedder)
    assert searched.code == 0 and searched.json_lines[0]["results"], searched.err


async def test_without_its_context_the_answer_is_not_found(pool, db_dsn, tmp_path):
    """The control: the same conversation with the context column emptied; the answer shares
    no word with the question, so only the turn before it could find it."""
    embedder = HashEmbedder(ignore=STOP_WORDS)
    await cli(db_dsn, "import", str(write_jsonl(tmp_path / "chat.jsonl", _chat())), embedder=embedder)
    await pool.execute("UPDATE memories SET conversation_context = NULL")
    assert await _found_in_top_5(pool, embedder) <= 2


def test_threads_give_each_turn_the_ones_before_it_in_its_conversation():
    threads = Threads(turns=2)
    assert threads.follow(SaidTurn("Mel", "hi"), "a") is None
    assert threads.follow(SaidTurn("Kim", "other chat"), "b") is None
    assert threads.follow(SaidTurn("Jo", "hey"), "a") == "Mel: hi\n(Jo)"          # its own speaker, a name
    assert threads.follow(SaidTurn("Mel", "Mel: already named"), "a") == "Mel: hi\nJo: hey\n(Mel)"
    assert threads.follow(SaidTurn(None, "next"), "a") == "Jo: hey\nMel: already named"
    assert threads.follow(SaidTurn("user", "mine"), "a") == "Mel: already named\nnext"   # a kind, no name


def test_a_file_without_conversation_ids_is_cut_where_time_jumps():
    threads = Threads(turns=2, gap=timedelta(hours=3))
    assert threads.follow(SaidTurn("A", "one"), None, T0) is None
    assert threads.follow(SaidTurn("B", "two"), None, T0 + timedelta(minutes=5)) == "A: one\n(B)"
    assert threads.follow(SaidTurn("A", "next day"), None, T0 + timedelta(days=1)) is None
    assert threads.follow(SaidTurn("B", "untimed"), None, None) == "A: next day\n(B)"


async def test_a_live_answer_carries_the_question_the_mind_asked(pool):
    """The user's line carries the mind's reply before it; the mind's reply the user's line."""
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many([NewMemory(text) for text in OTHERS])   # something to lose to
    gates = Gates.build(pool, embedder, ScriptedMetaLLM(configured=False), gate_settings(noise_floor=0.0),
                        Safety(), rng=random.Random(3))
    asked = await gates.admit("What do you do for a living?", source_tag="internal_self", exchange=False)
    answer = await gates.admit("I'm a paramedic in Leeds.", exchange=False)
    reply = await gates.admit("That sounds demanding, thank you for the work you do.", source_tag="internal_self",
                              exchange=False)
    contexts = await turn_contexts(pool, [answer.scratch_id, reply.scratch_id])
    assert contexts == {answer.scratch_id: "self: What do you do for a living?",
                        reply.scratch_id: "self: What do you do for a living?\nuser: I'm a paramedic in Leeds."}
    assert asked.scratch_id not in await turn_contexts(pool, [asked.scratch_id])

    await gates.note_focus([answer.scratch_id],
                           (await embed_memories(embedder, ["I'm a paramedic in Leeds."], ["episodic"]))[:1])
    await gates.exit.flush(reason="test")
    row = await pool.fetchrow("SELECT content, conversation_context FROM memories WHERE content LIKE 'I''m a paramedic%'")
    assert row["conversation_context"] == "self: What do you do for a living?"
    retriever = Retriever(pool, embedder, None, Safety(), RetrievalSettings())
    result = await retriever.retrieve("what do I do for a living?", rng=np.random.default_rng(1), mutate=False)
    assert result.memories[0].hit.content == row["content"]       # found by the question before it


async def test_an_exported_context_comes_back_as_it_was(pool, db_dsn, tmp_path):
    embedder = HashEmbedder()
    await cli(db_dsn, "import", str(write_jsonl(tmp_path / "chat.jsonl", _chat())), embedder=embedder)
    exported = await cli(db_dsn, "export", str(tmp_path / "out.jsonl"), embedder=embedder)
    assert exported.code == 0, exported.err
    before = dict(await pool.fetch("SELECT content, conversation_context FROM memories"))
    await pool.execute("TRUNCATE memories CASCADE")
    await cli(db_dsn, "import", str(tmp_path / "out.jsonl"), embedder=embedder)
    assert dict(await pool.fetch("SELECT content, conversation_context FROM memories")) == before


async def test_turns_out_of_order_are_counted_and_said(db_dsn, tmp_path):
    rows = [{"content": "second", "conversation": "c", "turn": 2}, {"content": "first", "conversation": "c", "turn": 1}]
    result = await cli(db_dsn, "import", str(write_jsonl(tmp_path / "c.jsonl", rows)), embedder=HashEmbedder())
    assert result.code == 0
    assert "1 lines came after a later turn of their conversation" in result.err
