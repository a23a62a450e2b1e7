"""Clustering for consolidation (plan §4.1 themes, §4.2 merge): pure numpy, no I/O.

Leader (star) clustering on cosine similarity: the item with the most neighbours
above the threshold leads a cluster of itself and its still-unassigned neighbours,
and so on. Every member is within the threshold of its leader, so clusters do not
chain A~B~C into one group where A and C have nothing in common (connected
components would). Deterministic: ties go to the lower index.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from src.vectors import unit_rows  # zero rows stay zero: they join nothing


def leader_clusters(vectors: np.ndarray, threshold: float, min_size: int = 2) -> list[list[int]]:
    """Index lists of clusters with at least `min_size` members, largest first."""
    n = len(vectors)
    if n < min_size:
        return []
    u = unit_rows(vectors)
    sims = u @ u.T
    adjacent = sims >= threshold
    np.fill_diagonal(adjacent, False)
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
