"""Who may post the chat form (issue 41 item 3): this page of this server, no other site.

The web view takes its token by header, `?token=` or a SameSite=Strict cookie, and on a
loopback bind (the default) it takes no token at all: any web page the guardian visits
could post a form to 127.0.0.1 and put words in their mouth. A post is therefore taken
only when all of these hold:

- its form carries the check token this process printed into it: an HMAC of the form's
  own Idempotency key under a secret made at start (another site can read neither; a
  restart makes a new secret, so a form from before it is refused and reloaded);
- its `Origin` (or, without one, its `Referer`) names this server, when the browser sends
  one (the view's Referrer-Policy is `same-origin`, so its own form sends it);
- without a token, its `Host` is a loopback name: a page that rebinds its own DNS name to
  127.0.0.1 is same-origin with itself, not with this server, and sends its own name.

Pure: no I/O; the request's headers are passed in.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import urlsplit

from src.web.settings import is_loopback

#: What the refusals end with: the way to send the message after all.
_INSTEAD = "nothing was sent; open the chat page of this server and send it from there"


class FormGuard:
    """The check token of each chat form, from a secret made when the process starts."""

    def __init__(self, secret: bytes | None = None):
        self._secret = secret or secrets.token_bytes(32)

    def token(self, key: str) -> str:
        """The check token of the form whose Idempotency key is `key`."""
        return hmac.new(self._secret, b"chat-form:" + key.encode(), hashlib.sha256).hexdigest()

    def valid(self, key: str, given: str) -> bool:
        """True when `given` is the token of `key` (compared in constant time)."""
        return hmac.compare_digest(self.token(key).encode(), given.encode())

    def refused_form(self, key: str, given: str) -> str | None:
        """Why the posted form is not one this process showed (the error page says it), or None."""
        if key and given and self.valid(key, given):
            return None
        return ("the form's check token is missing or wrong (a form from another site, or one shown "
                "before the service restarted); nothing was sent: reload the chat page and send it again")


def refused_source(*, origin: str | None, referer: str | None, host: str, token_set: bool) -> str | None:
    """Why a post's headers show it was not sent from this server's page (the error page says
    it), or None. Checked before the body is read."""
    if not token_set and not is_loopback(_hostname(host)):
        return (f"the chat page takes a message only at a loopback address (127.0.0.1 or localhost) "
                f"while no MOLTBOT_WEB_TOKEN is set, and this one was sent to {host[:80]!r}; {_INSTEAD}")
    stranger = foreign_origin(origin, referer, host)
    if stranger is not None:
        return f"the message came from a page at {stranger[:80]!r}, not from this server; {_INSTEAD}"
    return None


def foreign_origin(origin: str | None, referer: str | None, host: str) -> str | None:
    """The site a post names as its source when that is not `host` (the Host it was sent
    to); None when it names this server or names none. `Origin: null` (a sandboxed frame,
    a redirect across sites) is foreign: this server's own form names itself."""
    if origin is not None:
        return None if _netloc(origin) == host.lower() else origin
    if referer:
        return None if _netloc(referer) == host.lower() else referer
    return None


def _netloc(url: str) -> str:
    try:
        return urlsplit(url.strip()).netloc.lower()
    except ValueError:      # "http://[bad" : not a URL this server could have sent
        return ""


def _hostname(host: str) -> str:
    """The name in a Host header, without its port ("[::1]:8765" -> "::1")."""
    try:
        return urlsplit(f"//{host}").hostname or ""
    except ValueError:
        return ""


__all__ = ["FormGuard", "foreign_origin", "refused_source"]
