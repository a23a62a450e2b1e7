"""Which provider fills each role, and why — decided once, from settings and secrets.

Pure apart from looking at files (FlashRank's model folder, WordLlama's weights), so the
start-up report (`describe_providers`) and the factory always agree. An explicit choice
that cannot be honoured (provider 'gemini' without GEMINI_API_KEY, 'openai_compat'
without a base_url) is a ConfigError naming the key and the fix; `auto` degrades instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

import httpx2

from src.errors import ConfigError
from src.providers.embed_minilm import DIM as MINILM_DIM
from src.providers.embed_minilm import MODEL_NAME as MINILM
from src.providers.embed_minilm import minilm_files
from src.providers.embed_wordllama import wordllama_model_name, wordllama_weights
from src.providers.llm_reflex import NO_LANGUAGE_MODEL
from src.providers.rerank_fetch import FETCH_HINT
from src.providers.rerank_flashrank import flashrank_missing
from src.providers.settings import ProvidersSettings, Secrets

Role = Literal["embeddings", "reranker", "system1", "system2"]
GEMINI_KEY, ANTHROPIC_KEY = "GEMINI_API_KEY", "ANTHROPIC_API_KEY"


@dataclass(frozen=True)
class Choice:
    role: Role
    kind: str  # gemini | wordllama | minilm | flashrank | none | anthropic | openai_compat | reflex
    model: str | None
    reason: str
    # How to get what is missing: said once at start-up, not with every use of `reason`
    # (the skipped reranker repeats its reason on every /memory).
    hint: str = ""

    @property
    def line(self) -> str:
        """One line of the start-up report; never contains a secret."""
        what = f"{self.kind} {self.model}" if self.model else self.kind
        return f"{self.role}: {what} ({self.reason}{'; ' + self.hint if self.hint else ''})"


def _present(secret: object) -> bool:
    return secret is not None and bool(secret.get_secret_value())  # type: ignore[attr-defined]


def public_url(url: str) -> str:
    """A base URL fit for a log line: user:password@ removed."""
    try:
        return str(httpx2.URL(url).copy_with(userinfo=b""))
    except (httpx2.InvalidURL, TypeError, ValueError):
        return "(unparseable URL)"


def _endpoint_url(settings: ProvidersSettings, own: str | None, section: str) -> str:
    """A model server's base URL: the section's own, else providers.llm.base_url."""
    url = own or settings.llm.base_url
    if not url:
        raise ConfigError(f"providers.{section}.base_url is not set (nor providers.llm.base_url); set it to "
                          "your server, e.g. http://127.0.0.1:8081")
    return url


def _embeddings_endpoint(settings: ProvidersSettings) -> Choice:
    emb = settings.embeddings
    url = _endpoint_url(settings, emb.base_url, "embeddings")
    if not emb.openai_model:
        raise ConfigError("providers.embeddings.openai_model is not set; name the embedding model your "
                          "server serves, e.g. nomic-embed-text")
    return Choice("embeddings", "openai_compat", emb.openai_model,
                  f"embeddings from {public_url(url)}; wider vectors cut to {emb.dimensions} "
                  f"(Matryoshka), narrower zero-padded")


def choose_embeddings(settings: ProvidersSettings, secrets: Secrets) -> Choice:
    emb = settings.embeddings
    if emb.provider == "openai_compat":
        return _embeddings_endpoint(settings)
    has_key = _present(secrets.gemini_api_key)
    if emb.provider == "gemini" and not has_key:
        raise ConfigError(f"providers.embeddings.provider is 'gemini' but {GEMINI_KEY} is not set; "
                          "set it in the environment or use 'auto' or 'wordllama'")
    if emb.provider in ("gemini", "auto") and has_key:
        return Choice("embeddings", "gemini", emb.gemini_model, f"{GEMINI_KEY} found")
    if emb.provider == "minilm" or (emb.provider == "auto" and emb.offline == "minilm"):
        files = minilm_files()
        if isinstance(files, str):
            raise ConfigError(f"providers.embeddings: the offline MiniLM model cannot be used: {files}")
        why = "chosen in runtime.yaml" if emb.provider == "minilm" else f"{GEMINI_KEY} not set"
        return Choice("embeddings", "minilm", MINILM, f"{why}; offline, {MINILM_DIM}-d zero-padded to {emb.dimensions}")
    weights = wordllama_weights(emb.wordllama_config, emb.wordllama_dim)
    if not weights.is_file():
        raise ConfigError(f"providers.embeddings: wordllama weights missing: {weights}; "
                          "check providers.embeddings.wordllama_config/wordllama_dim or reinstall wordllama")
    why = "chosen in runtime.yaml" if emb.provider == "wordllama" else f"{GEMINI_KEY} not set"
    return Choice("embeddings", "wordllama", wordllama_model_name(emb.wordllama_config, emb.wordllama_dim),
                  f"{why}; offline, {emb.wordllama_dim}-d zero-padded to {emb.dimensions}")


def choose_reranker(settings: ProvidersSettings) -> Choice:
    rr = settings.rerank
    if rr.provider == "none":
        return Choice("reranker", "none", None, "disabled in runtime.yaml; final score = weighted score")
    if rr.provider == "endpoint":
        url = _endpoint_url(settings, rr.base_url, "rerank")
        if rr.dialect == "jina" and not rr.endpoint_model:
            raise ConfigError("providers.rerank.endpoint_model is not set; the jina dialect names the "
                              "reranking model, e.g. bge-reranker-v2-m3")
        return Choice("reranker", "endpoint", rr.endpoint_model or rr.dialect,
                      f"{rr.dialect} dialect at {public_url(url)}")
    missing = flashrank_missing(rr.cache_dir, rr.model)
    if missing is not None:
        return Choice("reranker", "none", None, f"{missing}; rerank stage skipped",
                      hint=FETCH_HINT if missing.startswith("model folder") else "")
    return Choice("reranker", "flashrank", rr.model,
                  f"model folder found: {os.path.join(rr.cache_dir, rr.model)}")


def _openai_compat(settings: ProvidersSettings, role: Role) -> Choice:
    llm = settings.llm
    if not llm.base_url:
        raise ConfigError("providers.llm.provider is 'openai_compat' but providers.llm.base_url is not set; "
                          "set it to your endpoint, e.g. http://localhost:11434/v1")
    if not llm.openai_model:
        raise ConfigError("providers.llm.openai_model is not set; name the model your endpoint serves, "
                          "e.g. llama3.2")
    return Choice(role, "openai_compat", llm.openai_model, f"llm.base_url = {public_url(llm.base_url)}")


def _choose_llm(settings: ProvidersSettings, secrets: Secrets, role: Role) -> Choice:
    llm = settings.llm
    if role == "system1":
        kind, model, key, secret = "gemini", llm.system1_model, GEMINI_KEY, secrets.gemini_api_key
    else:
        kind, model, key, secret = "anthropic", llm.system2_model, ANTHROPIC_KEY, secrets.anthropic_api_key
    if llm.provider == "reflex":
        return Choice(role, "reflex", None, f"{NO_LANGUAGE_MODEL}: llm.provider is 'reflex'")
    if llm.provider == "openai_compat":
        return _openai_compat(settings, role)
    if _present(secret):
        return Choice(role, kind, model, f"{key} found")
    if llm.provider == "auto" and llm.base_url:
        return _openai_compat(settings, role)
    missing = f"{key} not set" + (", llm.base_url not set" if llm.provider == "auto" else "")
    return Choice(role, "reflex", None, f"{NO_LANGUAGE_MODEL}: {missing}")


def choose_all(settings: ProvidersSettings, secrets: Secrets) -> list[Choice]:
    """The provider for each role: embeddings, reranker, system1, system2."""
    return [choose_embeddings(settings, secrets), choose_reranker(settings),
            _choose_llm(settings, secrets, "system1"), _choose_llm(settings, secrets, "system2")]


def describe_providers(settings: ProvidersSettings, secrets: Secrets) -> list[str]:
    """The start-up report: one line per role saying which provider is active and why."""
    return [choice.line for choice in choose_all(settings, secrets)]
