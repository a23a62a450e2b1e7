"""Who said what (issue 27 item 1), part by part: the speaker of a memory, how the context,
the conversation window, working memory and the consolidation questions show it, and the
speakers an import keeps. The whole conversation replayed: tests/test_speakers_replay.py."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from src.consolidation.deep.prompts import (
    conflict_prompt,
    insights_prompt,
    merge_question,
    narrative_prompt,
    questions_prompt,
    recompress_prompt,
)
from src.context import tracks
from src.context.assembly import ContextAssembler
from src.context.fifo import AdaptiveFifo
from src.context.prompts import THOUGHT_MARK
from src.loop.aftermath import gate_pruned
from src.memory.importer import with_speaker
from src.memory.jsonl import LineError, parse_line
from src.recall.retrieval import Retriever
from src.recall.settings import RetrievalSettings
from src.recall.speakers import (
    CONCLUSION,
    SELF,
    THOUGHT,
    USER,
    Speaker,
    attributed,
    claims_as_own,
    common_speaker,
    first_person,
    from_label,
    speaker_of,
)
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.fakes import HashEmbedder
from tests.memory_cli_helpers import cli, write_jsonl

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
PRIYA = "Hi! My name is Priya Raman, I am a marine biologist."


# --- the speaker of a stored row ---------------------------------------------------------------

@pytest.mark.parametrize(("tag", "metadata", "expected"), [
    ("external_user", None, USER),
    ("internal_self", None, SELF),                      # said to the user
    ("internal_thought", None, THOUGHT),                # an answer that stayed internal
    ("internal_dmn", None, THOUGHT),
    ("internal_gut", {}, THOUGHT),
    ("internal_consolidation", None, CONCLUSION),
    ("internal_system2", None, Speaker("correction")),
    ("bootstrap_seed", None, None),                     # a boundary: nobody's utterance
    ("import", None, None),                             # an import that names no speaker
    ("import", {"speaker": "Emi"}, Speaker("person", "Emi")),
    ("external_user", {"speaker": "Priya  Raman"}, Speaker("person", "Priya Raman")),   # the name wins
    ("import", '{"speaker": "user"}', USER),            # a reserved label, JSON text as a query returns it
    ("internal_consolidation", {"speaker": "User"}, USER),   # an offline merge of the user's words
    ("external_user", {"speaker": "  "}, USER),         # a blank name says nothing
    ("external_user", {"speaker": 3}, USER),
    ("external_user", "not json", USER),
])
def test_the_speaker_comes_from_metadata_then_the_source_tag(tag, metadata, expected):
    assert speaker_of(tag, metadata) == expected


def test_each_speaker_is_said_in_words_and_a_named_turn_is_not_named_twice():
    assert attributed(PRIYA, USER) == f"The user said: {PRIYA}"
    assert attributed("Nice to meet you.", SELF) == "I said: Nice to meet you."
    assert attributed("Why does it matter now?", THOUGHT) == "I thought: Why does it matter now?"
    assert attributed("The user is a marine biologist.", CONCLUSION) == \
        "I concluded: The user is a marine biologist."
    assert attributed("Emi: I guess lol", from_label("Emi")) == "Emi said: I guess lol"    # import convention
    assert attributed("I guess lol", from_label("Emi")) == "Emi said: I guess lol"
    assert attributed("Never deceive.", None) == "Never deceive."
    assert from_label("self") == SELF and from_label("Conclusion") == CONCLUSION and from_label(" ") is None
    assert from_label("x" * 200).name == "x" * 80
    assert SELF.mind and THOUGHT.mind and CONCLUSION.mind and not USER.mind
    assert from_label("Emi").label == "Emi" and USER.label == "user"


def test_first_person_and_claims_as_own():
    for own in ("I am a marine biologist.", "My profession is marine biology.", "I'm Priya.",
                "Mine is the blue boat.", "I live in Lisbon"):
        assert first_person(own), own
    for not_own in ("The user is a marine biologist.", "The user told me she lives in Lisbon.",
                    "The user said: I am a marine biologist.", 'Priya says "I am tired".', "IBM and I/O"):
        assert not first_person(not_own), not_own
    # the first person resting only on what the user said takes the user's words as the mind's own
    assert claims_as_own("I am a marine biologist.", [USER, None])
    assert claims_as_own("My partner is Tomás.", [from_label("Priya")])
    assert not claims_as_own("The user is a marine biologist.", [USER])
    assert not claims_as_own("I tend to ask about the user's work.", [USER, SELF])   # the mind's own evidence
    assert not claims_as_own("I hold my boundaries.", [None])                        # seeds count for neither
    assert common_speaker([USER, USER]) == USER
    assert common_speaker([USER, SELF]) is None and common_speaker([USER, None]) is None
    assert common_speaker([]) is None


# --- the context lines ---------------------------------------------------------------------------

def test_a_context_line_names_its_speaker_in_full_and_compressed_form():
    user = tracks.ContextCandidate(1, PRIYA + " She studies octopus behaviour at the Oceanário in Lisbon, "
                            "mostly at night.", "episodic", 5.0, 1.0, compressed="marine biologist Priya",
                            speaker=USER)
    said = tracks.ContextCandidate(2, "Nice to meet you, Priya.", "episodic", 5.0, 1.0, speaker=SELF)
    plain = tracks.ContextCandidate(3, "Never deceive the guardian.", "procedural", 5.0, 1.0)
    assert tracks.render_line("episodic", PRIYA, USER) == f"- [episodic] The user said: {PRIYA}"
    result = tracks.fill_situational([user, said, plain], [1.0, 0.9, 0.1], 2000, header="H:")
    texts = {p.id: p.text for p in result.placed}
    assert texts[1].startswith("- [episodic] The user said: Hi! My name is Priya Raman")
    assert texts[2] == "- [episodic] I said: Nice to meet you, Priya."
    assert texts[3] == "- [procedural] Never deceive the guardian."            # compressed: < half the best
    assert [p.form for p in result.placed] == ["full", "full", "full"]
    short = tracks.fill_situational([user, plain], [1.0, 0.4], 2000, header="H:")
    assert short.placed[0].text.startswith("- [episodic] The user said: ")
    roll = tracks.roll_identity([user, said], np.random.default_rng(1), threshold=0.0, cap_tokens=3000)
    assert {p.text.split("] ")[1].split(":")[0] for p in roll.placed} == {"The user said", "I said"}


async def test_assembly_and_working_memory_show_who_said_each_memory(pool):
    store = MemoryStore(pool, HashEmbedder())
    await store.store_many([
        NewMemory(PRIYA, source_tag="external_user"),
        NewMemory("You are a marine biologist, Priya: what do you study?", source_tag="internal_self"),
        NewMemory("Priya: marine biology at the Oceanário", source_tag="import", metadata={"speaker": "Priya"}),
        NewMemory("The user is a marine biologist.", "reflection", source_tag="internal_consolidation"),
        NewMemory("Never deceive the guardian.", "procedural", source_tag="bootstrap_seed", immutable=True,
                  alpha=50, beta=1)])
    await pool.execute(
        "INSERT INTO scratch_buffer (content, source_tag) VALUES ($1, 'external_user'), ($2, 'internal_dmn')",
        "the octopus study of the marine biologist runs at night", "a thought about marine biologist nights")
    retriever = Retriever(pool, HashEmbedder(), None, Safety(), RetrievalSettings())
    result = await retriever.retrieve("what does the marine biologist study?", rng=np.random.default_rng(0),
                                      mutate=False)
    assert {w.speaker for w in result.working} == {USER, THOUGHT}
    ctx = await ContextAssembler(pool).assemble(result, rng=np.random.default_rng(0), now=NOW)
    text = ctx.text
    assert "- [episodic] The user said: Hi!" in text                    # full or first sentence: attributed
    assert "I said: You are a marine biologist, Priya" in text
    assert "Priya said: marine biology at the Oceanário" in text
    assert "I concluded: The user is a marine biologist." in text
    assert "- [procedural] Never deceive the guardian." in text                  # a boundary as it is
    assert "not yet consolidated] The user said: the octopus study" in text
    assert "not yet consolidated] I thought: a thought about marine biologist nights" in text
    assert f"] {PRIYA}" not in text                                            # never bare


# --- the conversation window -------------------------------------------------------------------------

async def test_the_window_marks_a_thought_and_the_exit_gate_gets_its_words_only():
    fifo = AdaptiveFifo(10_000, on_pruned=_noop)
    user = await fifo.add("user", PRIYA, source_tag="external_user")
    frame = "[internal thought — default mode] the octopus tank"
    dmn = await fifo.add("user", frame, source_tag="internal_dmn", words="the octopus tank")
    thought = await fifo.add("assistant", "Octopuses escape tanks.", source_tag="internal_thought")
    said = fifo.append("assistant", "Hello Priya.", source_tag="internal_self")
    assert [m.content for m in fifo.messages] == [PRIYA, frame, THOUGHT_MARK + "Octopuses escape tanks.",
                                                  "Hello Priya."]
    assert [m.said for m in fifo.messages] == [PRIYA, "the octopus tank", "Octopuses escape tanks.", "Hello Priya."]
    assert [m.speaker for m in (user, dmn, thought, said)] == [USER, THOUGHT, THOUGHT, SELF]
    # the mark is counted: what the model reads is what the budget holds
    assert thought.tokens == fifo.append("assistant", THOUGHT_MARK + "Octopuses escape tanks.",
                                         source_tag="internal_self").tokens

    class Gates:
        pruned: list[tuple[list[str], str]] = []

        async def prune(self, texts, *, source_tag):
            self.pruned.append((list(texts), source_tag))

    gates = Gates()
    await gate_pruned(gates, fifo.messages[:3])
    assert gates.pruned == [([PRIYA], "external_user"), (["the octopus tank"], "internal_dmn"),
                            (["Octopuses escape tanks."], "internal_thought")]


async def _noop(_messages) -> None:
    return None


# --- the consolidation questions -----------------------------------------------------------------------

@dataclass(frozen=True)
class _Hit:
    id: int
    content: str
    source_tag: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class _Cluster:
    index: int
    ids: list[int]
    texts: list[str]
    speakers: list[Speaker | None]


def test_consolidation_questions_show_every_source_with_its_speaker():
    hits = [_Hit(7, PRIYA, "external_user", {}), _Hit(8, "Nice to meet you.", "internal_self", {}),
            _Hit(9, "Emi: I guess lol", "import", {"speaker": "Emi"}), _Hit(1, "Never deceive.", "bootstrap_seed", {})]
    prompt = insights_prompt("What does the user do?", hits, 3)
    assert f"[7] The user said: {PRIYA}" in prompt
    assert "[8] I said: Nice to meet you." in prompt and "[9] Emi said: I guess lol" in prompt
    assert "[1] Never deceive." in prompt
    assert "Write about the user in the third person" in prompt
    rows = [{"id": 7, "content": PRIYA, "source_tag": "external_user", "metadata": "{}"},
            {"id": 5, "content": "old line"}]                                    # a row without a tag: as it is
    asked = questions_prompt(rows, [], 3)
    assert "[5] old line\n[7] The user said: Hi!" in asked and 'Ask about the user as "the user"' in asked
    merge = merge_question([_Cluster(1, [7, 8], [PRIYA, "I am a marine biologist."], [USER, USER])])
    assert f"  [7] The user said: {PRIYA}\n  [8] The user said: I am a marine biologist." in merge
    assert "  [3] bare" in merge_question([type("C", (), {"index": 1, "ids": [3], "texts": ["bare"]})()])
    narrative = narrative_prompt([{"id": 4, "content": "The user is a marine biologist.", "sources": [
        {"content": PRIYA, "source_tag": "external_user"}, "plain text"]}])
    assert f"  experience: The user said: {PRIYA}" in narrative and "  experience: plain text" in narrative
    recompress = recompress_prompt([{"id": 7, "content": PRIYA, "source_tag": "external_user",
                                     "compressed": "marine biologist", "related": [PRIYA]}])
    assert recompress.startswith("Rewrite the one-line summary") and "in the voice of whoever said it" in recompress
    assert f"Memory [7]: The user said: {PRIYA}" in recompress
    assert "New information:\nThe user said: I moved" in conflict_prompt("The user lives in Lisbon.",
                                                                           "I moved to Porto.", USER)


# --- imports keep their speakers ---------------------------------------------------------------------------

def test_an_import_line_keeps_its_speaker_and_refuses_one_that_is_no_name():
    line = json.dumps({"content": "Priya: I am a marine biologist", "metadata": {"speaker": " Priya\tRaman "}})
    record = with_speaker(parse_line(line, 1))
    assert record.memory.metadata["speaker"] == "Priya Raman"
    assert with_speaker(parse_line(json.dumps({"content": "no speaker"}), 2)).memory.metadata in ({}, None)
    for bad in ({"speaker": ""}, {"speaker": 42}, {"speaker": "x" * 81}):
        with pytest.raises(LineError, match="metadata.speaker"):
            with_speaker(parse_line(json.dumps({"content": "hi", "metadata": bad}), 3))


async def test_an_imported_conversation_is_shown_with_each_speakers_name(pool, db_dsn, tmp_path):
    path = write_jsonl(tmp_path / "chat.jsonl", [
        {"content": "Priya: I am a marine biologist in Lisbon", "metadata": {"speaker": "Priya"}},
        {"content": "Tomás: I am a pianist in Lisbon", "metadata": {"speaker": "Tomás"}},
        {"content": "I am the user and I love Lisbon", "source_tag": "external_user"},
        {"content": "bad", "metadata": {"speaker": ["Priya"]}}])
    result = await cli(db_dsn, "import", str(path), embedder=HashEmbedder())
    assert result.code == 0 and "imported 3 new memories" in result.out and "1 bad line skipped" in result.out
    assert result.err == f"{path}:4: 'metadata.speaker' must name who said it (a non-empty text)\n"
    retriever = Retriever(pool, HashEmbedder(), None, Safety(), RetrievalSettings())
    found = await retriever.retrieve("who is in Lisbon?", rng=np.random.default_rng(0), mutate=False)
    text = (await ContextAssembler(pool).assemble(found, rng=np.random.default_rng(0), now=NOW)).text
    assert "Priya said: I am a marine biologist in Lisbon" in text
    assert "Tomás said: I am a pianist in Lisbon" in text
    assert "The user said: I am the user and I love Lisbon" in text
