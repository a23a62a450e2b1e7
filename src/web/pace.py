"""How fast the web view serves (issue 24): a token bucket over all its requests.

The view runs in the mind's process and on its event loop; every page it builds costs
statements on the database and Python time the loop's cycle then waits for. Clients polling
back to back once made the cycle several times slower (notes.md). Its own pool bounds how
many statements run at once (src/web/serve.py); this bounds how many pages start per second,
whoever asks: `web.max_requests_per_s`, with `web.burst` at once (one guardian opening a few
pages never waits). A request over the rate waits its turn; one that would wait longer than
`web.max_wait_s` is answered 503 at once. Pure: `take(now)` with an injected clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Pace:
    """A token bucket: `rate` requests a second, up to `burst` at once."""

    rate: float
    burst: float
    max_wait_s: float
    tokens: float = field(init=False)
    at: float | None = None

    def __post_init__(self) -> None:
        self.tokens = self.burst

    def take(self, now: float) -> float | None:
        """Seconds this request waits before it starts (its turn is reserved), or None: the
        wait would pass `max_wait_s` and nothing is reserved (answer 503)."""
        if self.at is not None:
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        wait = 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.rate
        if wait > self.max_wait_s:
            return None
        self.tokens -= 1
        return wait
