"""What an insight may rest on (issue 27): consolidation cannot launder weight.

Run against a real small model, consolidation wrote "I am a marine biologist." at an
identity-level center and a copy of a safety boundary at 0.98: an insight started at the
mean Beta of what it cited, boundaries (Beta(50, 1)) included, and citations were only
checked to exist. The rules, in the order `screen` applies them:

- **An insight states something.** A question ("What do you remember about me?") or a
  line with no content word is not an insight: the user-line classifier
  (src/gates/utterance.py) must call it a statement. Merge keeps questions out of its
  clusters and refuses a merged text that is one (merge.py).
- **The user's facts rest on the user's words** (issue 38 item 6). An insight that speaks of
  "the user" cites at least one of the user's statements (or an earlier conclusion about the
  user): a small model called an imported stranger's hobby the user's. And it joins no two
  imported conversations: "Jolene and Caroline are adorable together" joined two people who
  never met (evidence.py says what a conversation is).
- **It does not copy what it cites.** An insight whose content words match a cited
  memory's at Jaccard ≥ `deep.insight_copy_overlap` (0.8, the merge's near-duplicate
  share) restates that memory and adds nothing (a boundary copied as an "insight").
- **A boundary is cited only when it is the subject.** A boundary or seed (`is_seed`)
  cited by an insight must share at least `deep.boundary_subject_overlap` (0.25) of its
  content words with it (Jaccard, consolidation's word list in clustering.py): "My
  profession is marine biology." citing "I do not deceive my guardian…" shares none.
- **Every citation is relevant.** The cosine of the insight and each memory it cites, on
  CLUSTERING vectors (no type prefix), is at least `thresholds.<embed model>.
  insight_citation` (wordllama 0.1, measured: notes.md); otherwise the model cited
  evidence the insight does not rest on, and the insight is dropped.

A refused insight is logged and counted (`refused_<reason>`), never stored.

The prior (`evidence_prior`): a derived memory starts at the mean Beta of the memories
it rests on, leaving out boundaries and seeds (their Beta(50, 1) says the guardian fixed
them, not that anything learned them); with nothing else, at the blank slate Beta(1, 4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from src.consolidation.clustering import content_words
from src.consolidation.deep.evidence import conversations, is_users, speaker, speaks_of_user
from src.gates.utterance import classify
from src.providers.protocols import Embedder
from src.recall.speakers import SELF, claims_as_own, speaker_of
from src.vectors import unit_rows

#: The blank-slate Beta of a new memory (sql/001: Beta(1, 4), center 0.2).
BLANK_PRIOR = (1.0, 4.0)
#: Source tags of what the mind was born with rather than learned (src/bootstrap/seeding.py
#: writes the safety boundaries as 'bootstrap_seed', immutable).
SEED_TAGS = frozenset({"bootstrap_seed"})

Row = Mapping[str, Any]


def is_seed(row: Row) -> bool:
    """A boundary or identity seed: immutable, or written by bootstrap seeding."""
    return bool(row.get("immutable")) or row.get("source_tag") in SEED_TAGS


def evidence_prior(rows: Sequence[Row]) -> tuple[float, float]:
    """(alpha, beta) of a memory derived from `rows`: their mean, seeds left out; else Beta(1, 4)."""
    evidence = [r for r in rows if not is_seed(r)]
    if not evidence:
        return BLANK_PRIOR
    return float(np.mean([r["alpha"] for r in evidence])), float(np.mean([r["beta"] for r in evidence]))


def states_something(text: str) -> bool:
    """True when `text` is a statement (not a question, not chatter) by the user-line classifier."""
    return classify(text).kind == "statement"


def is_question(text: str) -> bool:
    """A question by the classifier, or one with no content word ("What do you remember
    about me?" is chatter to it: nothing in it is worth keeping) that ends in "?"."""
    kind = classify(text).kind
    return kind == "question" or (kind == "chatter" and text.rstrip().endswith("?"))


def word_overlap(a: str, b: str) -> float:
    """Jaccard of the content words of two texts (clustering.content_words)."""
    wa, wb = content_words(a), content_words(b)
    return len(wa & wb) / len(wa | wb) if wa | wb else 0.0


@dataclass(frozen=True)
class Refusal:
    """Why an insight is not stored: `reason` is the count's name, `detail` the log's words."""

    reason: str
    detail: str


def refuse_by_words(text: str, cited: Sequence[Row], *, copy_overlap: float,
                    subject_overlap: float) -> Refusal | None:
    """The rules that read words only: a statement, no copy, a boundary only as its subject."""
    if not states_something(text):
        if is_question(text):
            return Refusal("question", "it is a question, not a statement")
        return Refusal("chatter", "it states nothing (no content word)")
    # a boundary or identity seed is the mind's own word: "I …" resting on one is not the user's fact
    if claims_as_own(text, [SELF if is_seed(r) else speaker_of(r.get("source_tag"), r.get("metadata")) for r in cited]):
        return Refusal("first_person", "it states in the first person what only the user (or another person) said")
    if speaks_of_user(text) and cited and not any(is_users(r) or _concluded_of_user(r) for r in cited):
        return Refusal("not_the_users", "it speaks of the user and cites none of the user's statements")
    if len(joined := conversations(cited)) > 1:
        return Refusal("strangers", f"it joins the lines of {len(joined)} imported conversations")
    for row in cited:
        overlap = word_overlap(text, row["content"])
        if overlap >= copy_overlap:
            return Refusal("copy", f"it restates memory #{row['id']} (content words {overlap:.2f})")
        if is_seed(row) and overlap < subject_overlap:
            return Refusal("boundary", f"it cites boundary #{row['id']}, which is not its subject "
                                       f"(content words {overlap:.2f} < {subject_overlap})")
    return None


def _concluded_of_user(row: Row) -> bool:
    """An earlier conclusion about the user (an insight held to the same rule when it was written)."""
    who = speaker(row)
    return who is not None and who.kind == "conclusion" and speaks_of_user(row["content"])


async def citation_cosines(embedder: Embedder, text: str, cited: Sequence[str]) -> np.ndarray:
    """Cosine of `text` with each cited text, on CLUSTERING vectors (one embedding call)."""
    if not cited:
        return np.zeros(0, dtype=np.float32)
    vectors = unit_rows(np.asarray(await embedder.embed([text, *cited], "CLUSTERING"), dtype=np.float32))
    return vectors[1:] @ vectors[0]


async def screen(embedder: Embedder, text: str, cited: Sequence[Row], *, citation_floor: float,
                 copy_overlap: float, subject_overlap: float) -> Refusal | None:
    """None when the insight `text` may be stored with `cited` as its evidence; else why not.

    An embedder failure propagates: relevance cannot be judged, so the phase fails and
    its pass resumes later from the saved answer.
    """
    refusal = refuse_by_words(text, cited, copy_overlap=copy_overlap, subject_overlap=subject_overlap)
    if refusal is not None:
        return refusal
    cosines = await citation_cosines(embedder, text, [r["content"] for r in cited])
    low = [(r["id"], float(c)) for r, c in zip(cited, cosines, strict=True) if c < citation_floor]
    if low:
        said = ", ".join(f"#{i} at {c:.2f}" for i, c in low)
        return Refusal("irrelevant", f"citation(s) below the floor {citation_floor}: {said}")
    return None
