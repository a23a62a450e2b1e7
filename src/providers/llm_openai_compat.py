"""Backend for any OpenAI-compatible chat endpoint (Ollama, llama.cpp server, vLLM).

Speaks `POST {base_url}/chat/completions` with httpx2, the HTTP client already in the
dependency tree (both cloud SDKs depend on it). `OPENAI_API_KEY`, when set, is sent as a
bearer token; local servers usually need none. Errors are mapped here, through the shared
httpx2 table and the status mapping.
"""

from __future__ import annotations

import json

import httpx2
from pydantic import SecretStr

from src.errors import MalformedOutput, ProviderError, ProviderRejected
from src.providers.http_errors import HTTPX2_ERRORS, from_status, map_with, parse_retry_after
from src.providers.llm import LLMRequest
from src.providers.protocols import LLMResult, TokenLogprob
from src.providers.structured import ResponseSchema

PROVIDER = "openai_compat"
KEY_HINT = "OPENAI_API_KEY"


def map_openai_compat_error(exc: BaseException) -> ProviderError:
    """The MoltBot error for a transport or decoding failure talking to the endpoint."""
    return map_with((HTTPX2_ERRORS,), exc, PROVIDER)


def _error_detail(response: httpx2.Response) -> str:
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return response.text
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return str(err.get("message") or err)
        return str(err)
    return str(body)


class OpenAICompatBackend:
    """One chat/completions call per `complete`."""

    provider = PROVIDER

    def __init__(self, http: httpx2.AsyncClient, model: str, *, api_key: SecretStr | None = None,
                 owns_client: bool = True):
        self._http = http
        self.model = model
        # with provider and model, which model this is (System 2 = System 1? src/metacognition/roles.py)
        self.base_url = str(http.base_url)
        self._api_key = api_key
        self._owns_client = owns_client

    async def complete(self, request: LLMRequest) -> LLMResult:
        messages = [{"role": "system", "content": request.system}] if request.system else []
        messages += [{"role": m.role, "content": m.text} for m in request.messages]
        body: dict = {"model": self.model, "messages": messages, "max_tokens": request.max_tokens}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        body.update(_logprobs_fields(request))
        if request.json_mode:
            body["response_format"] = response_format(request.response_schema)
        headers = {}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        try:
            response = await self._http.post("chat/completions", json=body, headers=headers)
            if response.status_code >= 400:
                raise from_status(response.status_code, _error_detail(response), provider=PROVIDER,
                                  key_hint=KEY_HINT,
                                  retry_after=parse_retry_after(response.headers.get("retry-after")))
            data = response.json()
        except ProviderError:
            raise
        except Exception as exc:  # noqa: BLE001 - mapped in one place, raised typed
            raise map_openai_compat_error(exc) from exc
        return self._parse(data)

    def _parse(self, data: object) -> LLMResult:
        try:
            choice = data["choices"][0]  # type: ignore[index]
            text = choice["message"]["content"] or ""
            usage = data.get("usage") or {}  # type: ignore[union-attr]
            tokens_in, tokens_out = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise MalformedOutput(f"{PROVIDER} reply lacks choices[0].message.content or usage "
                                  f"({type(exc).__name__}: {exc})", provider=PROVIDER) from exc
        finish = choice.get("finish_reason")
        if finish == "content_filter":
            raise ProviderRejected(f"{PROVIDER} declined to answer (content filter)", provider=PROVIDER)
        if not text:
            raise MalformedOutput(f"{PROVIDER} returned an empty reply (finish reason {finish})",
                                  provider=PROVIDER)
        return LLMResult(text=text, model=self.model, provider=PROVIDER, tokens_in=tokens_in,
                         tokens_out=tokens_out, latency_ms=0.0, logprobs=_logprobs(choice),
                         finish_reason=finish)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._http.aclose()


def _logprobs_fields(request: LLMRequest) -> dict:
    """`logprobs: true` and `top_logprobs` (at least 1: llama.cpp's server returns no
    probabilities for 0, and 20 alternatives per token when the field is absent)."""
    if not request.logprobs:
        return {}
    return {"logprobs": True, "top_logprobs": max(1, request.top_logprobs)}


def response_format(schema: ResponseSchema | None) -> dict:
    """OpenAI's `json_schema` response format (llama.cpp's server builds a grammar from it,
    Ollama ≥ 0.5 a format); plain JSON mode without a schema."""
    if schema is None:
        return {"type": "json_object"}
    return {"type": "json_schema",
            "json_schema": {"name": schema.name, "schema": dict(schema.schema), "strict": schema.strict}}


def _logprobs(choice: dict) -> tuple[TokenLogprob, ...] | None:
    content = (choice.get("logprobs") or {}).get("content") if isinstance(choice.get("logprobs"), dict) else None
    if not content:
        return None
    return tuple(TokenLogprob(str(t.get("token", "")), float(t["logprob"]))
                 for t in content if isinstance(t, dict) and t.get("logprob") is not None)
