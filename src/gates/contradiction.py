"""Does a new item contradict a stored memory? Three layers, cheapest first (plan §2.8).

1. Negation heuristic (~0 ms): the two texts say the same content words and differ
   in negation parity ("I love coffee" / "I do not love coffee"), or differ in
   exactly one word that is the other with a negating prefix ("likes" /
   "dislikes", "happy" / "unhappy", "possible" / "impossible"). Conclusive only
   for YES: no such difference proves nothing ("love" / "hate").
2. Embedding opposition (~µs): how much the step from a to b points along a
   learned negation direction, |cos(b - a, d)|. The direction d is the normalised
   mean of embed(negation) - embed(statement) over `NEGATION_PAIRS`, learned once
   per embed model and pair list and cached in the `negation_directions` table (so
   every process and restart shares it, and an operator can see it). The cosine,
   not the raw projection |(b - a) . d|: two merely related statements differ by a
   long step in a random direction whose raw projection is as large as a negation's
   (the raw projection flagged far more related, non-contradicting pairs than the
   cosine: notes.md). The decision band is calibrated at learning
   time from leave-one-out values of the negation pairs and the values of the
   confirming and related pairs ("not opposed"): a conclusive YES above
   max(q90 of not opposed, midpoint of that and q10 of negation), a conclusive NO
   below min(q10 of negation, median of not opposed), undecided between. The NO
   side is deliberately strict: a contradiction judged "not opposed" at high
   similarity would *reinforce* the memory it contradicts, the worst error here,
   while an undecided pair costs one micro-call (or, in reflex mode, is kept as a
   novel memory).
3. LLM micro-call (~100 ms): an isolated meta-context call ("Does A contradict B?",
   src/gates/prompts.py) only for pairs the first two left inconclusive. The same call returns the
   one-line `compressed` summary of A, so the gate never makes an extra call for it.
   In reflex mode the layer is skipped and logged; the pair stays undecided. For a user's
   statement one call asks about the earlier statements of theirs the gate weighs,
   and also tells an update from a contradiction (`ask_relations`, src/gates/updates.py).

Only statements are judged (issue 27): a question or chatter (src/gates/utterance.py)
states nothing that could contradict anything, so a pair with one is "not opposed"
(layer `not_statement`) before any layer runs. Judged anyway, a small model said "What do
you remember about me?" contradicts a stated fact; the question was stored flagged as a
contradiction, and every turn that recalled it went to System 2.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import asyncpg
import numpy as np

from src.errors import ProviderError, ProviderSkipped
from src.gates.negation_pairs import (
    CONFIRMING_PAIRS,
    NEGATION_PAIRS,
    RELATED_PAIRS,
    pairs_sha256,
)
from src.gates.prompts import (
    ContradictionAnswer,
    RelationsAnswer,
    contradiction_question,
    relations_question,
)
from src.gates.utterance import classify
from src.providers.embedding import embed_memories
from src.providers.protocols import Embedder, LanguageModel
from src.vectors import unit

log = logging.getLogger(__name__)

NEGATION_WORDS = frozenset({"not", "no", "never", "none", "nobody", "nothing", "neither",
                            "nor", "nowhere", "cannot"})
_AUXILIARIES = frozenset({"do", "does", "did", "is", "are", "was", "were", "am", "be", "been",
                          "will", "would", "can", "could", "should", "shall", "may", "might",
                          "must", "have", "has", "had"})
_STOPWORDS = frozenset({"a", "an", "the", "to", "of", "and", "or", "in", "on", "at", "for",
                        "with", "it", "that", "this", "really", "very", "all"})
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_NEGATING_PREFIXES = ("dis", "un", "in", "im", "ir", "il", "non")
#: Share of content words two texts must have in common for a parity difference to count.
HEURISTIC_OVERLAP = 0.5
#: Steps shorter than this are "the same statement": the stored copy of a vector is
#: rounded to half precision (about 1e-3 off), and the direction of such a rounding
#: step is noise whose cosine with anything is meaningless.
MIN_STEP = 0.02
LEARN_AS_TYPE = "episodic"


def _is_negation(token: str) -> bool:
    return token in NEGATION_WORDS or token.endswith("n't")


def has_negation(text: str) -> bool:
    """Whether `text` contains a negation word or an n't contraction."""
    return any(map(_is_negation, _TOKEN.findall(text.lower())))


def _stem(token: str) -> str:
    token = token.removesuffix("'s")
    return token[:-1] if len(token) > 3 and token.endswith("s") and not token.endswith("ss") else token


def _affix_negated(x: str, y: str) -> bool:
    return any(x == p + y or y == p + x for p in _NEGATING_PREFIXES)


