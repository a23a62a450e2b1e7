"""Clustering for consolidation (plan §4.1 themes, §4.2 merge): pure numpy, no I/O.

Leader (star) clustering on cosine similarity: the item with the most neighbours
above the threshold leads a cluster of itself and its still-unassigned neighbours,
and so on. Every member is within the threshold of its leader, so clusters do not
chain A~B~C into one group where A and C have nothing in common (connected
components would). Deterministic: ties go to the lower index.

Merge adds a lexical guard: a near-duplicate must also share most of its *content
words* (the words left after the function words in `STOP_WORDS`) with its leader.
Cosine alone cannot tell a fact from its neighbour in the same frame: on the offline
embedder "My sister Mara moved to Leeds in May for a nursing job." and the same in
June are as close as near-duplicates, and so are "Any favorite looks for you Kate?" and
"…moments…"; a short turn's speaker name outweighs its words ("Vanessa: I guess lol" joined
"Vanessa: What are you going to make?" at the old 0.85).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from src.vectors import unit_rows  # zero rows stay zero: they join nothing

#: English function words: articles, pronouns, auxiliaries and modals, the commonest
#: prepositions and conjunctions. Words that change what a sentence says stay content
#: words: negations ("n't" counts as "not"), question words, and the prepositions of
#: order and direction ("before"/"after", "up"/"down"): "Mara moved" and "Mara never
#: moved", "call before lunch" and "call after lunch" are not the same memory.
STOP_WORDS = frozenset("""
a about also am an and any are as at be been being both but by can could did do does doing each for
from had has have having he her hers herself him himself his i if in into is it its itself just let me
my myself of on or our ours ourselves shall she should so some such than that the their theirs them
themselves then these they this those to too very was we were will with would you your yours yourself
yourselves
""".split())
#: Words with inner apostrophes ("don't", "Mara's"); Unicode letters and digits.
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


def words(text: str) -> list[str]:
    """The lower-cased words of `text`, a contraction's clitic dropped ("mara's" → "mara",
    "i'm" → "i") and a negated one read as "not" ("don't" → "not")."""
    out: list[str] = []
    for token in _WORD.findall(text.translate(_APOSTROPHES).lower()):
        out.append("not" if token.endswith("n't") else token.split("'")[0])
    return out


def content_words(text: str) -> frozenset[str]:
    """The words of `text` that are not stop words. A text made only of stop words keeps
    all of them, so "What about you?" and "How about you?" still differ."""
    every = words(text)
    content = frozenset(w for w in every if w not in STOP_WORDS)
    return content or frozenset(every)


def word_overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two content-word sets; two empty sets are the same (1.0)."""
    union = len(a | b)
    return len(a & b) / union if union else 1.0


def leader_clusters(vectors: np.ndarray, threshold: float, min_size: int = 2, *,
                    content: Sequence[frozenset[str]] | None = None,
                    min_overlap: float = 0.0) -> list[list[int]]:
    """Index lists of clusters with at least `min_size` members, largest first.

    With `content` (each item's content words), two items are neighbours only when their
    `word_overlap` is at least `min_overlap` as well (merge's lexical guard).
    """
    n = len(vectors)
    if n < min_size:
        return []
    u = unit_rows(vectors)
    sims = u @ u.T
    adjacent = sims >= threshold
    np.fill_diagonal(adjacent, False)
    if content is not None and min_overlap > 0.0:
        for i, j in np.argwhere(np.triu(adjacent)).tolist():
            if word_overlap(content[i], content[j]) < min_overlap:
                adjacent[i, j] = adjacent[j, i] = False
    unassigned = np.ones(n, dtype=bool)
    clusters: list[list[int]] = []
    while True:
        degree = (adjacent & unassigned[None, :]).sum(axis=1) * unassigned
        leader = int(np.argmax(degree))
        if degree[leader] + 1 < min_size:
            break
        members = [leader, *np.flatnonzero(adjacent[leader] & unassigned).tolist()]
        unassigned[members] = False
        clusters.append(sorted(members))
    return clusters


def most_central(vectors: np.ndarray) -> int:
    """Index of the member with the highest mean similarity to the others (the extractive pick)."""
    u = unit_rows(vectors)
    sims = u @ u.T
    np.fill_diagonal(sims, 0.0)
    return int(np.argmax(sims.sum(axis=1)))


def fingerprint(memory_ids: Sequence[int]) -> str:
    """A cluster's identity: its sorted member ids, hashed. The same set → the same print."""
    text = ",".join(str(i) for i in sorted(set(memory_ids)))
    return hashlib.sha256(text.encode()).hexdigest()[:32]
