"""Settings of the outside capabilities (embeddings, reranker, language models, prices).

Part of runtime.yaml under `providers:`; composed into `src.config.Settings`.
`auto` picks the cloud provider when its API key is present, else the offline one.
Every field has a default, so an empty runtime.yaml works.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EmbeddingSettings(_Section):
    # auto | gemini | wordllama | minilm | openai_compat  (auto: gemini when GEMINI_API_KEY is
    # set, else `offline`; openai_compat: the server at `base_url`, src/providers/embed_endpoint.py)
    provider: Literal["auto", "gemini", "wordllama", "minilm", "openai_compat"] = "auto"
    # what `auto` uses without GEMINI_API_KEY: minilm (a small sentence transformer: finds
    # facts asked in other words, ~100 texts a second; src/providers/embed_minilm.py) or
    # wordllama (static word vectors, thousands of texts a second, weak on paraphrase; notes.md)
    offline: Literal["wordllama", "minilm"] = "minilm"
    gemini_model: str = "gemini-embedding-001"
    # Width of the `halfvec(768)` column (sql/001); smaller embeddings are zero-padded to it.
    # Fixed: another width would store every memory without a vector. Changing it is a
    # migration, not a setting.
    dimensions: Literal[768] = 768
    # Gemini accepts at most 100 texts per batchEmbedContents call.
    batch_size: int = Field(100, ge=1, le=100)
    # The offline model ships inside the wordllama wheel as weights/<config>_<dim>.safetensors.
    wordllama_config: str = "l2_supercat"
    wordllama_dim: Literal[64, 128, 256, 512, 1024] = 256
    # Bounded work per input (issue 11): Gemini's embedding models take at most 2,048 input
    # tokens (documented limit); text past it is cut before it is sent. wordllama truncates
    # its tokens at `wordllama_max_tokens` (average pooling: the opening carries the meaning),
    # so a megabyte line never pads a batch to a megabyte.
    gemini_max_input_tokens: int = Field(2048, ge=16)
    wordllama_max_tokens: int = Field(2048, ge=16)
    # OpenAI-compatible embeddings server (Ollama, llama.cpp `--embedding`, vLLM, TEI): its root
    # or its /v1 URL, e.g. http://127.0.0.1:8081; null: providers.llm.base_url. OPENAI_API_KEY,
    # when set, is sent as a bearer token.
    base_url: str | None = None
    openai_model: str | None = None   # the embedding model that server serves; it tags every vector
    # Texts per POST /v1/embeddings: TEI refuses more than 32 by default (--max-client-batch-size)
    openai_batch_size: int = Field(32, ge=1, le=2048)
    # seconds one request may take (a CPU server embeds a batch in seconds, not milliseconds)
    openai_timeout_s: float = Field(120.0, gt=0)
    # Characters of each text sent: llama.cpp's server refuses an input longer than its
    # physical batch (-ub, 512 tokens by default) with HTTP 500, so the text is cut first
    openai_max_input_chars: int = Field(1500, ge=16)
    # Text put before each input, per task type, for models trained with instructions
    # (nomic-embed-text: {RETRIEVAL_QUERY: "search_query: ", RETRIEVAL_DOCUMENT: "search_document: "})
    openai_task_prefixes: dict[Literal["RETRIEVAL_DOCUMENT", "RETRIEVAL_QUERY", "SEMANTIC_SIMILARITY",
                                       "CLUSTERING"], str] = Field(default_factory=dict)


class RerankSettings(_Section):
    # auto | flashrank | endpoint | none  (auto: flashrank when the model folder exists;
    # endpoint: a rerank server at `base_url`, src/providers/rerank_endpoint.py)
    provider: Literal["auto", "flashrank", "endpoint", "none"] = "auto"
    model: str = "ms-marco-MiniLM-L-12-v2"
    # FlashRank reads <cache_dir>/<model>/; it is never downloaded at run time.
    cache_dir: str = "./data/models/flashrank"
    max_length: int = Field(512, ge=16, le=4096)
    # The rerank server's root or /v1 URL; null: providers.llm.base_url. OPENAI_API_KEY, when
    # set, is sent as a bearer token.
    base_url: str | None = None
    # jina: POST /v1/rerank {model, query, documents} (llama.cpp --reranking, vLLM, Jina);
    # tei: POST /rerank {query, texts} (text-embeddings-inference)
    dialect: Literal["jina", "tei"] = "jina"
    endpoint_model: str | None = None   # the model name the jina dialect sends (TEI serves one)
    # true: the server returns raw logits (llama.cpp's server does): squashed by a sigmoid
    # into [0, 1]. false: a score outside [0, 1] is refused, naming this setting
    endpoint_logits: bool = False
    endpoint_batch_size: int = Field(32, ge=1, le=1024)   # passages per request (TEI's default cap: 32)
    endpoint_timeout_s: float = Field(60.0, gt=0)   # seconds one rerank request may take


LLMKind = Literal["gemini", "anthropic", "openai_compat"]
# One attempt's timeout per provider kind: a cloud model answers in seconds, a small local
# model on a CPU can take minutes for a full window and a long answer (notes.md "timings").
DEFAULT_LLM_TIMEOUT_S: dict[str, float] = {"gemini": 30.0, "anthropic": 60.0, "openai_compat": 300.0}
# A local server with more slots splits its context between them (llama.cpp: HTTP 500
# "Context size has been exceeded" with 4 slots and parallel requests, issue 27).
DEFAULT_LLM_CONCURRENCY: dict[str, int] = {"gemini": 8, "anthropic": 4, "openai_compat": 1}


class ContextWindows(_Section):
    """Each system's context window in tokens (one number sets both). Null: ask an
    OpenAI-compatible endpoint (llama.cpp /props, Ollama /api/show, vLLM /v1/models; once at
    start), else the provider's known window (src/providers/context_window.py)."""

    system1: int | None = Field(None, ge=256)
    system2: int | None = Field(None, ge=256)

    @model_validator(mode="before")
    @classmethod
    def _one_for_both(cls, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):
            return {"system1": value, "system2": value}
        return value


