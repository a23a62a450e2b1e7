"""Settings of the outside capabilities (embeddings, reranker, language models, prices).

Part of runtime.yaml under `providers:`; composed into `src.config.Settings`.
`auto` picks the cloud provider when its API key is present, else the offline one.
Every field has a default, so an empty runtime.yaml works.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EmbeddingSettings(_Section):
    provider: Literal["auto", "gemini", "wordllama"] = "auto"
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


class RerankSettings(_Section):
    provider: Literal["auto", "flashrank", "none"] = "auto"
    model: str = "ms-marco-MiniLM-L-12-v2"
    # FlashRank reads <cache_dir>/<model>/; it is never downloaded at run time.
    cache_dir: str = "./data/models/flashrank"
    max_length: int = Field(512, ge=16, le=4096)


class LLMSettings(_Section):
    provider: Literal["auto", "cloud", "openai_compat", "reflex"] = "auto"
    system1_model: str = "gemini-2.5-flash-lite"
    system2_model: str = "claude-sonnet-4-5"
    # OpenAI-compatible chat endpoint (Ollama, llama.cpp, vLLM), e.g. http://localhost:11434/v1
    base_url: str | None = None
    openai_model: str | None = None
    max_output_tokens: int = Field(1024, ge=1)
    # None: the provider's default sampling temperature.
    temperature: float | None = Field(None, ge=0, le=2)
    # Ask for token logprobs (plan §2.11). A model that refuses them (HTTP 400) is
    # remembered and asked without them from then on.
    request_logprobs: bool = True
    # Alternatives per token (Gemini `logprobs`, OpenAI `top_logprobs`); 0 = chosen tokens only.
    top_logprobs: int = Field(0, ge=0, le=20)


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
    timeout_s: float = Field(30.0, gt=0)
    max_attempts: int = Field(4, ge=1, le=10)
    backoff_base_s: float = Field(0.5, ge=0)
    backoff_max_s: float = Field(20.0, ge=0)
    breaker_failures: int = Field(5, ge=1)
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


class ProvidersSettings(_Section):
    embeddings: EmbeddingSettings = EmbeddingSettings()
    rerank: RerankSettings = RerankSettings()
    llm: LLMSettings = LLMSettings()
    resilience: ResilienceSettings = ResilienceSettings()
    ledger: LedgerSettings = LedgerSettings()
    prices: dict[str, ModelPrice] = Field(default_factory=_default_prices)

    @field_validator("prices", mode="before")
    @classmethod
    def _merge_default_prices(cls, value: object) -> object:
        # Pricing one model in runtime.yaml must not silently zero the cost of the others.
        if isinstance(value, dict):
            return {**_default_prices(), **value}
        return value
