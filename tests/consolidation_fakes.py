"""A scripted chat backend for consolidation tests, behind the real ResilientLanguageModel.

The backend is the provider seam: everything above it (repair round, ledger rows in
llm_calls, isolated meta calls) is the production code. `ConsolidationModel` answers
each consolidation prompt from what it is sent — it parses the memory ids out of the
prompt and cites only those — and checks every request: an isolated meta call (the
neutral system prompt, one user message, no history), JSON mode, a schema paragraph.
`script` lets a test override the answer per purpose (a queue of texts or callables; a
`Cut` text comes back as a reply stopped at its output cap).
"""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from src.providers.costs import CostLedger
from src.providers.llm import META_SYSTEM, LLMRequest, ResilientLanguageModel
from src.providers.protocols import LLMResult
from src.providers.resilience import CircuitBreaker, Resilience, RetryPolicy
from src.providers.settings import LLMSettings, ProvidersSettings
from tests.providers.fakes import Sleeps

_ID = re.compile(r"\[(\d+)\]")
#: The default Phase 2 answer: shares most words with the deployment memories it cites.
INSIGHT = "Small projects deploy with one simple shell script, not kubernetes."


@dataclass(frozen=True)
class Cut:
    """A scripted answer the endpoint stopped at its output cap (finish_reason "length")."""

    text: str


def ids_in(text: str) -> list[int]:
    return [int(x) for x in _ID.findall(text)]


@dataclass
class ConsolidationModel:
    """LLMBackend fake. `requests` holds (purpose-less) requests in order; see `seen`."""

    provider: str = "scripted"
    model: str = "scripted-consolidation"
    requests: list[LLMRequest] = field(default_factory=list)
    script: dict[str, deque] = field(default_factory=lambda: defaultdict(deque))
    tension_contradicts: bool = True
    on_request: Callable[[LLMRequest], None] | None = None

    def push(self, kind: str, *answers) -> ConsolidationModel:
        self.script[kind].extend(answers)
        return self

    def kinds(self) -> list[str]:
        return [self.kind_of(r) for r in self.requests]

    @staticmethod
    def kind_of(request: LLMRequest) -> str:
        text = request.messages[0].content
        for marker, kind in (("Stored insight:\n", "reconsolidation"),
                             ("Some of them changed since the insight was formed", "reevaluation"),
                             ("give a short context (WHO, WHEN, WHY)", "contextual"),
                             ("most salient high-level questions", "questions"), ("Question: ", "insights"),
                             ("Each cluster below", "merge"), ("causal narrative", "narrative"),
                             ("claims to value", "tension"), ("Rewrite the one-line summary", "recompress")):
            if marker in text:
                return kind
        raise AssertionError(f"unexpected consolidation prompt: {text[:200]}")

    async def complete(self, request: LLMRequest) -> LLMResult:
        # what every consolidation call must look like: isolated, JSON, with the schema
        assert request.system is not None and request.system.startswith(META_SYSTEM), request.system
        assert "JSON Schema" in request.system
        assert request.json_mode is True
        assert request.messages[0].role == "user"
        assert len(request.messages) in (1, 3), "a meta call carries no history (3 = repair round)"
        self.requests.append(request)
        if self.on_request is not None:
            self.on_request(request)
        kind = self.kind_of(request)
        if self.script[kind]:
            answer = self.script[kind].popleft()
            text = answer(request) if callable(answer) else answer
        else:
            text = json.dumps(getattr(self, f"_{kind}")(request.messages[0].content))
        if isinstance(text, Cut):          # a reply the endpoint stopped at max_tokens
            return LLMResult(text.text, self.model, self.provider, 100, request.max_tokens, 1.0,
                             finish_reason="length")
        return LLMResult(text, self.model, self.provider, 100, 20, 1.0)

    async def aclose(self) -> None:
        return None

    # default answers, built from what the prompt contains
    def _questions(self, prompt: str) -> dict:
        assert ids_in(prompt), "phase 1 must show the recent memories with their ids"
        return {"questions": ["How does the agent deploy its projects?"]}

    def _insights(self, prompt: str) -> dict:
        ids = ids_in(prompt)
        assert prompt.startswith("Question: How does the agent deploy its projects?")
        # an insight that rests on what it cites (integrity.screen: relevant, not a copy)
        return {"insights": [{"insight": INSIGHT, "cited_ids": ids[:3]}]}

    def _merge(self, prompt: str) -> dict:
        clusters = re.findall(r"Cluster (\d+):((?:\n  \[\d+\].*)+)", prompt)
        assert clusters, prompt

        def insight(n: str, body: str) -> str:
            # a well-behaved model keeps the numbers its memories state (validate_merge checks)
            numbers = dict.fromkeys(re.findall(r"\b\d+\b", _ID.sub("", body)))
            return f"Simple tooling wins, cluster {n} (notes {', '.join(numbers)})." if numbers \
                else f"Simple tooling wins, cluster {n}."

        return {"insights": [{"cluster": int(n), "insight": insight(n, body), "cited_ids": ids_in(body)}
                             for n, body in clusters]}

    def _narrative(self, prompt: str) -> dict:
        ids = [int(x) for x in re.findall(r"Insight \[(\d+)\]", prompt)]
        return {"narratives": [{"insight_id": i, "narrative": "I came to value simple tools because every "
                                "script I kept small kept working."} for i in ids]}

    def _tension(self, prompt: str) -> dict:
        ids = ids_in(prompt)
        if self.tension_contradicts:
            return {"contradicts": True, "contradicting_ids": ids[:1], "aligned_ids": [],
                    "explanation": "I told the user a build passed without running it."}
        return {"contradicts": False, "contradicting_ids": [], "aligned_ids": ids, "explanation": ""}

    # part 2 (issue 14): reconsolidation, re-evaluation, contextual retrieval
    def _reconsolidation(self, prompt: str) -> dict:
        return {"verdict": "productive_contradiction", "insight": "", "explanation": "both can hold"}

    def _reevaluation(self, prompt: str) -> dict:
        assert "The memories it was drawn from, as they stand now:" in prompt
        return {"verdict": "keep", "insight": "", "explanation": "it still holds"}

    def _contextual(self, prompt: str) -> dict:
        ids = [int(x) for x in re.findall(r'<memory id="(\d+)"', prompt)]
        assert ids, prompt
        return {"contexts": [{"id": i, "context": f"Said during a deployment chat (memory {i})."} for i in ids]}

    def _recompress(self, prompt: str) -> dict:
        ids = [int(x) for x in re.findall(r"Memory \[(\d+)\]", prompt)]
        return {"items": [{"id": i, "compressed": f"values simple, pragmatic tooling ({i})"} for i in ids]}


def language_model(backend: ConsolidationModel, pool, session_id: str = "test-consolidation") -> ResilientLanguageModel:
    """The production wrapper over the fake backend, writing real llm_calls rows."""
    ledger = CostLedger(pool, session_id=session_id, prices=ProvidersSettings().prices)
    resilience = Resilience(RetryPolicy(timeout_s=5, max_attempts=1), CircuitBreaker(backend.provider, 50, 30.0),
                            sleep=Sleeps(), rng=random.Random(1))
    return ResilientLanguageModel(backend, resilience=resilience, ledger=ledger,
                                  settings=LLMSettings(max_output_tokens=512, request_logprobs=False))
