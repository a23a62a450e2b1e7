"""The one place google-genai exceptions become MoltBot errors.

google-genai raises `errors.ClientError` / `errors.ServerError` (subclasses of
`errors.APIError`, carrying `.code`) for HTTP errors, lets httpx2 transport errors and
`json.JSONDecodeError` (unreadable body) through, and has a few ValueError subclasses for
function calling. Every class exported by `google.genai.errors` has an entry below; a test
fails when a new one appears unmapped.
"""

from __future__ import annotations

import pydantic
from google.genai import errors as genai_errors

from src.errors import MalformedOutput, ProviderError, ProviderRejected, ProviderUnavailable
from src.providers.http_errors import (
    HTTPX2_ERRORS,
    Handler,
    from_status,
    map_with,
    parse_retry_after,
    says,
)

PROVIDER = "gemini"
KEY_HINT = "GEMINI_API_KEY"


def _retry_delay(exc: genai_errors.APIError) -> float | None:
    """Retry-After header, else the RetryInfo `retryDelay` ('37s') in the error details."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is not None:
        delay = parse_retry_after(headers.get("retry-after"))
        if delay is not None:
            return delay
    details = exc.details.get("error", exc.details) if isinstance(exc.details, dict) else {}
    for item in details.get("details", []) if isinstance(details, dict) else []:
        if isinstance(item, dict) and "retryDelay" in item:
            return parse_retry_after(str(item["retryDelay"]))
    return None


def _api_error(exc: BaseException, provider: str) -> ProviderError:
    assert isinstance(exc, genai_errors.APIError)
    status = int(exc.code or 0)
    detail = f"{exc.status or ''} {exc.message or ''}".strip() or str(exc)
    err = from_status(status, detail, provider=provider, key_hint=KEY_HINT,
                      retry_after=_retry_delay(exc))
    # Gemini answers 400 INVALID_ARGUMENT "API key not valid" for a wrong key.
    if status == 400 and "api key" in detail.lower():
        err = ProviderRejected(f"{err} (check {KEY_HINT})", provider=provider, status=status)
    return err


# We do not register Python functions as tools; reaching this is a request we built wrongly.
_function_calling = says(ProviderRejected, "{provider} function-calling error: {kind}: {text}")
# Neither quotes its text: the SDK's says "Raw response: <the body>" and pydantic's carries
# input_value=, both the model's reply, and this message reaches log lines (issue 39).
_unknown_response = says(MalformedOutput, "{provider} sent a response the SDK cannot parse (not JSON)")
_interrupted = says(ProviderUnavailable, "{provider} interaction interrupted: {text}")
_invalid_shape = says(MalformedOutput, "{provider} response failed the SDK's validation ({kind})")


GEMINI_ERRORS: dict[type[BaseException], Handler] = {
    genai_errors.APIError: _api_error,
    genai_errors.ClientError: _api_error,
    genai_errors.ServerError: _api_error,
    genai_errors.UnknownFunctionCallArgumentError: _function_calling,
    genai_errors.UnsupportedFunctionError: _function_calling,
    genai_errors.FunctionInvocationError: _function_calling,
    genai_errors.UnknownApiResponseError: _unknown_response,
    genai_errors.ContinuationInterruptedError: _interrupted,
    pydantic.ValidationError: _invalid_shape,
}


def map_gemini_error(exc: BaseException) -> ProviderError:
    """The MoltBot error for anything google-genai (or its httpx2 transport) raised."""
    return map_with((GEMINI_ERRORS, HTTPX2_ERRORS), exc, PROVIDER)
