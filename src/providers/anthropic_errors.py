"""The one place anthropic SDK exceptions become MoltBot errors.

The SDK wraps transport failures itself (APIConnectionError, APITimeoutError) and raises one
APIStatusError subclass per HTTP status and error code (about a hundred classes); those
are mapped by their status. Every subclass of `anthropic.AnthropicError` must resolve to
an entry other than the root: a test walks them all.
"""

from __future__ import annotations

import contextlib
import importlib

import anthropic

from src.errors import (
    MalformedOutput,
    ProviderError,
    ProviderRejected,
    ProviderTimeout,
    ProviderUnavailable,
)
from src.providers.http_errors import (
    HTTPX2_ERRORS,
    Handler,
    from_status,
    map_with,
    parse_retry_after,
    says,
    short,
)

PROVIDER = "anthropic"
KEY_HINT = "ANTHROPIC_API_KEY"


def _status(exc: BaseException, provider: str) -> ProviderError:
    assert isinstance(exc, anthropic.APIStatusError)
    detail = exc.api_message or exc.message
    if exc.error_code:
        detail = f"{exc.error_code}: {detail}"
    return from_status(exc.status_code, detail, provider=provider, key_hint=KEY_HINT,
                       retry_after=parse_retry_after(exc.response.headers.get("retry-after")))


_timeout = says(ProviderTimeout, "{provider} did not answer in time")


def _connection(exc: BaseException, provider: str) -> ProviderError:
    cause = exc.__cause__ or exc.__context__
    why = f"{type(cause).__name__}: {short(cause)}" if cause is not None else short(exc)
    return ProviderUnavailable(f"cannot reach {provider}: {why}", provider=provider)


_invalid_body = says(MalformedOutput, "{provider} sent a body that fails the SDK's schema: {text}")
# A bare APIError is raised for errors inside a streamed response.
_api_error = says(ProviderUnavailable, "{provider} API error: {text}")
_retryable = says(ProviderUnavailable, "{provider} asked for a retry: {text}")
_credentials = says(ProviderRejected, "{provider} credentials unusable: {text} (check " + KEY_HINT + ")")
# Client-side helpers we do not use (streams, toolsets, Foundry auth): our bug, not the provider's.
_misuse = says(ProviderRejected, "{provider} client misused: {kind}: {text}")
_other = says(ProviderError, "{provider} error: {kind}: {text}")


ANTHROPIC_ERRORS: dict[type[BaseException], Handler] = {
    # The root: only an AnthropicError raised as such lands here (e.g. a missing API key).
    anthropic.AnthropicError: _other,
    anthropic.APIError: _api_error,
    anthropic.APIStatusError: _status,
    anthropic.APIConnectionError: _connection,
    anthropic.APITimeoutError: _timeout,
    anthropic.APIResponseValidationError: _invalid_body,
    anthropic.APIWebhookValidationError: _invalid_body,
    anthropic.RetryableError: _retryable,
    anthropic.CredentialsError: _credentials,
}

# Errors defined in the SDK's helper modules (not exported at the top level); looked up by
# path so a moved class only drops out of the table (and the walk test names it).
_HELPER_ERRORS = {
    ("anthropic.lib.credentials._workload", "WorkloadIdentityError"): _credentials,
    ("anthropic._response", "StreamAlreadyConsumed"): _misuse,
    ("anthropic.lib.foundry", "MutuallyExclusiveAuthError"): _misuse,
    ("anthropic.lib.tools._toolsets._errors", "ToolsetUsageError"): _misuse,
    ("anthropic.lib._extras._common", "MissingDependencyError"): _misuse,
}
for (_module, _name), _handler in _HELPER_ERRORS.items():
    with contextlib.suppress(ImportError, AttributeError):
        ANTHROPIC_ERRORS[getattr(importlib.import_module(_module), _name)] = _handler


def map_anthropic_error(exc: BaseException) -> ProviderError:
    """The MoltBot error for anything the anthropic SDK raised."""
    return map_with((ANTHROPIC_ERRORS, HTTPX2_ERRORS), exc, PROVIDER)
