"""What the deep pass asks a model (plan §4.2, §4.4, §4.6), one question per phase.

Every call is an isolated meta-context call (no identity, no history: the question,
`META_SYSTEM` and the answer's schema, src/providers/prompts.py) answered as JSON that
matches the schema beside its question here; the schemas' field descriptions are part
of what the model reads. The `*_CHARS` constants say how much of each memory a question
shows. The phases (merge.py, insights.py, narrative.py, recompress.py, contextual.py,
reconsolidation.py, tension.py) hold what is done with the answers.

Who said what (issue 27). Every memory a question shows carries its speaker in words
(`_source_line`, src/recall/speakers.py): "[12] The user said: I am a marine biologist",
"[14] I said: …", "[15] Priya said: …"; and the questions that write the mind's memories
(insights, merges) ask for the user's facts in the third person ("The user is a marine
biologist") and for "I" only where the agent's own words or acts are the evidence.
Shown raw, a small model wrote the user's "I am a marine biologist" as the mind's own
insight. A phase passes a memory's speaker as `source_tag` and `metadata` (a row or a
search hit), or a cluster's `speakers`; a memory with neither is shown as it is.

When it was said (issue 37 item 5). An insights question shows each statement's date
(src/recall/when.py, against the pass's `now`), and a statement a newer one updated
(`memory_supersedes` via 'update', sql/153) as earlier: "[12] earlier, until 20 Nov 2026,
since updated by [15]: The user said: I live in Porto (Tue 3 Mar 2026, 8 months ago)". It
stays in the evidence (an insight about the change cites both), marked so the model does not
state it as current (`EARLIER`); re-evaluation shows a source an update superseded the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from src.recall.speakers import Speaker, attributed, speaker_of
from src.recall.when import memory_time, said_when, the_date
from src.text import excerpt

#: How the mind's memories speak of people: the user in the third person, "I" only for the
#: agent itself (the questions that write memories end with it).
VOICE = ("Each memory names who said it. Write about the user in the third person (\"The user …\"), "
         "never in the user's own words as if they were yours; write \"I\" only for what the agent "
         "itself said, thought or did.")


#: What a statement marked earlier means, for the questions that show one.
EARLIER = ("A statement marked \"earlier, until <date>\" was updated by a newer statement then: it held "
           "until that date and is no longer current. Never state it as current: rest on the newer "
           "statement, or say it in the past (\"until November 2026 the user lived in Porto\").")


def _until(at: datetime) -> str:
    """The mark of a statement a newer one updated when it was said at `at`."""
    return f"earlier, until {the_date(at)}"


def _speaker_from(item: Any) -> Speaker | None:
    """The speaker of a memory as a phase passes it: a row or mapping (`source_tag`,
    `metadata`), an object with those attributes (a search hit), or None."""
    if isinstance(item, Mapping) or hasattr(item, "get"):
        return speaker_of(item.get("source_tag"), item.get("metadata"))
    return speaker_of(getattr(item, "source_tag", None), getattr(item, "metadata", None))


def _source_line(mid: int, text: str, speaker: Speaker | None, chars: int) -> str:
    """One memory as a question shows it: `[id] The user said: <text cut to chars>`."""
    return f"[{mid}] {attributed(excerpt(text, chars), speaker)}"

# --- merge (§4.2): one insight per cluster of near-duplicates ------------------------------

#: Characters of each member a merge question shows (merge.validate_merge checks against them).
MERGE_ITEM_CHARS = 600


class MergedInsight(BaseModel):
    cluster: int = Field(description="the cluster number as given")
    insight: str = Field(description="one sentence that states what the memories have in common, generalised")
    cited_ids: list[int] = Field(description="the memory ids (from that cluster) the insight rests on")


class MergeAnswer(BaseModel):
    insights: list[MergedInsight]


class ShownCluster(Protocol):
    """What a merge question shows of a cluster (merge.Cluster); its members' speakers, when
    it has them, as `speakers` (one per text, src/recall/speakers.py)."""

    @property
    def index(self) -> int: ...
    @property
    def ids(self) -> list[int]: ...
    @property
    def texts(self) -> list[str]: ...


def merge_question(clusters: Sequence[ShownCluster]) -> str:
    parts = ["Each cluster below holds memories that say nearly the same thing. For every cluster, "
             "write one insight: a single sentence that states what they have in common, generalised "
             "beyond any one occasion, keeping every name and number its memories state. Cite the "
             "memory ids it rests on (only ids from that cluster). " + VOICE]
    for c in clusters:
        speakers = getattr(c, "speakers", None) or [None] * len(c.ids)
        parts.append(f"Cluster {c.index}:")
        parts += ["  " + _source_line(mid, t, who, MERGE_ITEM_CHARS)
                  for mid, t, who in zip(c.ids, c.texts, speakers, strict=True)]
    return "\n".join(parts)


# --- questions and insights (§4.2, the two-phase reflection) --------------------------------

INSIGHT_ITEM_CHARS = 400


class Questions(BaseModel):
    questions: list[str] = Field(description="the most salient high-level questions, most salient first")


class Insight(BaseModel):
    insight: str = Field(description="one high-level insight, one sentence")
    cited_ids: list[int] = Field(description="ids of the statements the insight rests on")


class Insights(BaseModel):
    insights: list[Insight]


class Statement(Protocol):
    """A piece of evidence an insights question shows (a search hit: its `source_tag` and
    `metadata` name the speaker; its `event_time` and `created_at` when it was said; its
    `superseded_by` and `superseded_at` the newer statement that updated it, and when)."""

    @property
    def id(self) -> int: ...
    @property
    def content(self) -> str: ...


def _statement(item: Any, mid: int, text: str) -> str:
    return _source_line(mid, text, _speaker_from(item), INSIGHT_ITEM_CHARS)


def _evidence_line(item: Any, shown: set[int], now: datetime | None) -> str:
    """One statement of an insights question: marked earlier when a newer one updated it
    (naming the newer when it is shown too), dated when the pass's `now` is given."""
    line = _statement(item, item.id, item.content)
    newer, until = getattr(item, "superseded_by", None), getattr(item, "superseded_at", None)
    if until is not None:
        named = f", since updated by [{newer}]" if newer in shown else ""
        head = f"[{item.id}] "
        line = f"{head}{_until(until)}{named}: {line[len(head):]}"
    when = said_when(memory_time(getattr(item, "event_time", None), getattr(item, "created_at", None)),
                     now) if now is not None else ""
    return f"{line} ({when})" if when else line


