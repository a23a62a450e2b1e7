"""StochasticWeight: a memory's depth weight as a Beta(alpha, beta) distribution (plan §2.3).

alpha counts evidence FOR a memory, belief or value and beta evidence AGAINST it.
The shape carries what a single number cannot: Beta(30, 25) (contested, much
evidence on both sides) and Beta(1, 1) (uninformed) have similar centers but mean
very different things. Every read of a weight that should vary is an ``observe``;
``center`` is for sorting and filtering where randomness is not wanted.

Randomness is injected: ``observe`` takes the caller's generator, so a test (or a
replayed cycle) seeds it once and gets the same draws. There is deliberately no
default generator: forgetting to pass one is a ``TypeError`` at the call site
instead of a silent, irreproducible draw from hidden module state.

The database stores only ``depth_weight_alpha`` and ``depth_weight_beta`` and
updates them atomically in SQL; this class and the helpers below are the
reference arithmetic the SQL and the safety choke point are checked against.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np

#: Defaults of a new memory: center 0.2, wide uncertainty (the "blank slate").
DEFAULT_ALPHA = 1.0
DEFAULT_BETA = 4.0

#: Shape thresholds of plan §2.3.
CONTESTED_MIN = 5.0
UNINFORMED_MAX = 2.0

Rng = random.Random | np.random.Generator


def _check_shape(name: str, value: float) -> None:
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def _check_amount(kind: str, amount: float) -> None:
    if not math.isfinite(amount) or amount < 0:
        raise ValueError(
            f"{kind} amount must be a finite number >= 0, got {amount!r}; "
            "evidence the other way is recorded with the opposite method"
        )


def _beta_draw(rng: Rng, alpha: float, beta: float) -> float:
    if isinstance(rng, np.random.Generator):
        return float(rng.beta(alpha, beta))
    return rng.betavariate(alpha, beta)


@dataclass(slots=True)
class StochasticWeight:
    """Depth weight of one memory, belief or value as Beta(alpha, beta)."""

    alpha: float = DEFAULT_ALPHA
    beta: float = DEFAULT_BETA

    def __post_init__(self) -> None:
        _check_shape("alpha", self.alpha)
        _check_shape("beta", self.beta)

    def observe(self, rng: Rng) -> float:
        """One draw from Beta(alpha, beta): each look at the weight is a new sample.

        ``rng`` is a ``random.Random`` or a ``numpy.random.Generator``.
        """
        return _beta_draw(rng, self.alpha, self.beta)

    @property
    def center(self) -> float:
        """Mean of the distribution, alpha / (alpha + beta)."""
        return self.alpha / (self.alpha + self.beta)

    @property
    def depth_weight(self) -> float:
        """Deterministic stand-in for sorting and filtering; equals ``center``."""
        return self.center

    @property
    def variance(self) -> float:
        """alpha * beta / ((alpha + beta)^2 * (alpha + beta + 1))."""
        total = self.alpha + self.beta
        return (self.alpha * self.beta) / (total * total * (total + 1.0))

    @property
    def total_evidence(self) -> float:
        """alpha + beta. A float: reinforcements come in fractions (0.1, 0.05)."""
        return self.alpha + self.beta

    @property
    def is_contested(self) -> bool:
        """Much evidence on both sides (alpha > 5 and beta > 5): productive tension."""
        return self.alpha > CONTESTED_MIN and self.beta > CONTESTED_MIN

    @property
    def is_uninformed(self) -> bool:
        """Little evidence either way (alpha < 2 and beta < 2): genuinely uncertain."""
        return self.alpha < UNINFORMED_MAX and self.beta < UNINFORMED_MAX

    def reinforce(self, amount: float = 1.0) -> None:
        """Add evidence FOR: alpha += amount."""
        _check_amount("reinforce", amount)
        self.alpha += amount

    def contradict(self, amount: float = 0.5) -> None:
        """Add evidence AGAINST: beta += amount."""
        _check_amount("contradict", amount)
        self.beta += amount


def observe_many(alpha: np.ndarray, beta: np.ndarray, rng: np.random.Generator, *,
                 evidence_cap: float | None = None) -> np.ndarray:
    """One Beta draw per row, for the 20-50 candidates a retrieval scores at once.

    `evidence_cap` (broadened sampling, plan §3.9: `Safety.sampling_evidence_cap`): a row
    resting on more evidence is drawn from Beta(alpha·s, beta·s), s = cap / (alpha + beta):
    the same center, a wider spread, so what has run away is not drawn the same way every time."""
    alpha = np.asarray(alpha, dtype=float)
    beta = np.asarray(beta, dtype=float)
    if alpha.shape != beta.shape:
        raise ValueError(f"alpha has shape {alpha.shape} but beta has shape {beta.shape}")
    if alpha.size and not (np.all(alpha > 0) and np.all(beta > 0)):
        raise ValueError("every alpha and beta must be > 0")
    if evidence_cap is not None:
        if not evidence_cap > 0:
            raise ValueError(f"evidence_cap must be > 0, got {evidence_cap!r}")
        scale = np.minimum(1.0, evidence_cap / (alpha + beta))
        alpha, beta = alpha * scale, beta * scale
    return rng.beta(alpha, beta)


def diminished_gain(gain: float, evidence_count: float) -> float:
    """Diminishing returns of plan §3.9: ``gain / log2(evidence_count + 1)``.

    The more evidence a weight already rests on, the less one more piece moves
    it, so a self-reinforcing loop cannot run a memory up to the ceiling quickly.

    For ``evidence_count <= 1`` the divisor log2(count + 1) would be <= 1, which
    would amplify the gain (and divide by zero at 0); there the gain is returned
    unchanged. The divisor is therefore ``max(1, log2(evidence_count + 1))``.
    ``evidence_count`` must be >= 0; callers pass the memory's total evidence
    (alpha + beta) before the update.
    """
    if not math.isfinite(gain):
        raise ValueError(f"gain must be finite, got {gain!r}")
    if not math.isfinite(evidence_count) or evidence_count < 0:
        raise ValueError(f"evidence_count must be a finite number >= 0, got {evidence_count!r}")
    return gain / max(1.0, math.log2(evidence_count + 1.0))


def amount_to_center(alpha: float, beta: float, center: float) -> float:
    """The reinforce amount that takes Beta(alpha, beta) to `center` through diminishing
    returns (`diminished_gain`, as the weight choke point applies it); 0 when the center is
    there already."""
    if not 0.0 < center < 1.0:
        raise ValueError(f"center must be in (0, 1), got {center!r}")
    if alpha / (alpha + beta) >= center:
        return 0.0
    gain = (center * (alpha + beta) - alpha) / (1.0 - center)
    return gain * max(1.0, math.log2(alpha + beta + 1.0))


def contradiction_to_center(alpha: float, beta: float, center: float) -> float:
    """The contradict amount (beta evidence, applied in full) that takes Beta(alpha, beta)
    down to `center`; 0 when the center is there already."""
    if not 0.0 < center < 1.0:
        raise ValueError(f"center must be in (0, 1), got {center!r}")
    if alpha / (alpha + beta) <= center:
        return 0.0
    return alpha / center - alpha - beta


def center_after(alpha: float, beta: float, d_alpha: float, d_beta: float) -> float:
    """Center the weight would have after adding ``d_alpha`` and ``d_beta``.

    Lets a safety rule judge an update before the SQL applies it. The deltas may
    be negative (a decay) but the resulting alpha and beta must stay > 0.
    """
    _check_shape("alpha", alpha)
    _check_shape("beta", beta)
    new_alpha, new_beta = alpha + d_alpha, beta + d_beta
    if not (
        math.isfinite(new_alpha) and new_alpha > 0 and math.isfinite(new_beta) and new_beta > 0
    ):
        raise ValueError(
            f"update would leave alpha={new_alpha!r}, beta={new_beta!r}; both must stay > 0"
        )
    return new_alpha / (new_alpha + new_beta)
