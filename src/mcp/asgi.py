"""An ASGI application served from an aiohttp handler: the bridge that lets the MCP SDK's
streamable HTTP transport (ASGI: `StreamableHTTPSessionManager.handle_request`) answer at
/mcp on the web server, which is aiohttp (src/web/app.py), without a second server or port.

One request, one call of the application: the scope is built from the aiohttp request; the
body is fed to `receive` as it arrives (the SDK enforces its own size limit); the messages
given to `send` become a `web.StreamResponse`, written as they come, so a server-sent-event
stream reaches the client event by event. aiohttp does not tell a handler that its client
went away, so `receive` says `http.disconnect` only once the handler ends; a stream whose
client is gone ends at its next write (the write fails), or when the session manager stops.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio
from aiohttp import web

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


def scope_of(request: web.Request) -> dict[str, Any]:
    """The ASGI HTTP scope of an aiohttp request (header names lower-case, as ASGI wants)."""
    transport = request.transport
    peer = transport.get_extra_info("peername") if transport is not None else None
    sock = transport.get_extra_info("sockname") if transport is not None else None
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": f"{request.version.major}.{request.version.minor}",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.raw_path.split("?", 1)[0].encode("utf-8", "surrogateescape"),
        "query_string": request.query_string.encode("utf-8", "surrogateescape"),
        "root_path": "",
        "headers": [(name.lower(), value) for name, value in request.raw_headers],
        "client": tuple(peer[:2]) if peer else None,
        "server": tuple(sock[:2]) if sock else None,
    }


async def serve_asgi(app: AsgiApp, request: web.Request) -> web.StreamResponse:
    """Run the ASGI `app` for `request` and return what it answered."""
    done = anyio.Event()            # the handler is over: what `receive` then reports
    body_read = False
    response: web.StreamResponse | None = None

    async def receive() -> Message:
        nonlocal body_read
        if not body_read:
            chunk = await request.content.readany()
            body_read = request.content.at_eof()
            return {"type": "http.request", "body": chunk, "more_body": not body_read}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal response
        if message["type"] == "http.response.start":
            if response is not None:
                raise RuntimeError("the ASGI application started its response twice")
            response = web.StreamResponse(status=message["status"])
            for name, value in message.get("headers", ()):
                response.headers.add(name.decode("latin-1"), value.decode("latin-1"))
            return
        if message["type"] != "http.response.body":
            return                  # extensions (trailers, pathsend) the SDK does not use
        if response is None:
            raise RuntimeError("the ASGI application sent a body before its response start")
        if not response.prepared:
            await response.prepare(request)
        if message.get("body"):
            await response.write(message["body"])
        if not message.get("more_body", False):
            await response.write_eof()

    try:
        await app(scope_of(request), receive, send)
    finally:
        done.set()
    if response is None:
        raise RuntimeError("the ASGI application ended without a response")
    if not response.prepared:       # a start with no body message: an empty answer
        await response.prepare(request)
        await response.write_eof()
    return response


__all__ = ["AsgiApp", "scope_of", "serve_asgi"]
