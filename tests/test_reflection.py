"""The reflection bank (plan §3.7): corrections stored, and recalled by the attention focus."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np
import pytest

from src.errors import ProviderUnavailable
from src.metacognition.escalation import Asking, EscalationTriggers, Recording, loop_before_escalate
from src.metacognition.reflection import (
    NewCorrection,
    PastCorrection,
    corrections_for,
    reflection_block,
    store_correction,
)
from src.metacognition.settings import ReflectionSettings
from src.providers.protocols import ChatMessage
from src.recall.store import MemoryStore, NewMemory
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM, fok

# Bag-of-words vectors: sharing a handful of words with a longer text gives a cosine
# of roughly shared / sqrt(len_a · len_b); unrelated texts sit near 0.
LOOSE = ReflectionSettings(min_similarity={"default": 0.2})
FOCUS = "How should I rotate the database credentials without downtime?"


class DownEmbedder(HashEmbedder):
    """Stores fine with its parent's vectors, then goes down for queries."""

    async def embed(self, texts, task_type, titles=None):
        if task_type == "RETRIEVAL_QUERY":
            raise ProviderUnavailable("embedder down", provider="fake")
        return await super().embed(texts, task_type, titles)


async def add(store: MemoryStore, trigger: str, correction: str, error_type: str = "missed step") -> int:
    return await store_correction(store, NewCorrection(
        trigger=trigger, error_type=error_type, original_reasoning="I said to restart everything.",
        correction=correction, context="source external_user; escalated because identity_touched"))


async def test_a_correction_is_a_readable_memory_with_its_five_fields(pool) -> None:
    store = MemoryStore(pool, HashEmbedder())
    mid = await store_correction(store, NewCorrection(
        trigger=FOCUS, error_type="missed step", original_reasoning="Restart the database. " * 40,
        correction="Rotate with two valid credentials: add the new one, switch clients, then revoke.",
        context="source external_user; confidence 0.31"), extra={"system2_model": "claude"})
    row = await pool.fetchrow("SELECT * FROM memories WHERE id = $1", mid)
    assert (row["memory_type"], row["source_tag"], row["source_confidence"]) == (
        "correction", "internal_system2", 0.8)
    assert row["embed_model"] == "fake-hash-768"
    lines = row["content"].splitlines()
    assert lines[0] == f"Situation: {FOCUS}"
    assert lines[1] == "Error: missed step"
    assert lines[2].startswith("What I did: Restart the database.") and len(lines[2]) == len("What I did: ") + 300
    assert lines[3] == ("Correction: Rotate with two valid credentials: add the new one, switch clients, "
                        "then revoke.")
    meta = json.loads(row["metadata"]) if isinstance(row["metadata"], str) else row["metadata"]
    assert meta["kind"] == "correction" and meta["system2_model"] == "claude"
    assert meta["trigger"] == FOCUS and meta["context"] == "source external_user; confidence 0.31"
    assert meta["original_reasoning"] == ("Restart the database. " * 40).strip()
    with pytest.raises(ValueError, match="a correction needs a non-empty correction"):
        await store_correction(store, NewCorrection(trigger="x", error_type="", original_reasoning="",
                                                    correction="  ", context=""))


async def test_recall_follows_the_focus_not_the_rest(pool) -> None:
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    creds = await add(store, FOCUS, "Use two valid credentials during rotation, then revoke the old one.")
    tz = await add(store, "What time is the meeting in Tokyo for me in Berlin?",
                   "Convert time zones with the date: daylight saving changes the offset.", "wrong offset")
    # the same words in an ordinary memory never count as a correction
    await store.store(NewMemory(f"{FOCUS} Rotate credentials.", "semantic"))

    similar = await corrections_for(pool, embedder, "rotate the database credentials tonight without downtime",
                                    settings=LOOSE)
    assert [c.id for c in similar] == [creds]
    assert similar[0].arm == "vector" and similar[0].similarity > 0.2
    assert similar[0].correction == "Use two valid credentials during rotation, then revoke the old one."
    assert similar[0].error_type == "missed step" and similar[0].trigger == FOCUS
    assert await corrections_for(pool, embedder, "Tell me a joke about penguins", settings=LOOSE) == []
    tokyo = await corrections_for(pool, embedder, "meeting time Tokyo Berlin", settings=LOOSE)
    assert [c.id for c in tokyo] == [tz]
    assert await corrections_for(pool, embedder, "   ") == []


async def test_top_k_best_first(pool) -> None:
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    triggers = ["rotate database credentials", "rotate database passwords", "rotate api tokens",
                "penguin jokes tonight", "weather forecast tomorrow"]
    ids = [await add(store, t, f"lesson {i}") for i, t in enumerate(triggers)]
    everything = ReflectionSettings(min_similarity={"default": -1.0})
    found = await corrections_for(pool, embedder, "rotate database credentials", settings=everything)
    assert [c.id for c in found] == ids[:3]      # 3, 2, 1 words in common
    sims = [c.similarity for c in found]
    assert sims == sorted(sims, reverse=True)
    more = await corrections_for(pool, embedder, "rotate database credentials", k=5, settings=everything)
    assert sorted(c.id for c in more) == ids
    # a similarity floor keeps only real matches
    assert [c.id for c in await corrections_for(pool, embedder, "rotate database credentials",
                                                settings=LOOSE)] == ids[:2]