def questions_prompt(memories: Sequence[Mapping[str, Any]], themes: Sequence[str], n: int) -> str:
    """Phase 1: the recent memories (`id`, `content`, and `source_tag` / `metadata` for the
    speaker; newest first) and themes → `n` questions."""
    lines = [_statement(m, m["id"], m["content"]) for m in reversed(memories)]   # oldest first
    theme_part = ("\nThemes noticed recently: " + "; ".join(themes)) if themes else ""
    return ("Statements, oldest first, each with who said it:\n" + "\n".join(lines) + theme_part
            + f"\n\nGiven only the statements above, what are the {n} most salient high-level "
              "questions we can answer about the user and about me? Ask about the user as \"the user\" "
              "and about anyone else by their name.")


def insights_prompt(question: str, evidence: Sequence[Statement], n: int, now: datetime | None = None) -> str:
    """Phase 2: one question and its evidence → `n` cited insights. With the pass's `now`,
    each statement says when it was said; a statement a newer one updated is marked earlier."""
    shown = {h.id for h in evidence}
    lines = [_evidence_line(h, shown, now) for h in evidence]
    earlier = any(getattr(h, "superseded_at", None) is not None for h in evidence)
    dated = "Each statement says when it was said. " if now is not None else ""
    return (f"Question: {question}\nStatements:\n" + "\n".join(lines)
            + f"\n\nWhat {n} high-level insights can you infer from the statements above that answer "
              "the question? For each, cite the ids of the statements it rests on (only ids shown above). "
            + dated + (f"{EARLIER} " if earlier else "") + VOICE)