class LLMSettings(_Section):
    """The language models (plan §2.1): System 1 answers every turn, System 2 takes over when
    metacognition escalates (src/providers/selection.py says which provider fills each role)."""

    # auto (the API keys that are set; reflex without any) | cloud | openai_compat | reflex
    provider: Literal["auto", "cloud", "openai_compat", "reflex"] = "auto"
    system1_model: str = "gemini-2.5-flash-lite"   # the fast model of every turn (Gemini with a key)
    system2_model: str = "claude-sonnet-4-5"       # the careful model of an escalation (Anthropic with a key)
    # OpenAI-compatible chat endpoint (Ollama, llama.cpp, vLLM), e.g. http://localhost:11434/v1
    base_url: str | None = None
    openai_model: str | None = None   # the model name that endpoint serves (Ollama: its tag)
    # At most a quarter of the model's context window (capped at start).
    max_output_tokens: int = Field(1024, ge=1)
    context_window: ContextWindows = ContextWindows()
    context_probe_timeout_s: float = Field(3.0, gt=0)
    # Our token counts (cl100k-like) times this until the endpoint's own counts are known:
    # a 32k-vocabulary tokenizer (Llama 2, Mistral) counts up to 1.39x ours (notes.md).
    token_margin: float = Field(1.3, ge=1, le=3)
    # None: the provider's default sampling temperature.
    temperature: float | None = Field(None, ge=0, le=2)
    # Ask for token logprobs (plan §2.11). A model that refuses them (HTTP 400) is
    # remembered and asked without them from then on.
    request_logprobs: bool = True
    # Alternatives per token (Gemini `logprobs`, OpenAI `top_logprobs`); 0 = chosen tokens only.
    top_logprobs: int = Field(0, ge=0, le=20)
    # Timing per provider kind (issue 27, notes.md "timings"): seconds one attempt may take (a
    # cloud API answers in seconds, a small model on a CPU needs minutes for a long prompt), and
    # requests in flight per endpoint (a local server with one slot answers one at a time).
    # A number sets every kind; a mapping is merged over these defaults.
    timeout_s: dict[LLMKind, float] = Field(default_factory=lambda: dict(DEFAULT_LLM_TIMEOUT_S))
    max_concurrency: dict[LLMKind, int] = Field(default_factory=lambda: dict(DEFAULT_LLM_CONCURRENCY))

    @field_validator("timeout_s", "max_concurrency", mode="before")
    @classmethod
    def _per_kind(cls, value: object, info) -> object:
        defaults = DEFAULT_LLM_TIMEOUT_S if info.field_name == "timeout_s" else DEFAULT_LLM_CONCURRENCY
        if isinstance(value, int | float) and not isinstance(value, bool):
            return dict.fromkeys(defaults, value)
        if isinstance(value, dict):
            return {**defaults, **value}
        return value

    @field_validator("timeout_s", "max_concurrency")
    @classmethod
    def _positive(cls, value: dict, info) -> dict:
        for kind, number in value.items():
            if number <= 0:
                raise ValueError(f"providers.llm.{info.field_name}.{kind} must be > 0, got {number!r}")
        return value

    def timeout_for(self, kind: str) -> float:
        """Seconds one attempt to a model of this provider kind may take."""
        return self.timeout_s.get(kind, DEFAULT_LLM_TIMEOUT_S["gemini"])  # type: ignore[call-overload]

    def concurrency_for(self, kind: str) -> int:
        """Requests in flight at once to this provider kind's endpoint."""
        return self.max_concurrency.get(kind, 1)  # type: ignore[call-overload]