async def test_full_text_when_there_is_no_vector(pool) -> None:
    embedder = DownEmbedder()
    store = MemoryStore(pool, embedder)
    creds = await add(store, FOCUS, "Use two valid credentials during rotation.")
    found = await corrections_for(pool, embedder, "database credentials rotation", settings=LOOSE)
    assert [(c.id, c.arm, c.similarity) for c in found] == [(creds, "fulltext", None)]
    assert await corrections_for(pool, embedder, "penguins", settings=LOOSE) == []


async def test_rows_of_another_embed_model_are_found_by_full_text_only(pool) -> None:
    old = HashEmbedder(model_name="old-model-768")
    old_id = await add(MemoryStore(pool, old), FOCUS, "Use two valid credentials during rotation.")
    new = HashEmbedder()
    new_id = await add(MemoryStore(pool, new), FOCUS, "Check the connection pool drains first.")
    found = await corrections_for(pool, new, "rotate the database credentials", settings=LOOSE)
    assert [(c.id, c.arm) for c in found] == [(new_id, "vector"), (old_id, "fulltext")]


async def test_a_given_focus_vector_is_used_as_is(pool) -> None:
    embedder = HashEmbedder()
    await add(MemoryStore(pool, embedder), FOCUS, "Use two valid credentials.")
    calls = len(embedder.calls)
    vec = (await embedder.embed(["rotate database credentials"], "RETRIEVAL_QUERY"))[0]
    found = await corrections_for(pool, embedder, "rotate database credentials", focus_vec=vec, settings=LOOSE)
    assert len(found) == 1 and len(embedder.calls) == calls + 1
    with pytest.raises(ValueError, match="focus vector must be 768 finite floats"):
        await corrections_for(pool, embedder, "x", focus_vec=np.zeros(768))


def test_reflection_block_text() -> None:
    at = datetime(2026, 11, 22, tzinfo=UTC)
    past = [PastCorrection(1, "rotate creds", "missed step", "restart all", "two valid credentials", "",
                           at, 0.8, "vector"),
            PastCorrection(2, "meeting in Tokyo", "", "", "convert with the date " + "x" * 400, "", at, 0.5,
                           "vector")]
    block = reflection_block(past, field_chars=40)
    assert block.splitlines() == [
        "In similar past situations, you made these errors:",
        "1. [missed step] Situation: rotate creds | What you did: restart all | Do instead: two valid "
        "credentials",
        "2. Situation: meeting in Tokyo | Do instead: convert with the date xxxxxxxxxxxxxxxxx…",
    ]
    assert reflection_block([]) == ""


async def test_system2s_correction_surfaces_next_time_for_a_similar_focus(pool) -> None:
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    s1 = ScriptedLLM(meta=fok("PARTIAL", 0.5)).say("Just restart the database, I think? Maybe.",
                                                  "I'm not sure. Possibly restart it?")
    s2 = ScriptedLLM(model="scripted-2").answer_structured({
        "answer": "Create a second credential, move clients to it, then revoke the first.",
        "explanation": "A restart drops connections.", "needed_correction": True,
        "error_type": "risky shortcut",
        "correction_pattern": "For credential rotation keep two valid credentials during the switch."})
    out = await loop_before_escalate(s1, s2, (ChatMessage("user", FOCUS),), focus=FOCUS, threshold=0.55,
                                     recording=Recording(store, source_tag="external_user"))
    assert out.path == "system2" and out.correction_id is not None

    # next cycle: a DMN thought about the same thing is the focus
    found = await corrections_for(pool, embedder, "I keep thinking about rotating the database credentials",
                                  settings=LOOSE)
    assert [c.id for c in found] == [out.correction_id]
    c = found[0]
    assert (c.trigger, c.error_type, c.correction) == (
        FOCUS, "risky shortcut", "For credential rotation keep two valid credentials during the switch.")
    # System 2 reviewed the better of the two drafts (the first, here), and that is what is kept
    assert c.original_reasoning == "Just restart the database, I think? Maybe."
    assert c.context.startswith("source external_user; escalated because confidence ")
    assert reflection_block(found).startswith(
        "In similar past situations, you made these errors:\n1. [risky shortcut] Situation: " + FOCUS)
    assert await corrections_for(pool, embedder, "Tell me a joke about penguins", settings=LOOSE) == []


async def test_no_correction_is_stored_when_system2_found_nothing_wrong(pool) -> None:
    store = MemoryStore(pool, HashEmbedder())
    s1 = ScriptedLLM(meta=fok("KNOWN", 0.9)).say("Rotate with two credentials.\nConfidence: 0.9")
    s2 = ScriptedLLM(model="scripted-2").answer_structured({
        "answer": "Rotate with two credentials.", "explanation": "The draft was right.",
        "needed_correction": False, "error_type": "", "correction_pattern": ""})
    out = await loop_before_escalate(s1, s2, (ChatMessage("user", FOCUS),), focus=FOCUS, threshold=0.55,
                                     recording=Recording(store),
                                     asking=Asking(triggers=EscalationTriggers(irreversibility=True)))
    assert out.path == "system2" and out.correction_id is None
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE memory_type = 'correction'") == 0
    assert await pool.fetchval("SELECT count(*) FROM escalations") == 1
