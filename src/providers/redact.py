"""Keeping API keys out of every message, log line and ledger row.

Keys live in `Secrets` (pydantic SecretStr, which prints as '**********') and are
unwrapped only where an SDK client is constructed. Texts that come back from the outside
(error bodies, exception messages) pass through a Redactor before we log or store them,
in case a server or library echoes a key.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

from pydantic import SecretStr

from src.errors import ProviderError

MASK = "[redacted]"


def url_secrets(url: str | None) -> list[str]:
    """The secret parts of a URL such as `providers.llm.base_url`: the password as written
    and decoded, and the whole `user:password@` (a server may echo either)."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:       # an unparseable URL fails at connect time; nothing to find here
        return []
    if not password:
        return []
    userinfo = parts.netloc.rpartition("@")[0]
    return [password, unquote(password), userinfo + "@", unquote(userinfo) + "@"]


class Redactor:
    """Replaces every known secret value in a text with MASK."""

    def __init__(self, secrets: Iterable[SecretStr | str | None] = ()):
        values = []
        for secret in secrets:
            value = secret.get_secret_value() if isinstance(secret, SecretStr) else secret
            # Very short values would mangle ordinary words; real keys are long.
            if value and len(value) >= 8:
                values.append(value)
        self._values = sorted(set(values), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def error(self, err: ProviderError) -> ProviderError:
        """Scrub the error's message, and those of the errors chained to it, in place.

        The chain matters: a logged traceback prints the SDK exception we raised `from`.
        """
        if not self._values:
            return err
        seen: set[int] = set()
        exc: BaseException | None = err
        while exc is not None and id(exc) not in seen and len(seen) < 10:
            seen.add(id(exc))
            exc.args = tuple(self(a) if isinstance(a, str) else a for a in exc.args)
            for attr in ("message", "api_message"):
                value = getattr(exc, attr, None)
                if isinstance(value, str):
                    with contextlib.suppress(AttributeError):  # a read-only property stores nothing
                        setattr(exc, attr, self(value))
            exc = exc.__cause__ or exc.__context__
        return err
