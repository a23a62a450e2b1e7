"""python -m src.mcp — the mind's MCP server over stdio, for a desktop model client.

It attaches to the RUNNING mind through its HTTP API (src/mcp/over_http.py): `--url`, else
MOLTBOT_API_URL, else http://127.0.0.1:<web.port of runtime.yaml>/; the token, if the mind
has one, from MOLTBOT_WEB_TOKEN. Stdout is the protocol: every log line goes to stderr. A
mind that is not running is said in one stderr line at start, and in each tool's error
text, and the server stays up, so starting the mind later is enough.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from src.api.messages import MessageError
from src.config import Settings, api_url, load_settings
from src.errors import ConfigError
from src.mcp.over_http import OverHttp
from src.mcp.tools import build_server


async def serve(settings: Settings, url: str) -> int:
    """Serve MCP on stdin/stdout until the client closes it."""
    token = settings.web.token.get_secret_value() if settings.web.token else None
    mind = OverHttp(url, token)
    try:
        await mind.status()
    except MessageError as exc:             # said once here; each tool call says it again
        print(f"moltbot mcp: {exc}", file=sys.stderr, flush=True)
    try:
        await build_server(mind, max_chars=settings.agent.max_input_chars).run_stdio_async()
    finally:
        await mind.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.mcp", description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="the running mind's web server (default: MOLTBOT_API_URL, "
                                      "else http://127.0.0.1:<web.port>/)")
    parser.add_argument("--config", help="runtime.yaml to read web.port and agent.max_input_chars from")
    args = parser.parse_args(argv)
    # before anything logs: stderr only, warnings and worse (the SDK's own setup is then a no-op)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="moltbot mcp: %(name)s: %(message)s")
    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"moltbot mcp: configuration error: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(serve(settings, args.url or api_url(settings)))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
