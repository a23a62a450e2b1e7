"""System 2 backend: Anthropic (`claude-sonnet-4-5`) through `AsyncAnthropic`.

The SDK's own retries are off (`max_retries=0` where the client is built): our resilience
policy is the only one. Anthropic returns no logprobs. The SDK accepts odd bodies without
complaint (a non-JSON body comes back as a plain string, an unexpected object as a Message
full of None), so the reply's shape is checked here.
"""

from __future__ import annotations

import anthropic
from anthropic.types import Message

from src.errors import MalformedOutput, ProviderRejected
from src.providers.anthropic_errors import PROVIDER, map_anthropic_error
from src.providers.llm import LLMRequest
from src.providers.protocols import LLMResult


class AnthropicBackend:
    """One messages.create call per `complete`."""

    provider = PROVIDER

    def __init__(self, client: anthropic.AsyncAnthropic, model: str = "claude-sonnet-4-5", *,
                 owns_client: bool = True):
        self._client = client
        self.model = model
        self._owns_client = owns_client

    async def complete(self, request: LLMRequest) -> LLMResult:
        kwargs: dict = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "messages": [{"role": m.role, "content": m.text} for m in request.messages],
        }
        if request.system:
            kwargs["system"] = request.system
        if request.temperature is not None:
            # Not a named parameter of this SDK version's create(); the API still accepts it.
            kwargs["extra_body"] = {"temperature": request.temperature}
        try:
            response = await self._client.messages.create(**kwargs)
        except Exception as exc:  # noqa: BLE001 - mapped in one place, raised typed
            raise map_anthropic_error(exc) from exc
        return self._parse(response)

    def _parse(self, response: object) -> LLMResult:
        if not isinstance(response, Message) or response.content is None or response.usage is None:
            raise MalformedOutput("anthropic sent a body that is not a message", provider=PROVIDER)
        text = "".join(getattr(block, "text", "") for block in response.content
                       if getattr(block, "type", None) == "text")
        if response.stop_reason == "refusal":
            raise ProviderRejected("anthropic declined to answer (stop reason refusal)", provider=PROVIDER)
        if not text:
            raise MalformedOutput(f"anthropic returned an empty reply (stop reason {response.stop_reason})",
                                  provider=PROVIDER)
        usage = response.usage
        tokens_in = (usage.input_tokens or 0) + (getattr(usage, "cache_creation_input_tokens", 0) or 0) \
            + (getattr(usage, "cache_read_input_tokens", 0) or 0)
        return LLMResult(text=text, model=self.model, provider=PROVIDER, tokens_in=tokens_in,
                         tokens_out=usage.output_tokens or 0, latency_ms=0.0, logprobs=None,
                         finish_reason=response.stop_reason)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.close()