class ModelPrice(_Section):
    """US dollars per million tokens."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


def _default_prices() -> dict[str, ModelPrice]:
    return {
        "gemini-2.5-flash-lite": ModelPrice(input_per_mtok=0.10, output_per_mtok=0.40),
        "claude-sonnet-4-5": ModelPrice(input_per_mtok=3.00, output_per_mtok=15.00),
        "gemini-embedding-001": ModelPrice(input_per_mtok=0.15, output_per_mtok=0.0),
    }


class ResilienceSettings(_Section):
    # embeddings; language models: llm.timeout_s
    timeout_s: float = Field(30.0, gt=0)
    max_attempts: int = Field(4, ge=1, le=10)
    backoff_base_s: float = Field(0.5, ge=0)
    backoff_max_s: float = Field(20.0, ge=0)
    breaker_failures: int = Field(5, ge=1)
    # then one trial call (half-open)
    breaker_reset_s: float = Field(30.0, gt=0)


class LedgerSettings(_Section):
    # Rows kept in memory while the database refuses writes; the oldest are dropped beyond this.
    max_pending: int = Field(1000, ge=1)
    # Longest wait for a pool connection and the insert, so a stuck database cannot stall a call.
    write_timeout_s: float = Field(5.0, gt=0)


class Secrets(_Section):
    """Only ever filled from the environment; never logged, never stored."""

    gemini_api_key: SecretStr | None = None
    anthropic_api_key: SecretStr | None = None
    openai_api_key: SecretStr | None = None


class BudgetSettings(_Section):
    """What the mind's own work may spend on models (runtime.yaml `providers.budget:`; issue 24).

    Internal work is the DMN's and the gut's impulses ("idle thought") and consolidation
    (passes, the light ticker, the cycles its announcements cause). Both limits are rolling
    windows; the user's turns never wait for them. Defaults and their reasoning: notes.md
    ("background budget"): an idle night of 8 hours spends at most 8 × `hourly_calls`
    calls (about 3.5 conversations of 20 turns) and never more than `daily_cost_usd`.
    """

    # false: internal work is not limited (the user's turns never wait for it either way)
    enabled: bool = True
    # model calls (embedding rows not counted) by internal work in the last hour
    hourly_calls: int = Field(20, ge=0)
    # the share of those idle thought may take, so the DMN never starves consolidation
    idle_share: float = Field(0.5, ge=0, le=1)
    # US dollars internal work may spend in the last 24 hours (embeddings included)
    daily_cost_usd: float = Field(0.25, ge=0)


class ProvidersSettings(_Section):
    embeddings: EmbeddingSettings = EmbeddingSettings()
    rerank: RerankSettings = RerankSettings()
    llm: LLMSettings = LLMSettings()
    resilience: ResilienceSettings = ResilienceSettings()
    ledger: LedgerSettings = LedgerSettings()
    budget: BudgetSettings = BudgetSettings()   # what the mind's own work may spend (src/providers/budget.py)
    # USD per million tokens; entries here are merged over the defaults
    prices: dict[str, ModelPrice] = Field(default_factory=_default_prices)

    @field_validator("prices", mode="before")
    @classmethod
    def _merge_default_prices(cls, value: object) -> object:
        # Pricing one model in runtime.yaml must not silently zero the cost of the others.
        if isinstance(value, dict):
            return {**_default_prices(), **value}
        return value
