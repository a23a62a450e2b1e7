"""ACT-R activation of a memory (plan §2.7): A_i = B_i + S_i + P_i + noise.

- ``base_level`` B_i = ln(sum_j t_j^-d): memories used often and recently are
  more available. t_j is the age in seconds of presentation j; the presentations
  are the memory's ``access_timestamps`` plus the moment this mind took it in
  (``created_at``; recall, src/recall/scoring.py), so a memory never has an empty history.
- ``spreading`` S_i: how strongly the current context and the identity layers
  point at the memory, from cosine similarities (defined in its docstring).
- ``partial_matching`` P_i: a penalty of P per unit of metadata mismatch.
- ``logistic_noise``: ACT-R's transient noise, logistic with scale s.

Constants are ACT-R's defaults as the plan gives them: d=0.5, s=0.4, P=-1.0,
tau=0.0. Times are aware ``datetime`` objects or float epoch seconds; ``now``
is always passed in.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from src.recall.settings import DECAY_D, MISMATCH_P, NOISE_S, TAU
from src.vectors import unit_rows

#: Ages are clamped to at least this many seconds. t^-d diverges at t=0, so a
#: memory touched "just now" (or stamped slightly in the future by clock skew)
#: would get infinite activation; one second is below anything the loop can
#: resolve and gives a finite maximum contribution of 1.0 per presentation.
MIN_AGE_SECONDS = 1.0

Timestamp = datetime | float | int
Rng = random.Random | np.random.Generator


def _seconds(t: Timestamp) -> float:
    if isinstance(t, datetime):
        if t.tzinfo is None:
            raise ValueError(
                f"naive datetime {t.isoformat()}: pass timezone-aware datetimes "
                "(TIMESTAMPTZ values from the database are)"
            )
        return t.timestamp()
    return float(t)


def _seconds_array(presentations: Sequence[Timestamp] | np.ndarray) -> np.ndarray:
    if isinstance(presentations, np.ndarray):
        if np.issubdtype(presentations.dtype, np.datetime64):
            # numpy datetimes carry no zone; they are taken as UTC.
            return (presentations - np.datetime64(0, "s")) / np.timedelta64(1, "s")
        if presentations.dtype != object:
            return presentations.astype(float, copy=False).ravel()
    return np.fromiter((_seconds(t) for t in presentations), dtype=float)


def base_levels(
    presentations: Sequence[Sequence[Timestamp] | np.ndarray],
    now: Timestamp,
    d: float = DECAY_D,
) -> np.ndarray:
    """B_i for many memories at once: one entry of ``presentations`` per memory.

    All ages go into one flat array and are summed per memory with
    ``np.add.reduceat``, so scoring 50 candidates is one numpy pass.
    """
    if not d > 0:
        raise ValueError(f"decay d must be > 0, got {d!r}")
    arrays = [_seconds_array(p) for p in presentations]
    if not arrays:
        return np.empty(0)
    lengths = np.fromiter((a.size for a in arrays), dtype=np.intp, count=len(arrays))
    empty = np.flatnonzero(lengths == 0)
    if empty.size:
        raise ValueError(
            f"memory at index {int(empty[0])} has no presentations; include its "
            "event_time (or created_at) so base-level learning has an origin"
        )
    ages = np.maximum(_seconds(now) - np.concatenate(arrays), MIN_AGE_SECONDS)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    return np.log(np.add.reduceat(ages ** (-d), starts))


def base_level(presentations: Sequence[Timestamp], now: Timestamp, d: float = DECAY_D) -> float:
    """B_i = ln(sum_j t_j^-d), t_j = seconds since presentation j (at least 1 s)."""
    return float(base_levels([presentations], now, d)[0])


def spreading_many(
    memory_vecs: np.ndarray,
    context_vecs: np.ndarray | Sequence[Sequence[float]] = (),
    layer_vecs_with_weights: Sequence[tuple[np.ndarray | Sequence[float], float]] = (),
    context_share: float = 0.5,
) -> np.ndarray:
    """S_i for every row of ``memory_vecs`` (shape (n, dim)); see ``spreading``."""
    if not 0.0 <= context_share <= 1.0:
        raise ValueError(f"context_share must be in [0, 1], got {context_share!r}")
    memories = unit_rows(memory_vecs)
    n = memories.shape[0]

    s_context = None
    if len(context_vecs):
        sims = np.clip(memories @ unit_rows(context_vecs).T, 0.0, 1.0)
        s_context = sims.mean(axis=1)

    s_layers = None
    if len(layer_vecs_with_weights):
        vecs = unit_rows([v for v, _ in layer_vecs_with_weights])
        weights = np.array([w for _, w in layer_vecs_with_weights], dtype=float)
        if np.any(weights < 0) or not np.all(np.isfinite(weights)):
            raise ValueError("layer weights must be finite and >= 0")
        if weights.sum() > 0:
            sims = np.clip(memories @ vecs.T, 0.0, 1.0)
            s_layers = sims @ weights / weights.sum()

    if s_context is not None and s_layers is not None:
        return context_share * s_context + (1.0 - context_share) * s_layers
    if s_context is not None:
        return s_context
    if s_layers is not None:
        return s_layers
    return np.zeros(n)


def spreading(
    memory_vec: np.ndarray | Sequence[float],
    context_vecs: np.ndarray | Sequence[Sequence[float]] = (),
    layer_vecs_with_weights: Sequence[tuple[np.ndarray | Sequence[float], float]] = (),
    context_share: float = 0.5,
) -> float:
    """Spreading activation S_i in [0, 1] from the context and the identity layers.

    Each source's association with the memory is its cosine similarity clipped
    to [0, 1]: an opposed embedding is "no association", not negative evidence,
    and the bound keeps S on the same scale as the other components.

    - context part: mean similarity to the ``context_vecs`` (the current focus
      of attention). ACT-R splits a fixed source activation W=1 evenly over the
      sources in the buffer, which is exactly the mean.
    - layer part: similarity to each Layer 0/1 value or goal, averaged with the
      item's depth weight as its share of attention, so strongly held values
      pull harder. Pass (vector, weight) pairs.

    S = context_share * context + (1 - context_share) * layers when both exist;
    whichever exists alone otherwise (at bootstrap the layers are empty); 0 when
    neither does. Unlike ACT-R's S - ln(fan), S is never negative.
    """
    return float(
        spreading_many([memory_vec], context_vecs, layer_vecs_with_weights, context_share)[0]
    )


def partial_matching(mismatches: float | Sequence[float], P: float = MISMATCH_P) -> float:
    """P_i = P * total mismatch.

    ``mismatches`` is either a count of mismatching metadata fields or one
    degree per field in [0, 1] (0 = match, 1 = complete mismatch). P must be
    <= 0: it is a penalty.
    """
    if P > 0:
        raise ValueError(f"mismatch penalty P must be <= 0, got {P!r}")
    if isinstance(mismatches, (int, float)):
        total = float(mismatches)
        if total < 0:
            raise ValueError(f"mismatch count must be >= 0, got {mismatches!r}")
    else:
        degrees = [float(m) for m in mismatches]
        if any(not 0.0 <= m <= 1.0 for m in degrees):
            raise ValueError(f"mismatch degrees must be in [0, 1], got {degrees!r}")
        total = sum(degrees)
    return P * total


def _open_uniform(rng: Rng) -> float:
    # random() is in [0, 1); u = 0 would make ln(u) undefined. Redraw (p = 2**-53).
    u = rng.random()
    while u == 0.0:
        u = rng.random()
    return float(u)


def logistic_noise(rng: Rng, s: float = NOISE_S) -> float:
    """One draw of ACT-R noise: s * ln(u / (1 - u)), u uniform in (0, 1).

    Logistic with mean 0 and variance pi^2 s^2 / 3.
    """
    if s < 0:
        raise ValueError(f"noise scale s must be >= 0, got {s!r}")
    u = _open_uniform(rng)
    return s * math.log(u / (1.0 - u))


def logistic_noise_many(rng: np.random.Generator, n: int, s: float = NOISE_S) -> np.ndarray:
    """``n`` independent draws of ``logistic_noise`` in one call."""
    if s < 0:
        raise ValueError(f"noise scale s must be >= 0, got {s!r}")
    u = rng.random(n)
    u[u == 0.0] = np.nextafter(0.0, 1.0)
    return s * np.log(u / (1.0 - u))


@dataclass(frozen=True, slots=True)
class ActivationResult:
    """The four ACT-R terms and their sum, kept apart for logging and tests."""

    B: float
    S: float
    P: float
    noise: float
    total: float

    def above_threshold(self, tau: float = TAU) -> bool:
        """A memory is retrievable (or persisted, plan §2.7) when total >= tau."""
        return self.total >= tau


@dataclass(frozen=True)
class ActRParameters:
    """ACT-R's constants for one activation: decay d, noise scale s, mismatch penalty P."""

    d: float = DECAY_D
    s: float = NOISE_S
    P: float = MISMATCH_P


def activation(
    presentations: Sequence[Timestamp],
    now: Timestamp,
    rng: Rng,
    memory_vec: np.ndarray | Sequence[float] | None = None,
    context_vecs: np.ndarray | Sequence[Sequence[float]] = (),
    layer_vecs_with_weights: Sequence[tuple[np.ndarray | Sequence[float], float]] = (),
    mismatches: float | Sequence[float] = 0,
    params: ActRParameters = ActRParameters(),
) -> ActivationResult:
    """A_i = B_i + S_i + P_i + noise for one memory.

    Without ``memory_vec`` there is nothing to spread to and S = 0. Pass s=0 for
    a deterministic score (the generator is still advanced by one draw).
    """
    d, s, P = params.d, params.s, params.P
    b = base_level(presentations, now, d)
    s_i = (
        0.0 if memory_vec is None else spreading(memory_vec, context_vecs, layer_vecs_with_weights)
    )
    p_i = partial_matching(mismatches, P)
    eps = logistic_noise(rng, s)
    return ActivationResult(B=b, S=s_i, P=p_i, noise=eps, total=b + s_i + p_i + eps)