def negation_heuristic(a: str, b: str) -> bool | None:
    """Layer 1: True when the texts share their content words and differ in negation
    parity, or differ only in one word and its prefix-negated form.

    None means "no evidence either way" (the next layer decides).
    """
    ta, tb = _TOKEN.findall(a.lower()), _TOKEN.findall(b.lower())
    skip = _AUXILIARIES | _STOPWORDS

    def content(tokens: list[str]) -> set[str]:
        return {_stem(t) for t in tokens if not _is_negation(t) and t not in skip}

    ca, cb = content(ta), content(tb)
    if not ca or not cb:
        return None
    if sum(map(_is_negation, ta)) % 2 != sum(map(_is_negation, tb)) % 2:
        return True if len(ca & cb) / len(ca | cb) >= HEURISTIC_OVERLAP else None
    only_a, only_b = ca - cb, cb - ca
    if len(only_a) == len(only_b) == 1 and _affix_negated(next(iter(only_a)), next(iter(only_b))):
        return True
    return None


@dataclass(frozen=True)
class NegationDirection:
    """The learned direction of one embed model and its calibrated decision band."""

    embed_model: str
    direction: np.ndarray
    no_below: float
    yes_above: float
    n_pairs: int
    details: dict = field(default_factory=dict)

    def opposition(self, a: np.ndarray, b: np.ndarray) -> float:
        """|cos(b - a, d)|: how much the step from a to b points along the negation
        direction (either way); 0.0 when the step is shorter than MIN_STEP."""
        return _step_cosines(np.atleast_2d(a), np.atleast_2d(b), self.direction)[0]

    def judge(self, opposition: float, no_below: float | None = None,
              yes_above: float | None = None) -> bool | None:
        """Layer 2's verdict: True / False when conclusive, None inside the band."""
        lo = self.no_below if no_below is None else no_below
        hi = self.yes_above if yes_above is None else yes_above
        if opposition < lo:
            return False
        return True if opposition >= hi else None


def _step_cosines(a: np.ndarray, b: np.ndarray, direction: np.ndarray) -> list[float]:
    steps = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    norms = np.linalg.norm(steps, axis=1)
    dots = np.abs(steps @ np.asarray(direction, dtype=np.float64))
    return [float(d / n) if n >= MIN_STEP else 0.0 for d, n in zip(dots, norms, strict=True)]


def calibrate(neg_a: np.ndarray, neg_b: np.ndarray, other_a: np.ndarray,
              other_b: np.ndarray) -> tuple[np.ndarray, float, float, dict]:
    """Direction and band from embedded pairs (rows); pure, so it can be tested alone.

    `neg_*` are the negation pairs, `other_*` the pairs that are not opposed
    (confirming and related).
    """
    diffs = neg_b.astype(np.float64) - neg_a.astype(np.float64)
    total = diffs.sum(axis=0)
    direction = unit(total / len(diffs))
    # leave-one-out: each negation pair is measured on the direction learned without it
    loo = np.array([_step_cosines(neg_a[i:i + 1], neg_b[i:i + 1], unit(total - diffs[i]))[0]
                    for i in range(len(diffs))])
    other = np.array(_step_cosines(other_a, other_b, direction))
    q10 = float(np.quantile(loo, 0.10))
    q50, q90 = (float(x) for x in np.quantile(other, [0.50, 0.90]))
    no_below = min(q10, q50)
    yes_above = max(q90, (q10 + q90) / 2.0, no_below)
    details = {"q10_negation_loo": q10, "q50_not_opposed": q50, "q90_not_opposed": q90,
               "separated": q10 > q90,
               "negation_loo": [round(float(x), 4) for x in loo],
               "not_opposed": [round(float(x), 4) for x in other]}
    return direction.astype(np.float32), no_below, yes_above, details


async def learn_direction(embedder: Embedder) -> NegationDirection:
    """Embed the fixed pairs (as stored memories are embedded) and calibrate."""
    pairs = NEGATION_PAIRS + CONFIRMING_PAIRS + RELATED_PAIRS
    texts = [s for pair in pairs for s in pair]
    vecs = await embed_memories(embedder, texts, [LEARN_AS_TYPE] * len(texts))
    n = len(NEGATION_PAIRS)
    neg, other = vecs[: 2 * n], vecs[2 * n:]
    direction, lo, hi, details = calibrate(neg[0::2], neg[1::2], other[0::2], other[1::2])
    log.info("learned the negation direction of %s from %d pairs: no below %.4f, yes above %.4f "
             "(separated: %s)", embedder.model_name, n, lo, hi, details["separated"])
    return NegationDirection(embedder.model_name, direction, lo, hi, n, details)


_LOAD = """SELECT direction, no_below, yes_above, n_pairs, details FROM negation_directions
            WHERE embed_model = $1 AND pairs_sha256 = $2"""
_SAVE = """INSERT INTO negation_directions (embed_model, pairs_sha256, direction, no_below,
                                            yes_above, n_pairs, details)
           VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)
           ON CONFLICT (embed_model, pairs_sha256) DO NOTHING"""


