"""System 1 backend: Gemini (`gemini-2.5-flash-lite`) through google-genai's async client.

Logprobs: GenerateContentConfig has `response_logprobs` (chosen-token log probabilities)
and `logprobs` (top-k alternatives, 1-20); the reply carries them in
`candidates[0].logprobs_result.chosen_candidates`. Whether a model returns them depends on
the model and the API (see notes.md); the wrapper turns them off after a 400 that says so.
"""

from __future__ import annotations

from google import genai
from google.genai import types as genai_types

from src.errors import MalformedOutput, ProviderRejected
from src.providers.gemini_errors import PROVIDER, map_gemini_error
from src.providers.llm import LLMRequest
from src.providers.protocols import LLMResult, TokenLogprob

# Finish reasons that mean "refused", not "broken": retrying the same prompt will not help.
_REFUSALS = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE"}


class GeminiBackend:
    """One generateContent call per `complete`."""

    provider = PROVIDER

    def __init__(self, client: genai.Client, model: str = "gemini-2.5-flash-lite", *,
                 owns_client: bool = False):
        self._client = client
        self.model = model
        self._owns_client = owns_client

    async def complete(self, request: LLMRequest) -> LLMResult:
        config = genai_types.GenerateContentConfig(
            system_instruction=request.system,
            max_output_tokens=request.max_tokens,
            temperature=request.temperature,
            response_logprobs=True if request.logprobs else None,
            logprobs=request.top_logprobs if request.logprobs and request.top_logprobs else None,
            response_mime_type="application/json" if request.json_mode else None,
            response_json_schema=(dict(request.response_schema.schema)
                                  if request.json_mode and request.response_schema else None),
            # We register no Python tools; this also silences the SDK's per-call AFC log line.
            automatic_function_calling=genai_types.AutomaticFunctionCallingConfig(disable=True),
        )
        contents = [
            genai_types.Content(role="user" if m.role == "user" else "model",
                                parts=[genai_types.Part(text=m.text)])
            for m in request.messages
        ]
        try:
            response = await self._client.aio.models.generate_content(
                model=self.model, contents=contents, config=config)
        except Exception as exc:  # noqa: BLE001 - mapped in one place, raised typed
            raise map_gemini_error(exc) from exc
        return self._parse(response)

    def _parse(self, response: genai_types.GenerateContentResponse) -> LLMResult:
        candidates = response.candidates or []
        if not candidates:
            feedback = response.prompt_feedback
            if feedback is not None and feedback.block_reason is not None:
                raise ProviderRejected(f"gemini blocked the prompt ({_name(feedback.block_reason)})",
                                       provider=PROVIDER)
            raise MalformedOutput("gemini returned no candidates", provider=PROVIDER)
        candidate = candidates[0]
        parts = candidate.content.parts if candidate.content and candidate.content.parts else []
        text = "".join(p.text for p in parts if p.text and not p.thought)
        finish = _name(candidate.finish_reason) if candidate.finish_reason is not None else None
        if not text:
            if finish in _REFUSALS:
                raise ProviderRejected(f"gemini declined to answer (finish reason {finish})",
                                       provider=PROVIDER)
            raise MalformedOutput(f"gemini returned an empty reply (finish reason {finish})",
                                  provider=PROVIDER)
        usage = response.usage_metadata
        if usage is None or usage.prompt_token_count is None:
            raise MalformedOutput("gemini reply has no usage metadata", provider=PROVIDER)
        # Thinking tokens are billed as output.
        tokens_out = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
        return LLMResult(text=text, model=self.model, provider=PROVIDER,
                         tokens_in=usage.prompt_token_count, tokens_out=tokens_out, latency_ms=0.0,
                         logprobs=_logprobs(candidate), finish_reason=finish)

    async def aclose(self) -> None:
        """Close the client if this backend created it (the factory shares one per provider)."""
        if self._owns_client:
            await self._client.aio.aclose()


def _name(value: object) -> str:
    return getattr(value, "value", None) or str(value)


def _logprobs(candidate: genai_types.Candidate) -> tuple[TokenLogprob, ...] | None:
    result = candidate.logprobs_result
    if result is None or not result.chosen_candidates:
        return None
    return tuple(TokenLogprob(c.token or "", float(c.log_probability))
                 for c in result.chosen_candidates if c.log_probability is not None)

