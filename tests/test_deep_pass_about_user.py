"""A deep pass about the user that fits a small model (issue 38 item 6).

Run on a store of imported strangers' chats, a pass asked its questions about strangers,
joined two people from different conversations in one insight and called a stranger's hobby
the user's; its insight replies were cut at the 512-token cap and the repair, asked at the
same cap, was cut again. Here: a store of two imported conversations and the user's own
statements, the scripted consolidation model (tests/consolidation_fakes.py) behind the real
ResilientLanguageModel, and the real deep pass.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

from src.consolidation.deep import evidence
from src.consolidation.deep.deep_pass import DEEP_PHASES, ConsolidationParts, run_deep_pass
from src.consolidation.deep.prompts import ContextBatch, Insights, Questions
from src.consolidation.settings import ConsolidationSettings
from src.memory.jsonl import parse_line
from src.providers.reply_cap import reply_tokens
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.consolidation_fakes import ConsolidationModel, Cut, ids_in, language_model
from tests.fakes import HashEmbedder

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
QUESTION = "What games does the user play?"
CHESS = "The user plays chess at the harbour club every Sunday and lost a chess final last week."
USER_LINES = ["I play chess at the harbour club every Sunday.", "My sister Maren lives in Porto.",
              "I work as a radiographer at the animal hospital.", "I lost my chess final last week.",
              "I am teaching my nephew to play chess.", "My favourite tea is lapsang souchong."]


def stranger_lines(name: str, other: str, conversation: str, n: int) -> list[NewMemory]:
    """`n` imported turns of one conversation between `name` and `other`, about video games."""
    return [NewMemory(f"{(name, other)[i % 2]}: I played the new racing video game again tonight, round {i}.",
                      source_tag="import", metadata={"speaker": (name, other)[i % 2], "conversation": conversation})
            for i in range(n)]


async def seeded_store(pool, embedder) -> dict[str, list[int]]:
    """Strangers imported first (two conversations), then the user's own statements: the ids of each."""
    store = MemoryStore(pool, embedder)
    ids = {"A": await store.store_many(stranger_lines("Jolene", "Sam", "A", 60)),
           "B": await store.store_many(stranger_lines("Caroline", "Mo", "B", 60)),
           "user": await store.store_many([NewMemory(t) for t in USER_LINES])}
    # the strangers' chats were imported after the user spoke: the newest rows are theirs
    await pool.execute("UPDATE memories SET created_at = $2 WHERE id = ANY($1::bigint[])", ids["user"],
                       NOW - timedelta(days=2))
    await pool.execute("UPDATE memories SET created_at = $2 WHERE id = ANY($1::bigint[])", ids["A"] + ids["B"],
                       NOW - timedelta(hours=1))
    return ids


def chess(ids: dict[str, list[int]], request) -> list[int]:
    """The user's chess lines among the ids a request shows (what a chess insight rests on)."""
    shown = set(ids_in(request.messages[0].content))
    return [i for i, text in zip(ids["user"], USER_LINES, strict=True)
            if ("chess at" in text or "chess final" in text) and i in shown]


async def deep(pool, llm, embedder, names, settings=None):
    return await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=llm, safety=Safety(),
                                                  settings=settings or ConsolidationSettings()),
                               trigger="manual", now=NOW, rng=random.Random(5),
                               phases=[p for p in DEEP_PHASES if p.name in names])


def prompt_of(backend: ConsolidationModel, kind: str, at: int = 0) -> str:
    return [r.messages[0].content for r in backend.requests if ConsolidationModel.kind_of(r) == kind][at]


async def test_the_questions_read_the_users_words_first_and_strangers_only_within_their_share(pool):
    embedder = HashEmbedder()
    ids = await seeded_store(pool, embedder)
    backend = ConsolidationModel().push("questions", json.dumps({"questions": [QUESTION]}))
    backend.push("insights", lambda r: json.dumps({"insights": []}))
    report = await deep(pool, language_model(backend, pool), embedder, ("questions",))
    assert report is not None and report.status == "done"

    shown = set(ids_in(prompt_of(backend, "questions")))
    settings = ConsolidationSettings().deep
    # every statement of the user's, though 120 strangers' lines are newer
    assert set(ids["user"]) <= shown
    strangers = shown - set(ids["user"])
    assert 0 < len(strangers) <= evidence.strangers_allowed(settings.recent_memories, settings.imported_share)
    # of one conversation (the newest), never both
    assert strangers <= set(ids["A"]) or strangers <= set(ids["B"])
    assert "about the user and about me" in prompt_of(backend, "questions")


async def test_a_questions_evidence_puts_the_users_statements_first_and_joins_no_two_conversations(pool):
    embedder = HashEmbedder()
    ids = await seeded_store(pool, embedder)
    backend = ConsolidationModel().push("questions", json.dumps({"questions": [QUESTION]}))
    backend.push("insights", lambda r: json.dumps({"insights": [
        {"insight": CHESS,
         "cited_ids": chess(ids, r)}]}))
    report = await deep(pool, language_model(backend, pool), embedder, ("questions", "insights"))
    assert report is not None and report.status == "done"

    shown = ids_in(prompt_of(backend, "insights"))
    users = [i for i in shown if i in ids["user"]]
    assert users and shown[:len(users)] == users           # the user's statements lead the evidence
    others = set(shown) - set(users)
    assert others <= set(ids["A"]) or others <= set(ids["B"])
    assert report.phases["insights"]["counts"].get("insights") == 1
    # the phase's call asked for a reply sized for its five insights, not the model's 512 default
    [asked] = [r.max_tokens for r in backend.requests if ConsolidationModel.kind_of(r) == "insights"]
    assert asked == reply_tokens(Insights, ConsolidationSettings().deep.insights_per_question) > 512
    [questions_cap] = [r.max_tokens for r in backend.requests if ConsolidationModel.kind_of(r) == "questions"]
    assert questions_cap == reply_tokens(Questions, ConsolidationSettings().deep.questions)