# --- narrative synthesis (§4.2) -------------------------------------------------------------

NARRATIVE_ITEM_CHARS = 300


class Narrative(BaseModel):
    insight_id: int = Field(description="the id of the insight this narrative explains")
    narrative: str = Field(description="one or two sentences, first person: 'I came to ... because ...'")


class Narratives(BaseModel):
    narratives: list[Narrative]


NARRATIVE_INSTRUCTION = (
    "For each insight below, write a brief causal narrative in the first person that explains "
    "how the experiences led to it: \"I came to value X because of experiences Y and Z.\" "
    "One or two sentences each; use only what the experiences say. " + VOICE)


def _itemised(instruction: str, blocks: Iterable[Sequence[str]]) -> str:
    """The instruction, then each item's lines (its heading first), one text."""
    return "\n".join([instruction, *(line for block in blocks for line in block)])


def _said(entry: str | Mapping[str, Any], cut: int) -> str:
    """A memory's text cut to `cut`, with its speaker when `entry` is a row (`content`,
    `source_tag`, `metadata`) rather than bare text."""
    if isinstance(entry, str):
        return excerpt(entry, cut)
    return attributed(excerpt(entry["content"], cut), _speaker_from(entry))


def narrative_prompt(items: Sequence[Mapping[str, Any]]) -> str:
    """Each insight (`id`, `content`) with the experiences (`sources`: texts, or rows that name
    their speaker) it was merged from."""
    cut = NARRATIVE_ITEM_CHARS
    return _itemised(NARRATIVE_INSTRUCTION, (
        [f"Insight [{it['id']}]: {_said(it, cut)}",
         *(f"  experience: {_said(t, cut)}" for t in it["sources"])] for it in items))


# --- re-compression (§4.2) ------------------------------------------------------------------

RECOMPRESS_ITEM_CHARS = 400


class Compressed(BaseModel):
    id: int
    compressed: str = Field(description="one line of at most 15 words, general enough to serve any context")


class Recompressed(BaseModel):
    items: list[Compressed]


RECOMPRESS_INSTRUCTION = (
    "Rewrite the one-line summary of each memory below, in the voice of whoever said it (the line "
    "stands for what they said). Use the related memories to make the line general (what it says "
    "about its speaker or subject), not tied to one conversation. At most 15 words per line.")


def recompress_prompt(items: Sequence[Mapping[str, Any]]) -> str:
    """Each memory (`id`, `content`, and `source_tag` / `metadata` for its speaker) with its
    gate-time line (`compressed`) and `related` texts (or rows that name their speaker)."""
    cut = RECOMPRESS_ITEM_CHARS
    return _itemised(RECOMPRESS_INSTRUCTION, (
        [f"Memory [{it['id']}]: {_said(it, cut)}", f"  current summary: {it['compressed']}",
         *(f"  related: {_said(t, cut)}" for t in it["related"])] for it in items))


# --- contextual retrieval (§4.6) ------------------------------------------------------------

class MemoryContext(BaseModel):
    id: int
    context: str = Field(description="one or two sentences: who, when, why")


class ContextBatch(BaseModel):
    contexts: list[MemoryContext]


def context_prompt(rows: Sequence[Mapping[str, Any]], memory_chars: int) -> str:
    """One prompt for a batch: each memory (`id`, `memory_type`, `source_tag`, `created_at`,
    `content`) with its session (`before`: the texts stored just before it), tagged by id."""
    parts = []
    for r in rows:
        session = "\n".join(f"- {t}" for t in r["before"]) or "(nothing before it)"
        parts.append(f"<session>\n{session}\n</session>\n<memory id=\"{r['id']}\" type=\"{r['memory_type']}\" "
                     f"source=\"{r['source_tag']}\" stored=\"{r['created_at']:%Y-%m-%d %H:%M}\">\n"
                     f"{r['content'][:memory_chars]}\n</memory>")
    return ("You add retrieval context to an agent's memories; be brief and factual, never invent.\n\n"
            + "\n\n".join(parts) + "\n\nFor each memory above, give a short context (WHO, WHEN, WHY) that "
            "situates it within its session, to improve search retrieval of the memory. "
            "Answer with one entry per memory id.")


