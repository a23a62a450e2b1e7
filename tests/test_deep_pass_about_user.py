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


async def stored_insights(pool) -> list[str]:
    return [r["content"] for r in await pool.fetch("SELECT content FROM memories WHERE metadata->>'via' = 'insight'")]


def prompt_of(backend: ConsolidationModel, kind: str, at: int = 0) -> str:
    return [r.messages[0].content for r in backend.requests if ConsolidationModel.kind_of(r) == kind][at]


async def questions_shown(pool, embedder, settings=None) -> set[int]:
    backend = ConsolidationModel().push("questions", json.dumps({"questions": [QUESTION]}))
    report = await deep(pool, language_model(backend, pool), embedder, ("questions",), settings)
    assert report is not None and report.status == "done"
    assert "about the user and about me" in prompt_of(backend, "questions")
    return set(ids_in(prompt_of(backend, "questions")))


async def test_the_questions_read_the_users_words_and_no_strangers_by_default(pool):
    embedder = HashEmbedder()
    ids = await seeded_store(pool, embedder)
    # every statement of the user's, though 120 strangers' lines are newer, and no stranger's
    assert await questions_shown(pool, embedder) == set(ids["user"])


async def test_strangers_fill_at_most_their_share_from_one_conversation(pool):
    embedder = HashEmbedder()
    ids = await seeded_store(pool, embedder)
    settings = ConsolidationSettings.model_validate({"deep": {"imported_share": 0.25}})
    shown = await questions_shown(pool, embedder, settings)
    strangers = shown - set(ids["user"])
    assert set(ids["user"]) <= shown
    assert 0 < len(strangers) <= evidence.strangers_allowed(settings.deep.recent_memories, 0.25) == 25
    assert strangers <= set(ids["A"]) or strangers <= set(ids["B"])     # one conversation, never both