async def test_an_insight_that_calls_a_strangers_words_the_users_or_joins_two_conversations_is_refused(pool):
    embedder = HashEmbedder()
    ids = await seeded_store(pool, embedder)
    backend = ConsolidationModel().push("questions", json.dumps({"questions": [QUESTION]}))

    def answer(request):
        shown = ids_in(request.messages[0].content)
        theirs = [i for i in shown if i in ids["A"] or i in ids["B"]][:2]
        return json.dumps({"insights": [
            # a stranger's hobby as the user's
            {"insight": "The user plays the new racing video game every night.", "cited_ids": theirs},
            # the user's own words: kept
            {"insight": CHESS,
             "cited_ids": chess(ids, request)}]})

    backend.push("insights", answer)
    report = await deep(pool, language_model(backend, pool), embedder, ("questions", "insights"))
    counts = report.phases["insights"]["counts"]
    assert counts.get("refused_not_the_users") == 1 and counts.get("insights") == 1
    stored = [r["content"] for r in await pool.fetch("SELECT content FROM memories WHERE metadata->>'via' = 'insight'")]
    assert stored == [CHESS]


async def test_two_conversations_in_one_insight_are_refused(pool):
    """The evidence holds one conversation; a model that cites the other (an id it was not
    shown is refused earlier, so here the second is cited by a DMN association's way in:
    integrity.screen itself) is held to the same rule."""
    from src.consolidation.deep.integrity import refuse_by_words
    embedder = HashEmbedder()
    ids = await seeded_store(pool, embedder)
    rows = [dict(r) for r in await pool.fetch(
        "SELECT id, content, source_tag, metadata, immutable, import_key IS NOT NULL AS imported "
        "FROM memories WHERE id = ANY($1::bigint[])", [ids["A"][0], ids["B"][0]])]
    refusal = refuse_by_words("Jolene and Caroline are adorable together, both racing fans.", rows,
                              copy_overlap=0.8, subject_overlap=0.25)
    assert refusal is not None and refusal.reason == "strangers"
    same = [dict(r) for r in await pool.fetch(
        "SELECT id, content, source_tag, metadata, immutable FROM memories WHERE id = ANY($1::bigint[])",
        ids["A"][:2])]
    assert refuse_by_words("Jolene and Sam race the same video game at night.", same,
                           copy_overlap=0.8, subject_overlap=0.25) is None


async def test_a_reply_cut_at_its_cap_is_asked_again_at_twice_the_cap_never_repaired(pool):
    embedder = HashEmbedder()
    ids = await seeded_store(pool, embedder)
    backend = ConsolidationModel().push("questions", json.dumps({"questions": [QUESTION]}))

    def whole(request):
        return json.dumps({"insights": [{"insight": CHESS,
                                         "cited_ids": chess(ids, request)}]})

    backend.push("insights", Cut('{"insights": [{"insight": "The user plays chess at the harb'), whole)
    report = await deep(pool, language_model(backend, pool), embedder, ("questions", "insights"))
    assert report.status == "done" and report.phases["insights"]["counts"].get("insights") == 1

    asked = [r for r in backend.requests if ConsolidationModel.kind_of(r) == "insights"]
    assert [len(r.messages) for r in asked] == [1, 1]              # no repair round
    first = reply_tokens(Insights, ConsolidationSettings().deep.insights_per_question)
    assert [r.max_tokens for r in asked] == [first, 2 * first]     # twice (the window allows it)
    purposes = [r["purpose"] for r in await pool.fetch("SELECT purpose FROM llm_calls ORDER BY id")]
    assert not [p for p in purposes if p.endswith(":repair")]
    assert report.calls == 3                                       # questions, the cut reply, the second


async def test_a_batch_whose_reply_is_cut_is_split_in_halves(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    await store.store_many([NewMemory(f"I moved the deployment note {i} to the harbour wiki today.")
                            for i in range(8)])
    backend = ConsolidationModel().push("contextual", Cut('{"contexts": [{"id": 1, "context": "Said'))
    report = await deep(pool, language_model(backend, pool), embedder, ("contextual",))
    assert report is not None and report.status == "done"
    asked = [r for r in backend.requests if ConsolidationModel.kind_of(r) == "contextual"]
    first, *rest = [ids_in_memory(r.messages[0].content) for r in asked]
    assert len(first) > 1 and rest[0] == first[:len(first) // 2] and rest[1] == first[len(first) // 2:]
    assert all(len(r.messages) == 1 for r in asked)                # the cut reply was not repaired
    assert asked[0].max_tokens == reply_tokens(ContextBatch, len(first))
    assert asked[1].max_tokens == reply_tokens(ContextBatch, len(rest[0]))


def ids_in_memory(prompt: str) -> list[int]:
    import re
    return [int(x) for x in re.findall(r'<memory id="(\d+)"', prompt)]


def test_an_imported_line_keeps_its_conversation():
    record = parse_line(json.dumps({"content": "Emi: I ran the coast path.", "conversation": 7,
                                    "metadata": {"speaker": "Emi"}}), 1)
    assert record.memory.metadata == {"speaker": "Emi", "conversation": "7"}
    named = parse_line(json.dumps({"content": "x", "conversation": "a", "metadata": {"conversation": "b"}}), 2)
    assert named.memory.metadata["conversation"] == "b"
