"""/mcp on the mind's web server: the MCP server over streamable HTTP, in process.

The SDK's session manager is ASGI and lives inside a task group (`run()`); the web server
is aiohttp. `start()` enters that lifespan in a task of its own, so it is entered and left
in one task whatever task starts and stops the web server, and `stop()` ends it before the
web server stops (its streams end with it, so the server does not wait on them). Requests
reach the manager through the ASGI bridge (src/mcp/asgi.py). The token and the pacing are
the web server's own (src/web/app.py's guard), as for /api/v1. Bound to a loopback address,
the SDK's DNS-rebinding check is on too: a web page cannot reach /mcp through a host name
that resolves to 127.0.0.1, since the Host and Origin headers must be loopback ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiohttp import web
from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from src.mcp.asgi import serve_asgi

log = logging.getLogger(__name__)

PATH = "/mcp"
#: What a loopback-bound server accepts as Host and Origin (the SDK's own loopback default).
LOOPBACK = TransportSecuritySettings(
    allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"])


class McpEndpoint:
    """The MCP server at `PATH`, mounted on the web server (src/web/app.py's `Mounted`)."""

    path = PATH

    def __init__(self, server: MCPServer, *, loopback: bool):
        # builds the session manager (the Starlette app it returns is not used: aiohttp serves)
        server.streamable_http_app(streamable_http_path=PATH,
                                   transport_security=LOOPBACK if loopback else None)
        self.manager = server.session_manager
        self._stopping = asyncio.Event()
        self._running: asyncio.Task | None = None

    async def start(self) -> None:
        """Enter the session manager's lifespan (returns once requests can be served)."""
        ready = asyncio.Event()

        async def run() -> None:
            async with self.manager.run():
                ready.set()
                await self._stopping.wait()

        self._running = asyncio.create_task(run(), name="mcp-sessions")
        waiting = asyncio.create_task(ready.wait())
        await asyncio.wait({self._running, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if self._running.done():        # it failed to start: say why here, not at the first request
            await self._running

    async def stop(self) -> None:
        """End every MCP session and the manager's lifespan."""
        if self._running is None:
            return
        self._stopping.set()
        with contextlib.suppress(asyncio.CancelledError):
            await self._running
        self._running = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        return await serve_asgi(self.manager.handle_request, request)


__all__ = ["PATH", "McpEndpoint"]