async def load_or_learn(pool: asyncpg.Pool | asyncpg.Connection,
                        embedder: Embedder) -> NegationDirection:
    """The cached direction of this embedder's model, learning and saving it on first use."""
    key = pairs_sha256()
    row = await pool.fetchrow(_LOAD, embedder.model_name, key)
    if row is None:
        learned = await learn_direction(embedder)
        await pool.execute(_SAVE, embedder.model_name, key, learned.direction, learned.no_below,
                           learned.yes_above, learned.n_pairs, json.dumps(learned.details))
        row = await pool.fetchrow(_LOAD, embedder.model_name, key)
    direction = np.asarray(row["direction"].to_numpy(), dtype=np.float32)
    return NegationDirection(embedder.model_name, direction, row["no_below"], row["yes_above"],
                             row["n_pairs"], json.loads(row["details"]))


@dataclass(frozen=True)
class Verdict:
    """One pair's outcome: `contradicts` None = undecided; `layer` says who decided."""

    contradicts: bool | None
    layer: str                  # not_statement | negation | embedding | llm | llm_skipped | llm_failed
    opposition: float | None = None
    summary: str | None = None


def not_a_statement(a_text: str, b_text: str) -> str | None:
    """What one of the two is when it is not a statement ("question", "chatter"), else None."""
    for text in (a_text, b_text):
        kind = classify(text).kind
        if kind != "statement":
            return kind
    return None


def screen(a_text: str, a_vec: np.ndarray, b_text: str, b_vec: np.ndarray,
           direction: NegationDirection | None, no_below: float | None = None,
           yes_above: float | None = None) -> Verdict:
    """Statements only, then layers 1 and 2 (no I/O). `contradicts` None: ask layer 3."""
    opposition = None if direction is None else direction.opposition(a_vec, b_vec)
    if not_a_statement(a_text, b_text):
        return Verdict(False, "not_statement", opposition)
    if negation_heuristic(a_text, b_text):
        return Verdict(True, "negation", opposition)
    if direction is None:
        return Verdict(None, "embedding", None)
    return Verdict(direction.judge(opposition, no_below, yes_above), "embedding", opposition)


async def ask_llm(llm: LanguageModel, a_text: str, b_text: str,
                  opposition: float | None) -> Verdict:
    """Layer 3 (for pairs `screen` left undecided: statements both). Reflex mode and
    provider failures leave the pair undecided, logged."""
    if not llm.configured:
        log.info("contradiction layer 3 skipped: no language model is configured")
        return Verdict(None, "llm_skipped", opposition)
    try:
        answer = await llm.meta_call_structured(contradiction_question(a_text, b_text),
                                                ContradictionAnswer, purpose="gate_contradiction",
                                                max_tokens=120)
    except ProviderSkipped as exc:
        log.info("contradiction layer 3 skipped: %s", exc)
        return Verdict(None, "llm_skipped", opposition)
    except ProviderError as exc:
        log.warning("contradiction layer 3 failed, the pair stays undecided: %s", exc)
        return Verdict(None, "llm_failed", opposition)
    summary = " ".join(answer.value.summary_a.split()) or None
    return Verdict(answer.value.contradicts, "llm", opposition, summary)


@dataclass(frozen=True)
class Relations:
    """Layer 3's answer about a user's new statement and earlier ones of theirs: for each
    earlier statement "update", "contradiction" or "neither" (None: no model answered), who
    answered (`layer`: llm | llm_skipped | llm_failed), A as one line and what A is about
    ("my car": the user's earlier statements near it are asked about next, src/gates/model_questions.py)."""

    relations: tuple[str | None, ...]
    layer: str
    summary: str | None = None
    about: str | None = None


async def ask_relations(llm: LanguageModel, a_text: str, b_texts: Sequence[str]) -> Relations:
    """Layer 3 for a user's new statement A and earlier ones B1..Bn of theirs, in one call:
    which one A updates (at most one) and which it contradicts. An update is no contradiction.
    Reflex mode and failures answer nothing, as `ask_llm` leaves a pair undecided."""
    unanswered = (None,) * len(b_texts)
    if not llm.configured:
        log.info("contradiction layer 3 skipped: no language model is configured")
        return Relations(unanswered, "llm_skipped")
    try:
        answer = await llm.meta_call_structured(relations_question(a_text, b_texts), RelationsAnswer,
                                                purpose="gate_contradiction", max_tokens=200)
    except ProviderSkipped as exc:
        log.info("contradiction layer 3 skipped: %s", exc)
        return Relations(unanswered, "llm_skipped")
    except ProviderError as exc:
        log.warning("contradiction layer 3 failed, the pairs stay undecided: %s", exc)
        return Relations(unanswered, "llm_failed")
    said = ["contradiction" if k in answer.value.contradicts else "neither" for k in range(1, len(b_texts) + 1)]
    if 1 <= answer.value.updates <= len(b_texts):
        said[answer.value.updates - 1] = "update"
    return Relations(tuple(said), "llm", " ".join(answer.value.summary_a.split()) or None,
                     " ".join(answer.value.about.split())[:80] or None)
