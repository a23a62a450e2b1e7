"""Issue 27 item 1 in consolidation's own phases: merges keep who said what.

Offline, a merge restates its members' words (the extractive merge): the merged memory keeps
their speaker (`metadata.speaker`), so the prompt shows "The user said: I am …", never the
mind's own "I am …"; one speaker's words merge only with that speaker's. With a model, a
merged sentence that states in the first person what only the user said is refused like a
bad citation (a `consolidation_failures` row), and asked again.
"""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime

from src.consolidation.deep.deep_pass import ConsolidationParts, run_deep_pass
from src.consolidation.settings import ConsolidationSettings
from src.context import tracks
from src.recall.speakers import USER, speaker_of
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.consolidation_fakes import ConsolidationModel, language_model
from tests.fakes import HashEmbedder

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
FACT = "I am a marine biologist at the Oceanário in Lisbon, studying octopus {}"


async def _seed(pool, embedder):
    store = MemoryStore(pool, embedder)
    user = await store.store_many([NewMemory(FACT.format("behaviour"), source_tag="external_user"),
                                   NewMemory(FACT.format("behaviour!"), source_tag="external_user"),
                                   NewMemory(FACT.format("behaviour, yes"), source_tag="external_user")])
    mind = await store.store_many([NewMemory(FACT.format("behaviour."), source_tag="internal_self"),
                                   NewMemory(FACT.format("behaviour?!"), source_tag="internal_self")])
    return user, mind


async def _pass(pool, embedder, llm):
    return await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=llm, safety=Safety(),
                                                  settings=ConsolidationSettings()),
                               trigger="manual", now=NOW, rng=random.Random(7))


def _clusters(prompt: str) -> list[tuple[int, list[int]]]:
    return [(int(n), [int(x) for x in re.findall(r"\[(\d+)\]", body)])
            for n, body in re.findall(r"Cluster (\d+):((?:\n  \[\d+\].*)+)", prompt)]


async def test_an_offline_merge_keeps_the_words_of_its_speaker(pool):
    embedder = HashEmbedder()
    user, mind = await _seed(pool, embedder)
    report = await _pass(pool, embedder, None)
    assert report.status == "done"
    merges = await pool.fetch("""SELECT i.id, i.content, i.source_tag, i.metadata, i.memory_type,
                                        array_agg(s.source_id ORDER BY s.source_id) AS sources
                                   FROM memories i JOIN memory_supersedes s ON s.insight_id = i.id
                                  WHERE i.metadata->>'via' = 'merge' GROUP BY i.id""")
    assert merges, "the near-duplicates were merged"
    by_sources = {tuple(r["sources"]): r for r in merges}
    assert set(by_sources) <= {tuple(sorted(user)), tuple(sorted(mind))}    # never across speakers
    merged_user = by_sources[tuple(sorted(user))]
    meta = json.loads(merged_user["metadata"])
    assert meta["extractive"] is True and meta["speaker"] == "user"
    speaker = speaker_of(merged_user["source_tag"], meta)
    assert speaker == USER
    line = tracks.render_line(merged_user["memory_type"], merged_user["content"], speaker)
    assert line.startswith("- [reflection] The user said: I am a marine biologist")
    if tuple(sorted(mind)) in by_sources:
        assert json.loads(by_sources[tuple(sorted(mind))]["metadata"])["speaker"] == "self"


async def test_a_model_that_writes_the_users_words_as_its_own_is_refused(pool):
    embedder = HashEmbedder()
    user, _ = await _seed(pool, embedder)
    backend = ConsolidationModel()

    def merge_as_own(request) -> str:
        prompt = request.messages[0].content
        assert "The user said: I am a marine biologist" in prompt and "third person" in prompt
        return json.dumps({"insights": [
            {"cluster": n, "insight": "I am a marine biologist at the Oceanário in Lisbon, studying octopus.",
             "cited_ids": ids} for n, ids in _clusters(prompt)]})

    def merge_third_person(request) -> str:
        return json.dumps({"insights": [
            {"cluster": n, "insight": "The user is a marine biologist at the Oceanário in Lisbon, studying "
                                      "octopus behaviour.", "cited_ids": ids}
            for n, ids in _clusters(request.messages[0].content)]})

    # the batch's user cluster is refused (the mind's own cluster may say "I am"); asked again
    # alone, the model writes it in the third person
    backend.push("merge", merge_as_own, merge_third_person)
    await _pass(pool, embedder, language_model(backend, pool))
    failures = [r["error"] for r in await pool.fetch("SELECT error FROM consolidation_failures")]
    assert any("first person" in f for f in failures), failures
    # the user's words merged are never the mind's "I am …"; the mind's own may be (a batch
    # keeps the answers it did not reject: issue 40)
    written = [r["content"] for r in await pool.fetch(
        """SELECT DISTINCT i.content FROM memories i JOIN memory_supersedes s ON s.insight_id = i.id
            WHERE i.metadata->>'via' = 'merge' AND s.source_id = ANY($1::bigint[])""", user)]
    assert written and not any(w.startswith("I am") for w in written), written