async def test_a_store_of_imported_chats_only_reflects_on_one_conversation(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    a = await store.store_many(stranger_lines("Jolene", "Sam", "A", 30))
    b = await store.store_many(stranger_lines("Caroline", "Mo", "B", 30))
    shown = await questions_shown(pool, embedder)
    assert shown == set(b)           # the newest conversation, whole; none of the other
    assert not shown & set(a)


async def test_a_question_about_the_user_rests_on_the_users_statements_only(pool):
    embedder = HashEmbedder()
    ids = await seeded_store(pool, embedder)
    backend = ConsolidationModel().push("questions", json.dumps({"questions": [QUESTION]}))
    backend.push("insights", lambda r: json.dumps({"insights": [{"insight": CHESS, "cited_ids": chess(ids, r)}]}))
    report = await deep(pool, language_model(backend, pool), embedder, ("questions", "insights"))
    assert report is not None and report.status == "done"

    shown = ids_in(prompt_of(backend, "insights"))
    assert shown and set(shown) <= set(ids["user"])        # no stranger's video games beside them
    assert report.phases["insights"]["counts"].get("insights") == 1
    # the phase's call asked for a reply sized for its five insights, not the model's 512 default
    [asked] = [r.max_tokens for r in backend.requests if ConsolidationModel.kind_of(r) == "insights"]
    assert asked == reply_tokens(Insights, ConsolidationSettings().deep.insights_per_question) > 512
    [questions_cap] = [r.max_tokens for r in backend.requests if ConsolidationModel.kind_of(r) == "questions"]
    assert questions_cap == reply_tokens(Questions, ConsolidationSettings().deep.questions)


async def test_a_question_about_a_stranger_reads_the_users_words_first_and_one_conversation(pool):
    embedder = HashEmbedder()
    ids = await seeded_store(pool, embedder)
    backend = ConsolidationModel().push("questions", json.dumps({"questions": ["What games does Jolene play?"]}))
    backend.push("insights", lambda r: json.dumps({"insights": []}))
    await deep(pool, language_model(backend, pool), embedder, ("questions", "insights"))
    shown = ids_in(prompt_of(backend, "insights"))
    users = [i for i in shown if i in ids["user"]]
    assert users and shown[:len(users)] == users           # the user's statements lead the evidence
    others = set(shown) - set(users)
    assert others and (others <= set(ids["A"]) or others <= set(ids["B"]))


async def test_an_insight_that_calls_a_strangers_words_the_users_or_joins_two_conversations_is_refused(pool):
    embedder = HashEmbedder()
    ids = await seeded_store(pool, embedder)
    # a question about a stranger: the evidence holds the user's lines and one conversation
    backend = ConsolidationModel().push("questions", json.dumps({"questions": ["What games does Jolene play?"]}))

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
    assert await stored_insights(pool) == [CHESS]


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


async def test_an_insight_said_again_or_with_a_copied_date_stamp_is_written_once(pool):
    """A 1.5B model wrote "Kevin was born in Albania." four times in one pass, twice with the
    date stamp of its evidence copied on ("… (today, 08:55)")."""
    embedder = HashEmbedder()
    ids = await seeded_store(pool, embedder)
    backend = ConsolidationModel().push("questions", json.dumps({"questions": [QUESTION]}))
    backend.push("insights", lambda r: json.dumps({"insights": [
        {"insight": CHESS, "cited_ids": chess(ids, r)},
        {"insight": CHESS + " (today, 08:55)", "cited_ids": chess(ids, r)},
        {"insight": "  " + CHESS.upper() + " (Mon 22 Jan 2024, 2 years ago)", "cited_ids": chess(ids, r)}]}))
    report = await deep(pool, language_model(backend, pool), embedder, ("questions", "insights"))
    counts = report.phases["insights"]["counts"]
    assert counts.get("insights") == 1 and counts.get("duplicate_insights") == 2
    assert await stored_insights(pool) == [CHESS]


async def test_the_merge_leaves_chatter_alone_and_says_the_user_only_of_the_users_words(pool):
    from src.consolidation.deep.merge import Cluster, _problem
    from src.consolidation.deep.prompts import MergedInsight
    from src.recall.speakers import CONCLUSION, Speaker

    emi = Speaker("person", "Emi")
    chatter = Cluster(1, [1, 2], ["That is amazing!", "That is amazing!!"], "f", "That is amazing!", [1, 2], [emi, emi])
    bad = MergedInsight(cluster=1, insight="The user finds things amazing.", cited_ids=[1, 2])
    assert "none of its memories is the user's" in _problem(chatter, bad)
    insights = Cluster(2, [3, 4], ["Kevin was born in Albania.", "Kevin is from Albania."], "g", "Kevin…", [3, 4],
                       [CONCLUSION, CONCLUSION])
    merged = MergedInsight(cluster=2, insight="The user concludes Kevin was born in Albania.", cited_ids=[3, 4])
    assert "none of its memories is the user's" in _problem(insights, merged)
    fine = MergedInsight(cluster=2, insight="Kevin was born in Albania and is from there.", cited_ids=[3, 4])
    assert _problem(insights, fine) is None


async def test_the_questions_see_only_themes_of_the_users_and_the_minds_own_memories(pool):
    """Run F: a theme the light ticker noticed among imported strangers' lines ("What do you think
    of this as a lost and found poster") came back as all three of the pass's questions."""
    from src.consolidation.light import findings_repository
    embedder = HashEmbedder()
    ids = await seeded_store(pool, embedder)
    await findings_repository.insert_finding(pool, "theme", "a", ids["A"][:3], {"label": "racing video game nights"})
    await findings_repository.insert_finding(pool, "theme", "u", ids["user"][:3], {"label": "chess at the harbour"})
    backend = ConsolidationModel().push("questions", json.dumps({"questions": [QUESTION]}))
    await deep(pool, language_model(backend, pool), embedder, ("questions",))
    asked = prompt_of(backend, "questions")
    assert "chess at the harbour" in asked and "racing video game nights" not in asked


async def test_a_narrative_calls_a_stranger_the_user_only_when_its_insight_does(pool):
    """Run G: the merge insight "Nicolas consistently uses the phrase 'Oh dang that sucks'" got the
    narrative "The user consistently uses the phrase…"."""
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    sources = await store.store_many([NewMemory(f"Nicolas: Oh dang that sucks ({i})", source_tag="import",
                                                metadata={"speaker": "Nicolas"}) for i in range(3)])
    [insight] = await store.store_many([NewMemory("Nicolas consistently says 'Oh dang that sucks'.", "reflection",
                                                  source_tag="internal_consolidation",
                                                  metadata={"kind": "insight", "via": "merge"})])
    await pool.executemany("INSERT INTO memory_supersedes (insight_id, source_id, via) VALUES ($1, $2, 'merge')",
                           [(insight, s) for s in sources])
    backend = ConsolidationModel().push("narrative", json.dumps({"narratives": [
        {"insight_id": insight, "narrative": "The user consistently says 'Oh dang that sucks' when things go wrong."}]}))
    report = await deep(pool, language_model(backend, pool), embedder, ("narrative",))
    assert report.phases["narrative"]["counts"].get("refused_not_the_users") == 1
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE memory_type = 'narrative'") == 0


async def test_the_merge_takes_statements_not_chatter(pool):
    """Run D: "That is amazing!" said twice became the insight "Emi said that is amazing!"."""
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    chatter = await store.store_many([NewMemory("That is amazing!", source_tag="import", metadata={"speaker": "Emi"})
                                      for _ in range(2)])
    said = await store.store_many([NewMemory("Emi: I ran the coast path from Porthleven today.", source_tag="import",
                                             metadata={"speaker": "Emi"}) for _ in range(2)])
    report = await deep(pool, None, embedder, ("merge",))
    assert report.phases["merge"]["counts"].get("clusters") == 1
    cited = {r["source_id"] for r in await pool.fetch("SELECT source_id FROM memory_supersedes WHERE via = 'merge'")}
    assert cited <= set(said) and not cited & set(chatter)
