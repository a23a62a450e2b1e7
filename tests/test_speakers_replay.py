"""Issue 27 item 1, replayed: a user tells the mind who she is, consolidation runs, and the
mind never takes her statements as its own.

The conversation of the issue ("Hi! My name is Priya Raman, I am a marine biologist…",
then more facts and two questions) goes through the real loop on the real database, with a
scripted System 1 at the provider seam; the scratch buffer is flushed and one deep pass runs
with a scripted consolidation model that writes what it is shown the way a small model did:
a line that says who said it is restated about its speaker ("The user said: I am a marine
biologist" → "The user is a marine biologist"), a bare line is copied as it stands — which is
how "I am a marine biologist." became the mind's own insight at weight 0.87 when the sources
reached the model without speakers. Then no insight, and no memory at identity weight as the
prompt shows it, states one of the user's facts in the first person.
"""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import numpy as np

from src.config import load_settings
from src.consolidation.deep.deep_pass import ConsolidationParts, run_deep_pass
from src.consolidation.settings import ConsolidationSettings
from src.db.manifest import record_start
from src.mind import build_mind
from src.providers.costs import CostLedger
from src.providers.endpoint_gate import EndpointGates
from src.providers.settings import ProvidersSettings
from src.recall.speakers import SELF, USER, speaker_of
from src.weights.safety import Safety
from tests.consolidation_fakes import ConsolidationModel, language_model
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM

NOW = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)
CONVERSATION = [
    "Hi! My name is Priya Raman, I am a marine biologist.",
    "I live in Lisbon with my partner Tomás.",
    "I work at the Oceanário, studying octopus behaviour at night.",
    "My sister Anika is a pianist in Porto.",
    "My favourite food is grilled sardines.",
    "Do you remember my name, Priya Raman?",
    "What do you remember about me?",
]
#: One of the user's facts stated in the first person: what the mind must never write as its own.
USER_FACT_IN_FIRST_PERSON = re.compile(
    r"\b(?:I am|I'm|my name is|my (?:job|profession|work) is)\b[^.!?]*\b(?:Priya|Raman|marine biolog\w*)"
    r"|\bI live\b[^.!?]*Lisbon|\bmy partner\b[^.!?]*Tomás|\bI work\b[^.!?]*Oceanário"
    r"|\bmy sister\b[^.!?]*Anika|\bmy favourite food\b", re.IGNORECASE)
#: How the scripted consolidation model turns a first-person line about its speaker around.
_TURNED = [(r"^Hi!\s*", ""), (r"\bMy name is\b", "{s}'s name is"), (r"\bmy name is\b", "{s}'s name is"),
           (r"\bI am\b|\bI'm\b", "{s} is"), (r"\bI live\b", "{s} lives"), (r"\bI work\b", "{s} works"),
           (r"\bI have\b", "{s} has"), (r"\bMy\b", "{S}'s"), (r"\bmy\b", "{s}'s")]
_SHOWN = re.compile(r"^\s*\[(\d+)\] (.*)$", re.MULTILINE)
_SAID_BY = re.compile(r"^(The user|[A-Z][\w .'-]{0,40}?) said: (.*)$")


def restate(line: str) -> str | None:
    """What the scripted model writes from one shown line: about the speaker it names, the
    bare text when it names none, nothing for the mind's own lines."""
    if line.startswith(("I said: ", "I thought: ", "I concluded: ", "I corrected myself: ")):
        return None
    said = _SAID_BY.match(line)
    if said is None:
        return line                                   # no speaker shown: copied as it stands
    who, text = said.groups()
    subject = "the user" if who == "The user" else who
    for pattern, replacement in _TURNED:
        text = re.sub(pattern, replacement.format(s=subject, S=subject[:1].upper() + subject[1:]), text)
    return text[:1].upper() + text[1:]


class ReadsSpeakers(ConsolidationModel):
    """Writes insights and merges from the lines it is shown, as `restate` says."""

    def _questions(self, prompt: str) -> dict:
        return {"questions": ["What do we know about the user's life and work?"]}

    def _insights(self, prompt: str) -> dict:
        found = [(int(mid), restate(text)) for mid, text in _SHOWN.findall(prompt)]
        insights = [{"insight": text, "cited_ids": [mid]} for mid, text in found
                    if text and not text.rstrip().endswith("?")]
        return {"insights": insights[:5]}

    def _merge(self, prompt: str) -> dict:
        clusters = re.findall(r"Cluster (\d+):((?:\n  \[\d+\].*)+)", prompt)
        out = []
        for n, body in clusters:
            shown = _SHOWN.findall(body)
            text = next((t for t in (restate(line) for _, line in shown) if t), shown[0][1])
            out.append({"cluster": int(n), "insight": text, "cited_ids": [int(mid) for mid, _ in shown]})
        return {"insights": out}


def _reply(call) -> str:
    said = call.messages[-1].content
    if "name" in said:
        return "Yes: you are Priya Raman, a marine biologist. Confidence: 0.9"
    if said.startswith("What do you remember"):
        return "You study octopuses at the Oceanário and live in Lisbon with Tomás. Confidence: 0.9"
    return "Thank you for telling me, I will remember that. Confidence: 0.9"


