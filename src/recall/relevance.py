"""Hybrid relevance with a Dirichlet-sampled blend, and co-access spreading (plan §3.1).

A candidate memory's relevance is a blend of five components, each in [0, 1]
(columns in ``COMPONENTS`` order): semantic similarity, co-activation (Hebbian
co-access), pure noise, emotional alignment, and recency. The blend weights are
drawn afresh each retrieval from Dirichlet(alpha), so retrieval explores as well
as exploits, and the alphas can be tuned by meta-learning (§4.5).

Cold start and maturity. While the store is young, co-access and emotional
signals are near zero, so the alphas start at ``COLD_START_ALPHA`` (semantic
dominant) and move to ``TARGET_ALPHA`` as the store matures. The plan leaves
the trigger open (§15.2); we interpolate linearly in memory count, saturating
at 1000 memories, because:

- co-access pairs and gut samples accumulate roughly in proportion to stored
  memories, so the signals the target alphas rely on grow on that same clock;
- it is the maturity §3.5 already uses for the escalation threshold, so the
  agent has one notion of "how grown up am I", not two;
- it is deterministic and monotone with a single parameter, so it can be
  tested, and meta-learning adjustments can be laid on top of it later
  without fighting a second adaptive schedule.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TypeVar

import numpy as np

from src.recall.settings import MATURITY_MEMORIES

COMPONENTS: tuple[str, ...] = ("semantic", "coactivation", "noise", "emotional", "recency")

COLD_START_ALPHA: Mapping[str, float] = MappingProxyType(
    {"semantic": 12.0, "coactivation": 1.0, "noise": 0.5, "emotional": 0.5, "recency": 3.0}
)
TARGET_ALPHA: Mapping[str, float] = MappingProxyType(
    {"semantic": 8.0, "coactivation": 5.0, "noise": 0.5, "emotional": 3.0, "recency": 2.0}
)

#: Emotional alignment until the gut feeling (§5.1) exists: neutral.
NEUTRAL_EMOTION = 0.5

#: Spreading-activation multiplier per hop: hop 0 is the direct co-access
#: lookup from the seeds, hop 1 the partners of those hits, hop 2 (DMN only)
#: one step further. Beyond two hops the plan finds only noise.
DECAY_PER_HOP: tuple[float, ...] = (1.0, 0.3, 0.1)
SPREAD_TOP_K = 3

Id = TypeVar("Id", bound=Hashable)


def memory_maturity(total_memories: int, saturation: int = MATURITY_MEMORIES) -> float:
    """min(1, total_memories / saturation): 0 for a newborn store, 1 when mature."""
    if total_memories < 0:
        raise ValueError(f"total_memories must be >= 0, got {total_memories!r}")
    if saturation <= 0:
        raise ValueError(f"saturation must be > 0, got {saturation!r}")
    return min(1.0, total_memories / saturation)


def blend_alpha(maturity: float) -> dict[str, float]:
    """Dirichlet alphas at ``maturity`` in [0, 1]: cold start at 0, target at 1."""
    if not 0.0 <= maturity <= 1.0:
        raise ValueError(f"maturity must be in [0, 1], got {maturity!r}")
    return {
        c: COLD_START_ALPHA[c] + maturity * (TARGET_ALPHA[c] - COLD_START_ALPHA[c])
        for c in COMPONENTS
    }


def _alpha_vector(alpha: Mapping[str, float]) -> np.ndarray:
    if set(alpha) != set(COMPONENTS):
        raise ValueError(
            f"alpha must have exactly the components {', '.join(COMPONENTS)}; got {', '.join(sorted(alpha))}"
        )
    vector = np.array([alpha[c] for c in COMPONENTS], dtype=float)
    if not np.all(np.isfinite(vector) & (vector > 0)):
        raise ValueError(f"every Dirichlet alpha must be finite and > 0, got {dict(alpha)}")
    return vector


def sample_blend(rng: np.random.Generator, alpha: Mapping[str, float]) -> np.ndarray:
    """Blend weights ~ Dirichlet(alpha), in ``COMPONENTS`` order; they sum to 1."""
    return rng.dirichlet(_alpha_vector(alpha))


#: How the semantic component is read from a candidate (retrieval.semantic_signal):
#: "cosine" — cosine to the query alone (the plan's literal reading);
#: "fused" — the fused hybrid-search relevance, rrf / rrf_max in [0, 1];
#: "blend" — the mean of fused and cosine, min-max normalised over the candidates.
#: Measured in bench/bench_recall.py (notes.md, issue 12): only "blend" keeps the
#: pipeline at or above the bare hybrid statement.
SEMANTIC_SIGNALS: tuple[str, ...] = ("cosine", "fused", "blend")


def semantic_signal(
    kind: str,
    cosine: np.ndarray | Sequence[float],
    fused: np.ndarray | Sequence[float],
) -> np.ndarray:
    """The semantic component, in [0, 1], from what hybrid search measured for each candidate.

    ``cosine`` is NaN where the candidate has no comparable vector (another embed
    model, no vector yet): there the fused score stands in. ``fused`` is
    rrf / rrf_max (0 for candidates search did not rank: spreading brought them).

    "blend" carries both arms' ranks (fused) and the vector's own magnitude (cosine,
    which RRF throws away), and is spread over [0, 1] across the candidates: they are
    all search hits, so raw scores crowd a narrow band and the noise and recency
    components would otherwise reorder near-ties that search had right. A single
    candidate, or equal ones, gets 1.
    """
    if kind not in SEMANTIC_SIGNALS:
        raise ValueError(f"unknown semantic signal {kind!r}; expected one of: {', '.join(SEMANTIC_SIGNALS)}")
    fus = np.clip(np.asarray(fused, dtype=float), 0.0, 1.0)
    cos = np.asarray(cosine, dtype=float)
    cos = np.where(np.isnan(cos), fus, np.clip(cos, 0.0, 1.0))
    if kind == "cosine":
        return cos
    if kind == "fused":
        return fus
    mixed = (fus + cos) / 2.0
    if mixed.size == 0:
        return mixed
    lo, hi = float(mixed.min()), float(mixed.max())
    return (mixed - lo) / (hi - lo) if hi > lo else np.ones_like(mixed)


def relevance_components(
    rng: np.random.Generator,
    semantic: np.ndarray | Sequence[float],
    coactivation: np.ndarray | Sequence[float] | None = None,
    emotional: np.ndarray | Sequence[float] | None = None,
    recency: np.ndarray | Sequence[float] | None = None,
) -> np.ndarray:
    """Assemble the (n, 5) component matrix for ``hybrid_relevance``.

    ``semantic`` is the semantic signal (``semantic_signal``: cosine, the fused search
    score, or their blend) and is clipped to [0, 1] (an opposed embedding is
    irrelevant, not anti-relevant). Missing co-activation and
    recency are 0; missing emotional alignment is neutral 0.5. The noise column
    is drawn uniform in [0, 1) from ``rng``.
    """
    sem = np.clip(np.asarray(semantic, dtype=float), 0.0, 1.0)
    n = sem.shape[0]

    def column(values: np.ndarray | Sequence[float] | None, default: float) -> np.ndarray:
        if values is None:
            return np.full(n, default)
        col = np.asarray(values, dtype=float)
        if col.shape != (n,):
            raise ValueError(f"component has shape {col.shape}, expected ({n},)")
        return col

    return np.column_stack(
        [
            sem,
            column(coactivation, 0.0),
            rng.random(n),
            column(emotional, NEUTRAL_EMOTION),
            column(recency, 0.0),
        ]
    )


def hybrid_relevance(components: np.ndarray, weights: np.ndarray | Sequence[float]) -> np.ndarray:
    """Relevance of each row: components (n, 5) @ weights (5,), in [0, 1]."""
    comps = np.asarray(components, dtype=float)
    w = np.asarray(weights, dtype=float)
    if comps.ndim != 2 or comps.shape[1] != len(COMPONENTS):
        raise ValueError(f"components must have shape (n, {len(COMPONENTS)}), got {comps.shape}")
    if w.shape != (len(COMPONENTS),):
        raise ValueError(f"weights must have shape ({len(COMPONENTS)},), got {w.shape}")
    if comps.size and not np.all((comps >= 0.0) & (comps <= 1.0)):
        row, col = (int(i) for i in np.argwhere(~((comps >= 0.0) & (comps <= 1.0)))[0])
        raise ValueError(
            f"component {COMPONENTS[col]} of row {row} is {float(comps[row, col])!r}; "
            "every component must be in [0, 1]"
        )
    if np.any(w < 0) or not math.isclose(float(w.sum()), 1.0, abs_tol=1e-9):
        raise ValueError(f"weights must be >= 0 and sum to 1, got {w.tolist()}")
    return comps @ w


def spread_step(
    frontier: Mapping[Id, float],
    edges: Iterable[tuple[Id, Id, float]],
    top_k: int = SPREAD_TOP_K,
) -> dict[Id, float]:
    """One hop of spreading: path strength reaching each partner of the frontier.

    ``frontier`` maps the memories activation spreads from to the strength of
    the best path that reached them (1.0 for seeds). ``edges`` are (source,
    partner, score), the co-access score normalised to [0, 1], as SQL fetched
    them for this hop. Edges from memories outside the frontier are ignored and
    only the ``top_k`` strongest partners of each source count (a no-op when
    SQL already limited them). A partner's strength is the product of the edge
    scores along its best path; the hop's decay is applied by the caller.
    """
    by_source: dict[Id, list[tuple[float, Id]]] = {}
    for source, partner, score in edges:
        if not 0.0 <= score <= 1.0:
            raise ValueError(
                f"co-access score {score!r} of edge {source!r}->{partner!r} is not in [0, 1]"
            )
        if source in frontier:
            by_source.setdefault(source, []).append((score, partner))
    reached: dict[Id, float] = {}
    for source, partners in by_source.items():
        partners.sort(key=lambda sp: -sp[0])
        for score, partner in partners[:top_k]:
            strength = frontier[source] * score
            if strength > reached.get(partner, 0.0):
                reached[partner] = strength
    return reached


def spread_hop(
    frontier: Mapping[Id, float],
    edges: Iterable[tuple[Id, Id, float]],
    hop: int,
    activated: dict[Id, float],
    *,
    exclude: Collection[Id] = (),
    top_k: int = SPREAD_TOP_K,
    decay: Sequence[float] = DECAY_PER_HOP,
) -> dict[Id, float]:
    """One hop of co-activation through the co-access network (plan §3.1); the next frontier.

    Hop 0 is the direct lookup from the seeds, hop 1 normal retrieval (partners at
    0.3x), hop 2 DMN and introspection (0.1x). The caller fetches each hop's
    ``edges`` once it knows the frontier (src/recall/retrieval.py) and folds the
    hops: a memory reached at hop h gets ``decay[h]`` times the product of the edge
    scores on its path, and over several paths and hops the maximum wins (kept in
    ``activated``, updated in place). Memories in ``exclude`` (the seeds) do not
    spread back to themselves.

    Unlike the plan's pseudo-code, activation at hop h is scaled by the strength
    of the whole path, not only by its last edge: a weak direct association should
    not pass on a strong indirect one. With all edge scores 1.0 the two agree.
    """
    if not 0 <= hop < len(decay):
        raise ValueError(f"hops must be in [0, {len(decay) - 1}], got {hop!r}")
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k!r}")
    reached = spread_step(frontier, edges, top_k)
    reached = {m: s for m, s in reached.items() if m not in exclude}
    for memory_id, strength in reached.items():
        value = decay[hop] * strength
        if value > activated.get(memory_id, 0.0):
            activated[memory_id] = value
    return reached


def escalation_threshold(total_memories: int, identity_density: float,
                         saturation: int = MATURITY_MEMORIES) -> float:
    """Confidence below which System 1 escalates (plan §3.5).

    0.3 + 0.5 * (min(1, total_memories / saturation) + identity_density) / 2: 0.3 at
    bootstrap (escalate often, formative decisions deserve deep reasoning), 0.8
    at maturity. ``identity_density`` is the mean center of the memories whose
    center exceeds 0.7, in [0, 1] (0 when there are none).
    """
    if not 0.0 <= identity_density <= 1.0:
        raise ValueError(f"identity_density must be in [0, 1], got {identity_density!r}")
    maturity = (memory_maturity(total_memories, saturation) + identity_density) / 2.0
    return 0.3 + 0.5 * maturity
