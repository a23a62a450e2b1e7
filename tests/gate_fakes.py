"""Gate-test helpers: a scripted meta-call language model (the LLM seam) and set-up helpers.

`ScriptedMetaLLM` implements the LanguageModel protocol. Only isolated meta calls are
allowed (anything else fails the test), and each call is recorded with its question,
schema and purpose so tests can check exactly what the gate sent.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from src.errors import ProviderUnavailable
from src.gates.prompts import RelationsAnswer
from src.gates.settings import GateSettings
from src.providers.protocols import LLMResult, Structured

_STATEMENT = re.compile(r"^Statement ([AB]): (.*)$", re.M)
_EARLIER = re.compile(r"^(\d+)\. (.*)$", re.M)


@dataclass
class MetaCall:
    question: str
    schema: type
    purpose: str
    max_tokens: int | None

    @property
    def statements(self) -> tuple[str, ...]:
        """(A, B) of a contradiction question; (A, B1, ..., Bn) of a relation question."""
        found = dict(_STATEMENT.findall(self.question))
        if "B" in found:
            return found["A"], found["B"]
        return found["A"], *(b for _, b in _EARLIER.findall(self.question))


@dataclass
class ScriptedMetaLLM:
    """Answers "Does A contradict B?" with `verdict(a, b)`; summary_a = `summary(a)`; asked the
    relation of a user's statement A to earlier ones B1..Bn, each "contradiction" when
    `verdict(a, b)`, else `relation(a, b)` (the first "update" is the one A updates)."""

    verdict: Callable[[str, str], bool] = lambda a, b: False
    # asked about two of the user's statements and no contradiction: "update" or "neither"
    relation: Callable[[str, str], str] = lambda a, b: "neither"
    summary: Callable[[str], str] = lambda a: "summary: " + a
    about: Callable[[str], str] = lambda a: ""        # what a statement is about ("my car")
    fail: bool = False
    calls: list[MetaCall] = field(default_factory=list)
    provider: str = "scripted"
    model: str = "scripted-meta"
    configured: bool = True

    async def meta_call_structured(self, question, schema, *, purpose, max_tokens=None, caller=None):
        assert isinstance(question, str), "a meta call takes one question string"
        self.calls.append(MetaCall(question, schema, purpose, max_tokens))
        if self.fail:
            raise ProviderUnavailable("scripted outage", provider=self.provider)
        a, *bs = self.calls[-1].statements
        if schema is RelationsAnswer:     # a user's statement and earlier ones (src/gates/updates.py)
            said = ["contradiction" if self.verdict(a, b) else self.relation(a, b) for b in bs]
            value = schema(updates=said.index("update") + 1 if "update" in said else 0,
                           contradicts=[k for k, r in enumerate(said, 1) if r == "contradiction"],
                           summary_a=self.summary(a), about=self.about(a))
        else:
            value = schema(contradicts=self.verdict(a, bs[0]), summary_a=self.summary(a))
        return Structured(value, LLMResult(value.model_dump_json(), self.model, self.provider,
                                           10, 5, 1.0), repaired=False)

    async def meta_call(self, *a, **k):
        raise AssertionError("the gate only makes structured meta calls")

    async def generate(self, *a, **k):
        raise AssertionError("the gate never calls generate (no history, no identity)")

    async def generate_structured(self, *a, **k):
        raise AssertionError("the gate never calls generate_structured")


def gate_settings(**exit_overrides) -> GateSettings:
    """Default gate settings with some exit-gate fields replaced."""
    base = GateSettings()
    return base.model_copy(update={"exit": base.exit.model_copy(update=exit_overrides)})


def attention_for(vecs: np.ndarray, targets: list[float], seed: int = 7) -> np.ndarray:
    """One unit vector `a` with cos(vecs[j], a) == targets[j] for every (unit) row j.

    Least-norm solution of vecs @ a0 = targets, topped up to unit length with a
    direction orthogonal to every row. Raises if the targets need |a0| > 1.
    """
    v = np.asarray(vecs, dtype=np.float64)
    pinv = np.linalg.pinv(v @ v.T)
    a0 = v.T @ (pinv @ np.asarray(targets, dtype=np.float64))
    norm = float(np.linalg.norm(a0))
    if norm > 1.0:
        raise ValueError(f"targets need |a0| = {norm:.3f} > 1; lower the contrast")
    u = np.random.default_rng(seed).standard_normal(v.shape[1])
    u -= v.T @ (pinv @ (v @ u))
    u /= np.linalg.norm(u)
    return a0 + np.sqrt(1.0 - norm**2) * u
