"""Scoring recall's candidates (steps 3–5 of src/recall/retrieval.py): ACT-R, hybrid
relevance, and how the two make the order — re-ranking what matches, never burying it.

    weighted = relevance · ((1 − a) + a · P(retrieve)) + own_word

- relevance (plan §3.1): five components under a Dirichlet blend (relevance.py);
- P(retrieve) = σ((A − τ)/s), A = B + S + P + ε (plan §2.7, activation.py), enters as a
  share `a` (`activation_share`) of the memory's own relevance: among memories that match
  alike, the one used often and lately comes first; a memory that matches worse cannot
  climb over a better one on practice alone. Added, as before issue 35, P(retrieve) lifted
  whatever the session kept recalling (imported chats recalled again and again outweighed
  a fact full text ranked first by far, which ended below them; notes.md, "Scoring");
- B's presentations are the memory's recalls and the moment this mind took it in
  (`created_at`), not the time its event happened: an imported year-old chat is as
  available as anything the mind heard that day, and its age still counts in recency;
- `own_word` (`user_word`): for a question about the user ("my …", "do I …"), what the
  user stated gets a small bonus over what other speakers said in imported chats and
  what the mind said itself, at a similar match;
- a memory that full text ranks first by a wide margin (`DECISIVE_RATIO` over the next:
  a rare name or word of the question) is kept in the top `keep` whatever the layers say
  (`keep_decisive`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from src.recall import activation as actr
from src.recall import relevance as rel
from src.recall.hit import SearchHit
from src.recall.settings import RetrievalSettings
from src.recall.speakers import speaker_of

#: Full text's first is decisive when its score (the idf it matched) is this many times the
#: next one's: "What is my favourite book?" matched the fact at several times the chats' idf.
DECISIVE_RATIO = 1.5
#: A question about the user: a first-person word (not inside another word).
_ABOUT_USER = re.compile(r"\b(i|i'm|im|i've|ive|i'd|i'll|me|my|mine|myself|we|us|our|ours)\b", re.IGNORECASE)
#: A word for someone else: a question holding one asks about them.
_OTHER_PERSON = re.compile(r"\b(he|she|him|her|his|hers|they|them|their|theirs|you|your|yours|someone|somebody|"
                           r"anyone|people|everyone)\b", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z][\w'-]*")


@dataclass(frozen=True)
class Recalled:
    """A candidate after every stage; `final` orders the result."""

    hit: SearchHit
    activation: actr.ActivationResult
    components: tuple[float, ...]          # rel.COMPONENTS order
    relevance: float
    weighted: float
    spread: float                          # co-activation reached through co-access
    p_retrieve: float = 0.0                # P(retrieve) = σ((A − τ)/s) from ACT-R
    rerank: float | None = None
    final: float = 0.0

    @property
    def id(self) -> int:
        return self.hit.id


def about_user(query: str) -> bool:
    """Whether a question is about the user: it speaks in the first person."""
    return _ABOUT_USER.search(query.replace("\u2019", "'")) is not None


def asks_of_user(query: str) -> bool:
    """Whether the user's own statements may hold the answer (the own arm, src/recall/search.py):
    a question in the first person, or one that names nobody ("Any pets?", "When's washing
    day?", "Which friend recently became a mum?"). A name after the first word ("What are
    Kate's hobbies?", "Where is Lisbon?") or a word for someone else ("What does she do?")
    says it asks about someone or something else: the user's nearest lines, ranked among
    themselves whatever their match, took REALTALK's questions about named people from
    33.9 to 25.3% in the top 5 (notes.md)."""
    query = query.replace("\u2019", "'")
    if about_user(query):
        return True
    words = _WORD.findall(query)
    named = any(w[0].isupper() and w != "I" and not w.startswith("I'") for w in words[1:])
    return not named and _OTHER_PERSON.search(query) is None


def user_stated(hits: Sequence[SearchHit]) -> np.ndarray:
    """1.0 for each memory the user said (their own line, not an imported speaker's nor the mind's)."""
    return np.array([1.0 if (s := speaker_of(h.source_tag, h.metadata)) is not None and s.kind == "user"
                     else 0.0 for h in hits])


@dataclass(frozen=True)
class Focus:
    """What one recall's candidates are scored against: the question's words, the focus
    vectors (the question's own first, then the attention focus), the identity layers, the
    wanted memory types, the gut's emotional alignment, and the recency share of the fused
    search score (the arm weight, taken out again: recency is a component of its own)."""

    query: str
    context_vecs: Sequence[np.ndarray]
    layer_vecs: Sequence[tuple[np.ndarray, float]]
    want_types: Sequence[str] = ()
    emotional: Callable[[np.ndarray], np.ndarray] | None = None
    w_recency: float = 0.0


def score(hits: Sequence[SearchHit], rng: np.random.Generator, now: datetime, cfg: RetrievalSettings,
          focus: Focus, spread: dict[int, float], blend: np.ndarray, cold_seeds: Sequence[int] = ()) -> list[Recalled]:
    """ACT-R and hybrid relevance for every candidate, vectorised."""
    if not hits:
        return []
    a = cfg.act_r
    context_vecs, layer_vecs, want_types = list(focus.context_vecs), focus.layer_vecs, focus.want_types
    w_recency, emotional_fn, query = focus.w_recency, focus.emotional, focus.query
    base = actr.base_levels([[h.created_at, *h.access_timestamps] for h in hits], now, a.d)
    usable = np.array([h.embedding is not None and h.similarity is not None for h in hits])
    vecs = np.stack([h.embedding if h.embedding is not None else np.zeros(768, np.float32) for h in hits])
    s_i = np.where(usable, actr.spreading_many(vecs, context_vecs, layer_vecs), 0.0)
    p_i = np.array([a.P * _mismatch(h, want_types) for h in hits])
    noise = actr.logistic_noise_many(rng, len(hits), a.s)
    total = base + s_i + p_i + noise
    p_retrieve = 1.0 / (1.0 + np.exp(-np.clip((total - a.tau) / max(a.s, 1e-9), -50, 50)))

    # The semantic component reflects the match search measured (both arms), not cosine
    # alone: with a weak embedder cosine throws away what full text found (issue 12).
    # ACT-R's S_i above keeps pure cosine, as the plan's spreading activation needs.
    fused = np.array([max(0.0, h.score - w_recency * h.recency) if h.rrf > 0 else 0.0 for h in hits])
    cosine = np.array([h.similarity if u else np.nan for h, u in zip(hits, usable, strict=True)])
    semantic = rel.semantic_signal(cfg.semantic_signal, cosine, fused)
    coact = coactivation(hits, spread, semantic, cold_seeds)
    emotional = None
    if emotional_fn is not None:
        # a memory without a comparable vector stays neutral
        emotional = np.where(usable, emotional_fn(vecs), rel.NEUTRAL_EMOTION)
    comps = rel.relevance_components(rng, semantic, coact, emotional, np.array([h.recency for h in hits]))
    relevance = rel.hybrid_relevance(comps, blend)
    weighted = relevance * ((1 - cfg.activation_share) + cfg.activation_share * p_retrieve)
    if cfg.user_word and about_user(query):
        weighted = weighted + cfg.user_word * user_stated(hits)
    return [
        Recalled(h, actr.ActivationResult(float(base[i]), float(s_i[i]), float(p_i[i]), float(noise[i]),
                                          float(total[i])),
                 tuple(float(c) for c in comps[i]), float(relevance[i]), float(weighted[i]),
                 float(coact[i]), float(p_retrieve[i]))
        for i, h in enumerate(hits)
    ]


def keep_decisive(ranked: list[Recalled], keep: int) -> list[Recalled]:
    """`ranked` (best first) with full text's decisive first (DECISIVE_RATIO) moved up to
    rank `keep` when the layers put it lower: a rare word of the question it alone holds
    is the strongest evidence recall has."""
    scored = sorted((r for r in ranked if r.hit.fts_score), key=lambda r: -(r.hit.fts_score or 0.0))
    if not scored or scored[0].hit.fts_rank != 1:
        return ranked
    first = scored[0]
    runner_up = scored[1].hit.fts_score if len(scored) > 1 else 0.0
    at = ranked.index(first)
    if at < keep or (first.hit.fts_score or 0.0) < DECISIVE_RATIO * (runner_up or 0.0):
        return ranked
    above = ranked[keep - 1].weighted
    moved = replace(first, weighted=max(first.weighted, above))
    return [*ranked[:keep - 1], moved, *(r for r in ranked[keep - 1:] if r is not first)]


def coactivation(hits: Sequence[SearchHit], spread: dict[int, float], semantic: np.ndarray,
                 cold_seeds: Sequence[int]) -> np.ndarray:
    """Each candidate's co-activation: what spreading reached it with. Cold (no context), the
    best hits stand in for the memories in context, and the seed that matches the cue best
    (the semantic component) is the memory the cue activates, as co-active as one can be.
    At 0 (no seed spreads to itself) it trailed the partners the other seeds spread to: a
    fact typed an hour before lost to imported chats co-accessed meanwhile
    (tests/test_fidelity_process.py). Chosen by rank fusion instead, a weak match in both
    arms outranked a fact full text alone found."""
    coact = np.array([spread.get(h.id, 0.0) for h in hits])
    seeds = set(cold_seeds)
    seeded = [i for i, h in enumerate(hits) if h.id in seeds]
    if seeded:
        coact[max(seeded, key=lambda i: (semantic[i], -i))] = 1.0
    return coact


def _mismatch(hit: SearchHit, want_types: Sequence[str]) -> float:
    """Partial matching (plan §2.7): a wrong memory type is a full mismatch; a vector
    from another embed model (not comparable yet) half of one."""
    degree = 0.0
    if want_types and hit.memory_type not in want_types:
        degree += 1.0
    if hit.embedding is not None and hit.similarity is None:
        degree += 0.5
    return degree
