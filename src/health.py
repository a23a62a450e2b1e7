"""`python -m src.health`: is the running mind answering? For a container's health check
(Dockerfile HEALTHCHECK, docker-compose.yml), where no curl is installed.

It asks the HTTP API's status (GET /api/v1/status) on the web view's port, with
MOLTBOT_WEB_TOKEN when set: exit 0 when it answers 200 within the timeout, else 1 with one
line saying why. A status answer means the web server, the event loop under it and its
database pool all work: a loop stuck in a cycle, or a database gone, does not answer.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request

from src.config import load_settings
from src.errors import ConfigError


def probe(url: str, token: str | None, timeout_s: float) -> str | None:
    """None when `url` answers 200 with JSON, else why not."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:   # noqa: S310 (our own URL)
            json.loads(response.read(1 << 20))
    except urllib.error.HTTPError as exc:
        return f"{url} answered HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"{url} did not answer: {getattr(exc, 'reason', exc)}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.health", description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="path of runtime.yaml (default: $MOLTBOT_CONFIG or ./runtime.yaml)")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the answer (default 5)")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"unhealthy: configuration error: {exc}", file=sys.stderr)
        return 1
    web = settings.web
    if not web.enabled or not web.api:
        print("unhealthy: no status to ask: the web view or its HTTP API is off (web.enabled, web.api)",
              file=sys.stderr)
        return 1
    host = "127.0.0.1" if web.host in ("0.0.0.0", "", "localhost") else web.host   # noqa: S104 (a bind, read)
    host = "[::1]" if host == "::" else (f"[{host}]" if ":" in host else host)
    token = web.token.get_secret_value() if web.token else None
    why = probe(f"http://{host}:{web.port}/api/v1/status", token, args.timeout)
    if why is not None:
        print(f"unhealthy: {why}", file=sys.stderr)
        return 1
    print("healthy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