# --- reconsolidation (§4.4) -----------------------------------------------------------------

#: Characters of an insight and of each memory a reconsolidation question shows.
RECONSOLIDATION_TEXT_CHARS = 800


class ConflictAnswer(BaseModel):
    verdict: Literal["update", "productive_contradiction", "no_conflict"]
    insight: str = Field("", description="the updated insight, one or two sentences, when verdict is update")
    explanation: str = Field(description="one sentence: why")


class ReevaluationAnswer(BaseModel):
    verdict: Literal["keep", "revise"]
    insight: str = Field("", description="the revised insight, one or two sentences, when verdict is revise")
    explanation: str = Field(description="one sentence: why")


def conflict_prompt(insight: str, memory: str, speaker: Speaker | None = None) -> str:
    """A live insight and a new memory that may contradict it (with its speaker, when known)."""
    chars = RECONSOLIDATION_TEXT_CHARS
    new = attributed(memory[:chars], speaker)
    return ("You maintain an agent's long-term memory; insights are general statements distilled "
            f"from its experiences.\n\nStored insight:\n{insight[:chars]}\n\nNew information:\n{new}\n\n"
            "The new information may contradict the insight. Answer `update` with a rewritten insight "
            "that accounts for both, `productive_contradiction` if both should stand side by side as a "
            "real tension, or `no_conflict` if they do not contradict.")


def reevaluation_prompt(insight: str, sources: Sequence[tuple[Any, ...]]) -> str:
    """An insight and its sources as (text, current center, superseded[, update]) after they
    changed; `update`, when a newer statement updated the source, is (the newer text, when it
    was said), else None: the source is shown as earlier, held until then (issue 37 item 5)."""
    lines, any_earlier = [], False
    for text, center, gone, *rest in sources:
        update = rest[0] if rest else None
        marks = [f"weight {center:.2f}"] + (["superseded"] if gone else [])
        if update is not None:
            any_earlier = True
            marks.append(f"{_until(update[1])}, since updated: \"{excerpt(update[0], RECONSOLIDATION_TEXT_CHARS)}\"")
        lines.append(f"- ({'; '.join(marks)}) {text}")
    return ("You maintain an agent's long-term memory; insights are general statements distilled "
            f"from its experiences.\n\nInsight:\n{insight[:RECONSOLIDATION_TEXT_CHARS]}\n\n"
            "The memories it was drawn from, as they stand now:\n"
            + "\n".join(lines)
            + "\n\nSome of them changed since the insight was formed. Answer `keep` if it still holds, "
              "or `revise` with a corrected insight." + (f" {EARLIER}" if any_earlier else ""))


# --- behavioural contradiction (§4.2) -------------------------------------------------------

#: Characters of the value and of each behaviour a tension question shows (and of the value
#: quoted in a tension memory).
TENSION_ITEM_CHARS = 300


class TensionAnswer(BaseModel):
    contradicts: bool = Field(description="true if any example contradicts the value")
    contradicting_ids: list[int] = Field(default_factory=list, description="ids of the contradicting examples")
    aligned_ids: list[int] = Field(default_factory=list, description="ids of examples that act on the value")
    explanation: str = Field("", description="one sentence: how the behaviour contradicts the value")


def tension_question(value: str, behaviours: Sequence[Mapping[str, Any]]) -> str:
    """A held value and the mind's recent behaviour (`id`, `content`)."""
    lines = [f"[{b['id']}] {excerpt(b['content'], TENSION_ITEM_CHARS)}" for b in behaviours]
    return (f"The agent claims to value: {excerpt(value, TENSION_ITEM_CHARS)}\n"
            "Here are recent behavioural examples:\n" + "\n".join(lines)
            + "\nDo any contradict this value? Give the ids of contradicting examples, the ids of "
              "examples that act in line with it, and one sentence on the contradiction if there is one.")
