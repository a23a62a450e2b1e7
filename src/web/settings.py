"""Settings of the guardian's window (the read-only web view); pure, no feature imports."""

from __future__ import annotations

import ipaddress

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class WebSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    # a non-loopback host needs MOLTBOT_WEB_TOKEN; env MOLTBOT_WEB_HOST overrides (Docker: 0.0.0.0)
    host: str = "127.0.0.1"
    # 0 picks a free port (tests); the start-up line prints the one bound.
    port: int = Field(8765, ge=0, le=65535)
    # Required when `host` is not a loopback address; only from MOLTBOT_WEB_TOKEN.
    token: SecretStr | None = None
    # Rows per table on a page (every query is bounded by it).
    page_rows: int = Field(100, ge=1, le=2000)
    # How far back the plots over time reach.
    plot_days: int = Field(30, ge=1, le=3650)
    # The view's own pool (issue 24): its connections, so polling clients never take the
    # mind's, and the longest a page's statement may run (the server's statement_timeout).
    pool_size: int = Field(2, ge=1, le=16)
    # the longest one page statement may run (server statement_timeout)
    statement_timeout_s: float = Field(5.0, gt=0)
    # Pages started per second, whoever asks (src/web/pace.py): `burst` at once, then this
    # rate; a request that would wait longer than `max_wait_s` is answered 503.
    max_requests_per_s: float = Field(5.0, gt=0)
    # (a guardian opening a few pages never waits); a request that would wait
    burst: int = Field(20, ge=1)
    # longer than max_wait_s is answered 503
    max_wait_s: float = Field(30.0, gt=0)
    # The HTTP API at /api/v1 beside the mind (src/api; the same token rules and pacing):
    # `api_wait_s` is how long POST /api/v1/messages waits for the reply before it answers
    # 202 with a URL to poll (a request may ask for up to 120 s with "wait_s").
    api: bool = True
    api_wait_s: float = Field(30.0, ge=0, le=120)


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
