"""Every foreign exception that can reach our code maps to a typed MoltBot error.

Like httpx's own test suite: walk every exception class google-genai, anthropic and httpx2
export, and fail when one has no entry (it would fall through to the generic branch).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import anthropic
import anthropic._error_classes  # noqa: F401 - loads every generated error class
import httpx2
import pydantic
import pytest
from google.genai import errors as genai_errors

from src.errors import (
    MalformedOutput,
    ProviderError,
    ProviderRejected,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)
from src.providers.anthropic_errors import ANTHROPIC_ERRORS, map_anthropic_error
from src.providers.gemini_errors import GEMINI_ERRORS, map_gemini_error
from src.providers.http_errors import HTTPX2_ERRORS, parse_retry_after, resolve

REQUEST = httpx2.Request("POST", "https://example.invalid/v1")


def _subclasses(root: type) -> set[type]:
    found, todo = set(), [root]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


GENAI_CLASSES = sorted((obj for obj in vars(genai_errors).values()
                        if isinstance(obj, type) and issubclass(obj, BaseException)
                        and obj.__module__ == genai_errors.__name__), key=lambda c: c.__name__)
ANTHROPIC_CLASSES = sorted(_subclasses(anthropic.AnthropicError), key=lambda c: c.__qualname__)
HTTPX2_CLASSES = sorted((getattr(httpx2, name) for name in httpx2._exceptions.__all__),
                        key=lambda c: c.__name__)


def test_the_walks_found_the_classes():
    assert {c.__name__ for c in GENAI_CLASSES} >= {"APIError", "ClientError", "ServerError",
                                                   "UnknownApiResponseError"}
    assert len(ANTHROPIC_CLASSES) > 100
    assert len(HTTPX2_CLASSES) == 28


@pytest.mark.parametrize("cls", GENAI_CLASSES, ids=lambda c: c.__name__)
def test_every_google_genai_exception_has_its_own_entry(cls):
    assert cls in GEMINI_ERRORS, f"google.genai.errors.{cls.__name__} is not mapped in gemini_errors.py"


@pytest.mark.parametrize("cls", HTTPX2_CLASSES, ids=lambda c: c.__name__)
def test_every_httpx2_exception_has_its_own_entry(cls):
    assert cls in HTTPX2_ERRORS, f"httpx2.{cls.__name__} is not mapped in http_errors.py"


@pytest.mark.parametrize("cls", ANTHROPIC_CLASSES, ids=lambda c: c.__qualname__)
def test_every_anthropic_exception_resolves_below_the_root(cls):
    key = resolve(ANTHROPIC_ERRORS, cls)
    assert key is not None and key is not anthropic.AnthropicError, (
        f"anthropic {cls.__qualname__} would fall through to the generic AnthropicError branch")


def _status_classes():
    for cls in ANTHROPIC_CLASSES:
        status = getattr(cls, "status_code", None)
        if isinstance(status, int):
            yield cls, status


@pytest.mark.parametrize(("cls", "status"), list(_status_classes()), ids=lambda v: getattr(v, "__name__", str(v)))
def test_anthropic_status_errors_map_by_status(cls, status):
    exc = cls("boom", response=httpx2.Response(status, request=REQUEST, headers={"retry-after": "7"}),
              body={"type": "error", "error": {"type": "x", "message": "boom"}})
    err = map_anthropic_error(exc)
    expected = (RateLimited if status == 429 else ProviderTimeout if status == 408
                else ProviderRejected if status < 500 else ProviderUnavailable)
    assert type(err) is expected
    assert str(err).startswith(f"anthropic answered HTTP {status}: ")
    assert err.status == status and err.provider == "anthropic"
    if status == 429:
        assert err.retry_after == 7.0


def test_anthropic_transport_and_body_errors():
    assert type(map_anthropic_error(anthropic.APITimeoutError(request=REQUEST))) is ProviderTimeout
    try:
        try:
            raise httpx2.ConnectError("refused")
        except httpx2.ConnectError as inner:
            raise anthropic.APIConnectionError(request=REQUEST) from inner
    except anthropic.APIConnectionError as exc:
        err = map_anthropic_error(exc)
    assert (type(err), str(err)) == (ProviderUnavailable, "cannot reach anthropic: ConnectError: refused")
    bad = anthropic.APIResponseValidationError(httpx2.Response(200, request=REQUEST), body={})
    assert type(map_anthropic_error(bad)) is MalformedOutput
    assert type(map_anthropic_error(anthropic.CredentialsError("no key"))) is ProviderRejected
    assert str(map_anthropic_error(anthropic.AnthropicError("odd"))) == "anthropic error: AnthropicError: odd"


def _genai(cls, status, body, headers=None):
    return cls(status, body, httpx2.Response(status, request=REQUEST, headers=headers or {}))


@pytest.mark.parametrize(("exc", "kind", "message"), [
    (_genai(genai_errors.ClientError, 429, {"error": {"code": 429, "message": "Quota exceeded",
                                                      "status": "RESOURCE_EXHAUSTED",
                                                      "details": [{"retryDelay": "37s"}]}}),
     RateLimited, "gemini answered HTTP 429: RESOURCE_EXHAUSTED Quota exceeded"),
    (_genai(genai_errors.ServerError, 503, {"error": {"code": 503, "message": "The model is overloaded.",
                                                      "status": "UNAVAILABLE"}}),
     ProviderUnavailable, "gemini answered HTTP 503: UNAVAILABLE The model is overloaded."),
    (_genai(genai_errors.ClientError, 400, {"error": {"code": 400, "message": "API key not valid. Please pass "
                                                      "a valid API key.", "status": "INVALID_ARGUMENT"}}),
     ProviderRejected, "gemini answered HTTP 400: INVALID_ARGUMENT API key not valid. Please pass a valid "
                       "API key. (check GEMINI_API_KEY)"),
    (_genai(genai_errors.ClientError, 403, {"error": {"code": 403, "message": "Permission denied",
                                                      "status": "PERMISSION_DENIED"}}),
     ProviderRejected, "gemini answered HTTP 403: PERMISSION_DENIED Permission denied (check GEMINI_API_KEY)"),
    (_genai(genai_errors.ClientError, 404, {"error": {"code": 404, "message": "models/x is not found",
                                                      "status": "NOT_FOUND"}}),
     ProviderRejected, "gemini answered HTTP 404: NOT_FOUND models/x is not found"),
    (json.JSONDecodeError("Expecting value", "<html>", 0), MalformedOutput,
     "gemini sent an unreadable body: JSONDecodeError: Expecting value: line 1 column 1 (char 0)"),
    (genai_errors.UnknownApiResponseError("Failed to parse response as JSON. Raw response: my quokka"),
     MalformedOutput, "gemini sent a response the SDK cannot parse (not JSON)"),
    (genai_errors.UnsupportedFunctionError("f"), ProviderRejected,
     "gemini function-calling error: UnsupportedFunctionError: f"),
    (genai_errors.ContinuationInterruptedError("hop 2 failed"), ProviderUnavailable,
     "gemini interaction interrupted: hop 2 failed"),
    (httpx2.ConnectTimeout("connect timed out"), ProviderTimeout, "gemini did not answer in time (ConnectTimeout)"),
    (httpx2.RemoteProtocolError("peer closed connection"), ProviderUnavailable,
     "cannot reach gemini: RemoteProtocolError: peer closed connection"),
])
def test_gemini_errors_map_to_typed_errors(exc, kind, message):
    err = map_gemini_error(exc)
    assert type(err) is kind
    assert str(err) == message
    assert err.provider == "gemini"


def test_gemini_retry_delay_comes_from_header_or_details():
    body = {"error": {"code": 429, "message": "q", "status": "RESOURCE_EXHAUSTED",
                      "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}}
    assert map_gemini_error(_genai(genai_errors.ClientError, 429, body)).retry_after == 37.0
    assert map_gemini_error(_genai(genai_errors.ClientError, 429, body, {"retry-after": "4"})).retry_after == 4.0


def test_pydantic_validation_error_from_the_sdk_is_malformed_output():
    class Shape(pydantic.BaseModel):
        n: int

    with pytest.raises(pydantic.ValidationError) as info:
        Shape.model_validate({"n": "my quokka"})
    err = map_gemini_error(info.value)
    assert type(err) is MalformedOutput
    # pydantic's text quotes the input (the model's reply); ours does not (issue 39)
    assert "quokka" in str(info.value) and str(err) == "gemini response failed the SDK's validation (ValidationError)"


def test_unknown_exceptions_take_the_generic_branch_and_are_logged(caplog):
    with caplog.at_level(logging.ERROR, logger="src.providers.http_errors"):
        err = map_gemini_error(KeyError("candidates"))
    assert type(err) is ProviderError and err.transient is False
    assert str(err) == "unexpected KeyError from gemini: 'candidates'"
    assert caplog.messages == ["unmapped KeyError from gemini: 'candidates'"]


def test_our_own_errors_pass_through_unchanged():
    original = RateLimited("already mapped", provider="gemini")
    assert map_gemini_error(original) is original
    assert map_anthropic_error(original) is original


def test_parse_retry_after():
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("2.5s") == 2.5
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=60), usegmt=True)
    assert 55.0 < parse_retry_after(later) <= 60.0
