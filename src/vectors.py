"""Unit vectors: the one place that scales embeddings to length 1. Pure.

The zero-vector rule, the same everywhere: a vector of length 0 has no
direction, so it stays all zeros. Its cosine with anything is then 0 — similar
to nothing — instead of NaN, and a caller that needs a direction (the attention
focus of context inertia) checks `has_direction` and says so itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

#: Sums of squares safely inside float64's range: every row in it is divided by its norm
#: directly (the rows of an embedding); outside it (a zero row, components so small their
#: squares underflow or so large they overflow, NaN) the careful path below.
_SAFE_SQUARES = (1e-200, 1e200)


def unit_rows(vectors: np.ndarray | Sequence[Sequence[float]] | Iterable[np.ndarray]) -> np.ndarray:
    """Each row of `vectors` (shape (n, dim), float64) scaled to length 1; zero rows stay zero."""
    rows = vectors if isinstance(vectors, np.ndarray) else [np.asarray(v, dtype=np.float64).ravel()
                                                             for v in vectors]
    m = np.atleast_2d(np.asarray(rows, dtype=np.float64))
    squares = np.einsum("ij,ij->i", m, m)
    if m.size and np.all((squares > _SAFE_SQUARES[0]) & (squares < _SAFE_SQUARES[1])):
        return m / np.sqrt(squares)[:, None]   # the common case: no zero, tiny or huge row
    # scale each row by its largest component first: the squares of tiny components
    # underflow (a row of 5e-162 came out 4% too long) and of huge ones overflow
    peak = np.max(np.abs(m), axis=1, keepdims=True) if m.size else np.zeros((m.shape[0], 1))
    m = np.divide(m, peak, out=np.zeros_like(m), where=peak > 0)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)


def unit(vector: np.ndarray | Sequence[float]) -> np.ndarray:
    """`vector` (flattened, float64) scaled to length 1; a zero vector stays zero."""
    return unit_rows(np.asarray(vector, dtype=np.float64).ravel()[None, :])[0]


def has_direction(vector: np.ndarray | Sequence[float]) -> bool:
    """True when `vector` is finite and not all zeros, so `unit` gives a direction."""
    v = np.asarray(vector, dtype=np.float64)
    return bool(np.all(np.isfinite(v)) and np.any(v))


def closest(query: np.ndarray | Sequence[float],
            candidates: np.ndarray | Sequence[Sequence[float]] | Iterable[np.ndarray]) -> tuple[int, float] | None:
    """(index, cosine) of the candidate most similar to `query`; None when there are none.
    Zero vectors follow the rule above: cosine 0 with anything."""
    listed = candidates if isinstance(candidates, np.ndarray) else list(candidates)
    if not len(listed):
        return None
    cosines = unit_rows(listed) @ unit(query)
    best = int(np.argmax(cosines))
    return best, float(cosines[best])
