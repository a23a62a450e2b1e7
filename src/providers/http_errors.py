"""Translation of HTTP-level failures (httpx2, status codes, bad JSON) into our error tree.

Shared by the SDK maps (google-genai lets httpx2 errors through untouched) and by the
OpenAI-compatible client, which speaks httpx2 directly. The tables are keyed by exact
exception class and looked up along the MRO; tests walk every exported class and fail
when one would reach the generic fallback.

One shape for every provider's table (issue 23): a foreign class → a `Handler`, consumed
by `map_with`. Most handlers only word the error, so they are written `says(OurError,
"…")`: whether it is retried follows from our class (`ProviderError.transient`). A
handler is a function only where it reads the exception (a status, a cause, a header).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx2

from src.errors import (
    MalformedOutput,
    ProviderError,
    ProviderRejected,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)
from src.text import excerpt

log = logging.getLogger(__name__)

Handler = Callable[[BaseException, str], ProviderError]
MESSAGE_LIMIT = 300


def short(text: object) -> str:
    """One line, at most MESSAGE_LIMIT characters: error texts end up in logs and rows."""
    return excerpt(str(text), MESSAGE_LIMIT)


def says(error: type[ProviderError], wording: str) -> Handler:
    """A handler that maps to `error` worded by `wording`, which may name {provider}, {kind}
    (the foreign exception's class name) and {text} (its message, shortened)."""
    def handle(exc: BaseException, provider: str) -> ProviderError:
        return error(wording.format(provider=provider, kind=type(exc).__name__, text=short(exc)),
                     provider=provider)
    return handle


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP date) or a '37s' duration."""
    if not value:
        return None
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)s?", value)
    if match:
        return float(match.group(1))
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - datetime.now(UTC)).total_seconds())


def from_status(status: int, detail: str, *, provider: str, key_hint: str = "",
                retry_after: float | None = None) -> ProviderError:
    """The error for an HTTP status answered by `provider`."""
    text = f"{provider} answered HTTP {status}: {short(detail)}"
    if status == 429:
        return RateLimited(text, provider=provider, status=status, retry_after=retry_after)
    if status == 408:
        return ProviderTimeout(text, provider=provider, status=status)
    if status in (401, 403) and key_hint:
        return ProviderRejected(f"{text} (check {key_hint})", provider=provider, status=status)
    if 400 <= status < 500:
        return ProviderRejected(text, provider=provider, status=status)
    return ProviderUnavailable(text, provider=provider, status=status)


_timeout = says(ProviderTimeout, "{provider} did not answer in time ({kind})")
_unreachable = says(ProviderUnavailable, "cannot reach {provider}: {kind}: {text}")
_bad_request_setup = says(ProviderRejected, "{provider} request cannot be sent: {kind}: {text}")
_malformed = says(MalformedOutput, "{provider} sent an unreadable body: {kind}: {text}")


def _status_error(exc: BaseException, provider: str) -> ProviderError:
    assert isinstance(exc, httpx2.HTTPStatusError)
    response = exc.response
    return from_status(response.status_code, response.text, provider=provider,
                       retry_after=parse_retry_after(response.headers.get("retry-after")))


HTTPX2_ERRORS: dict[type[BaseException], Handler] = {
    httpx2.HTTPError: _unreachable,
    httpx2.RequestError: _unreachable,
    httpx2.TransportError: _unreachable,
    httpx2.TimeoutException: _timeout,
    httpx2.ConnectTimeout: _timeout,
    httpx2.ReadTimeout: _timeout,
    httpx2.WriteTimeout: _timeout,
    httpx2.PoolTimeout: _timeout,
    httpx2.NetworkError: _unreachable,
    httpx2.ConnectError: _unreachable,
    httpx2.ReadError: _unreachable,
    httpx2.WriteError: _unreachable,
    httpx2.CloseError: _unreachable,
    httpx2.ProtocolError: _unreachable,
    httpx2.LocalProtocolError: _bad_request_setup,
    httpx2.RemoteProtocolError: _unreachable,
    httpx2.ProxyError: _unreachable,
    httpx2.UnsupportedProtocol: _bad_request_setup,
    httpx2.DecodingError: _malformed,
    httpx2.TooManyRedirects: _bad_request_setup,
    httpx2.HTTPStatusError: _status_error,
    httpx2.InvalidURL: _bad_request_setup,
    httpx2.CookieConflict: _bad_request_setup,
    # The body stream broke or was misused mid-response: treat as a dropped connection.
    httpx2.StreamError: _unreachable,
    httpx2.StreamConsumed: _unreachable,
    httpx2.StreamClosed: _unreachable,
    httpx2.ResponseNotRead: _unreachable,
    httpx2.RequestNotRead: _unreachable,
    json.JSONDecodeError: _malformed,
    UnicodeDecodeError: _malformed,
}


def resolve(table: Mapping[type[BaseException], Handler], cls: type[BaseException]) -> type | None:
    """The table key that handles `cls` (nearest along its MRO), or None."""
    for base in cls.__mro__:
        if base in table:
            return base
    return None


def map_with(tables: tuple[Mapping[type[BaseException], Handler], ...], exc: BaseException,
             provider: str) -> ProviderError:
    """Map `exc` with the first table that knows it; unknown errors get a generic ProviderError.

    The generic branch is for bugs, not provider behaviour: tests assert no SDK class lands here.
    """
    if isinstance(exc, ProviderError):
        return exc
    for table in tables:
        key = resolve(table, type(exc))
        if key is not None:
            return table[key](exc, provider)
    log.error("unmapped %s from %s: %s", type(exc).__name__, provider, short(exc))
    return ProviderError(f"unexpected {type(exc).__name__} from {provider}: {short(exc)}",
                         provider=provider)
