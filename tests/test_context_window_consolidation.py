"""The deep pass and skill drafting cut what they send to the model's window (issue 27 item 3).

In the run that filed issue 27 the contextual phase overflowed a 4,096-token window every
time. Here the scripted consolidation model (tests/consolidation_fakes.py) sits behind a
backend that measures each request as llama.cpp would (ChatML, Llama 2's tokenizer: not
our count) and refuses what does not fit; the wrapper above it is the production
ResilientLanguageModel with the known window of an OpenAI-compatible endpoint (4,096).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from src.consolidation.deep.deep_pass import DEEP_PHASES, ConsolidationParts, run_deep_pass
from src.consolidation.settings import ConsolidationSettings
from src.errors import ProviderRejected
from src.providers.llm import LLMRequest
from src.providers.protocols import LLMResult
from src.recall.store import MemoryStore, NewMemory
from src.skills.drafting import save_from_conversation
from src.weights.safety import Safety
from tests.consolidation_fakes import ConsolidationModel, ids_in, language_model
from tests.context_window_fakes import FakeLlamaServer, chatml
from tests.fakes import HashEmbedder

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
NOTE = ("Deployment note {i}: I ship the small service for the harbour office with one shell script; "
        "the staging box restarts at night and the tide tables are refreshed before the fishermen ask. ")


@dataclass
class Measured:
    """LLMBackend: measures each request as the endpoint would, refuses one that does not fit,
    and reports the endpoint's count as the reply's usage."""

    inner: object
    server: FakeLlamaServer = field(default_factory=FakeLlamaServer)
    provider: str = "openai_compat"
    model: str = "qwen2.5-1.5b-instruct"
    prompts: list[tuple[int, int, str]] = field(default_factory=list)

    async def complete(self, request: LLMRequest) -> LLMResult:
        chat = ([{"role": "system", "content": request.system}] if request.system else []) + [
            {"role": m.role, "content": m.content} for m in request.messages]
        prompt = self.server.tokens(chatml(chat))
        self.prompts.append((prompt, request.max_tokens, request.messages[0].content))
        if prompt >= self.server.n_ctx:
            raise ProviderRejected(f"HTTP 400: request ({prompt} tokens) exceeds the available context size "
                                   f"({self.server.n_ctx} tokens), try increasing it", provider=self.provider)
        result = await self.inner.complete(request)
        return replace(result, tokens_in=prompt)

    async def aclose(self) -> None:
        return None


async def test_questions_and_contextual_retrieval_ask_within_a_4096_token_window(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    await store.store_many([NewMemory(NOTE.format(i=i) * 3) for i in range(120)])
    backend = Measured(ConsolidationModel())
    llm = language_model(backend, pool)
    assert llm.window.tokens == 4096
    phases = [p for p in DEEP_PHASES if p.name in ("questions", "contextual")]
    report = await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=llm, safety=Safety(),
                                                    settings=ConsolidationSettings()),
                                 trigger="manual", now=NOW, rng=random.Random(3), phases=phases)
    assert report is not None and report.status == "done"
    assert backend.prompts and all(prompt < 4096 for prompt, _, _ in backend.prompts)
    assert all(prompt + reply <= 4096 for prompt, reply, _ in backend.prompts)     # the reply had its room
    kinds = [ConsolidationModel.kind_of(r) for r in backend.inner.requests]
    [questions] = [text for _, _, text in backend.prompts if "most salient high-level questions" in text]
    assert 3 <= len(ids_in(questions)) < 100      # the newest memories the window holds, not all 100
    assert "contextual" in kinds
    contextualized = await pool.fetchval("SELECT count(*) FROM memories WHERE content_contextualized IS NOT NULL")
    assert contextualized > 0
    failures = await pool.fetch("SELECT error FROM consolidation_failures")
    assert not [f for f in failures if "context window" in f["error"]]


@dataclass
class Drafter:
    """The drafting model: records what it is sent, answers a SkillDraft."""

    sent: list[str] = field(default_factory=list)

    async def complete(self, request: LLMRequest) -> LLMResult:
        self.sent.append(request.messages[0].content)
        text = ('{"label": "harbour-deploy", "name": "Harbour deploy", "when_to_use": "shipping the service", '
                '"procedure": "1. Run the script."}')
        return LLMResult(text, "qwen2.5-1.5b-instruct", "openai_compat", 0, 20, 1.0)


@dataclass(frozen=True)
class Said:
    role: str
    content: str


async def test_skill_drafting_sends_the_newest_messages_the_window_holds(pool):
    drafter = Drafter()
    backend = Measured(drafter)
    conversation = [Said("user" if i % 2 == 0 else "assistant", f"step {i}: " + NOTE.format(i=i) * 4)
                    for i in range(20)]
    skill, _ = await save_from_conversation(pool, language_model(backend, pool), conversation, max_messages=20,
                                         message_chars=2000)
    assert skill.name == "Harbour deploy"
    [sent] = drafter.sent
    assert "step 19:" in sent and "step 0:" not in sent          # the newest, as many as fit
    assert all(prompt + reply <= 4096 for prompt, reply, _ in backend.prompts)