def _meta(question: str, schema: type) -> dict:
    if schema.__name__ == "FokAnswer":
        return {"judgement": "KNOWN", "confidence": 0.9}
    if schema.__name__ == "ContradictionAnswer":
        return {"contradicts": False, "summary_a": question.splitlines()[0][13:80]}
    if schema.__name__ == "RelationsAnswer":     # a user's statement and earlier ones (src/gates/updates.py)
        return {"updates": 0, "contradicts": [], "summary_a": question.splitlines()[0][13:80]}
    raise AssertionError(f"unexpected meta call {schema.__name__}")


async def _mind(pool, tmp_path):
    settings = load_settings(tmp_path / "none.yaml", env={}, overrides={
        "gates": {"seed": 1, "exit": {"noise_floor": 0.0}},
        "layers": {"values_path": str(tmp_path / "v.json"), "goals_path": str(tmp_path / "g.json"),
                   "cache_dir": str(tmp_path / "cache")}})
    s1 = ScriptedLLM().say(*[_reply] * 40)
    s1.meta = _meta
    providers = SimpleNamespace(endpoints=EndpointGates(), embedder=HashEmbedder(), reranker=None, system1=s1,
                                system2=ScriptedLLM(configured=False), meta=s1,
                                ledger=CostLedger(pool, session_id="speakers", prices=ProvidersSettings().prices))
    delivered: list[str] = []
    manifest = await record_start(pool, "speakers", "fake-hash-768")
    mind = await build_mind(settings, pool, providers, session_id="speakers", manifest=manifest,
                            deliver=delivered.append, rng=np.random.default_rng(3))
    return mind, s1, delivered


def _mind_voice(memory_type: str, content: str, tag: str, metadata) -> str | None:
    """The words a memory states in the mind's own voice; None when they are someone else's."""
    speaker = speaker_of(tag, metadata)
    return None if speaker is not None and not speaker.mind else content


async def test_the_mind_never_takes_the_users_statements_as_its_own(pool, tmp_path):
    mind, s1, delivered = await _mind(pool, tmp_path)
    for i, line in enumerate(CONVERSATION):
        await mind.loop.submit("user", line, now=NOW + timedelta(minutes=i))
        await mind.loop.cycle(NOW + timedelta(minutes=i, seconds=30))
    assert len(delivered) == len(CONVERSATION)
    await mind.gates.lifecycle.shutdown()                  # the scratch buffer into memories

    # the model saw the user's words as the user's (in full, or the first sentence), never bare
    prompts = [c.messages[-1].context for c in s1.of("generate")]
    assert any("The user said: Hi!" in p for p in prompts), prompts[-1]
    assert not any(re.search(r"\] Hi! My name", p) for p in prompts)

    # every memory from the conversation carries its speaker; the mind's replies went in as its own
    rows = await pool.fetch("SELECT content, source_tag, metadata FROM memories WHERE NOT immutable")
    speakers = {r["content"]: speaker_of(r["source_tag"], r["metadata"]) for r in rows}
    assert speakers[CONVERSATION[0]] == USER and speakers[CONVERSATION[2]] == USER
    assert None not in speakers.values()
    replies = await pool.fetch("SELECT content, source_tag FROM scratch_buffer WHERE source_tag <> 'external_user'")
    assert replies and {speaker_of(r["source_tag"]) for r in replies} == {SELF}

    backend = ReadsSpeakers()
    report = await run_deep_pass(ConsolidationParts(pool, embedder=mind.providers.embedder,
                                                    llm=language_model(backend, pool), safety=Safety(),
                                                    settings=ConsolidationSettings()),
                                 trigger="manual", now=NOW + timedelta(hours=1), rng=random.Random(7))
    assert report is not None and "insights" in backend.kinds()
    insight_prompt = next(r.messages[0].content for r in backend.requests if backend.kind_of(r) == "insights")
    assert "The user said: " in insight_prompt and "third person" in insight_prompt

    insights = await pool.fetch("""SELECT content, source_tag, metadata, memory_type FROM memories
                                    WHERE memory_type = 'reflection'""")
    written = [r["content"] for r in insights]
    assert any(re.search(r"\bthe user (?:is|lives|works)\b", t, re.IGNORECASE) for t in written), written
    for r in insights:
        voice = _mind_voice(r["memory_type"], r["content"], r["source_tag"], r["metadata"])
        assert voice is None or not USER_FACT_IN_FIRST_PERSON.search(voice), r["content"]

    # every memory at identity weight, as the prompt shows it: the user's facts are the user's
    await pool.execute("UPDATE memories SET depth_weight_alpha = 50, depth_weight_beta = 2 WHERE NOT immutable")
    assembled = await mind.loop.parts.assembler.assemble(None, rng=np.random.default_rng(1), now=NOW + timedelta(hours=2),
                                              refresh_identity=True)
    lines = assembled.identity.text.splitlines()[1:]
    assert any(line.startswith("- [episodic] The user said: ") for line in lines), lines
    for line in lines:
        shown = line.split("] ", 1)[-1]
        if _SAID_BY.match(shown) and not shown.startswith("I "):
            continue                                       # someone else's words, said to be theirs
        assert not USER_FACT_IN_FIRST_PERSON.search(shown), line
