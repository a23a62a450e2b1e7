"""The aiohttp application and its server, run inside the service's event loop.

Every page answers HTML, or JSON with `?format=json` (same data). A configured
token is required on every request (`Authorization: Bearer …`, `?token=…`, or the
cookie set after a valid `?token=`); binding a non-loopback address without one
refuses to start. Requests are paced (src/web/pace.py): the view cannot slow the mind.
It only reads, but for the HTTP API (src/api) and the chat page's form (POST /chat,
src/web/chat_page.py), which writes through the API's messages, never the view's pool.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from src.errors import ConfigError, StartupError
from src.web import background_pages, chat_page, memory_pages, pages
from src.web.chat_page import ChatDesk
from src.web.errors import BadRequest, Refused
from src.web.escape import esc, visible
from src.web.html import Page, jsonable, layout
from src.web.pace import Pace
from src.web.settings import is_loopback
from src.web.view import View

log = logging.getLogger(__name__)

VIEW_KEY = web.AppKey("view", View)
PACE_KEY = web.AppKey("pace", Pace)
CHAT_KEY = web.AppKey("chat", ChatDesk)
COOKIE = "moltbot_token"
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
                               "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    # same-origin, not no-referrer: a form posted under no-referrer says `Origin: null`, and the
    # chat page tells its own form from another site's by its Origin (src/web/form_guard.py);
    # no other site is ever sent a URL of the view (a ?token= in it) either way
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class _RequestErrorLog(logging.LoggerAdapter):
    """aiohttp's server log, with a malformed request as one INFO line instead of an ERROR traceback.

    aiohttp answers a request it cannot parse (a 100 KB `?q=` is a request line over its
    8 KiB limit) with 400 itself, then logs it with `logger.exception`: a traceback in the
    service log, as if the view had failed. The client sent it; the view did not fail.
    """

    def exception(self, msg: object, *args: object, exc_info: object = True, **kwargs: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            # aiohttp's message quotes the request line, a search's ?q= too (issue 39): at DEBUG
            self.logger.info("web view: refused a malformed request (%s %s)", exc_info.code,
                             type(exc_info).__name__)
            self.logger.debug("web view: malformed request: %s", visible(str(exc_info.message))[:200])
            return
        self.logger.exception(msg, *args, exc_info=exc_info, **kwargs)


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback bind without a token: the mind's memories are private."""
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"web.host {host!r} is not a loopback address and no token is set: set MOLTBOT_WEB_TOKEN "
            "(then send it as 'Authorization: Bearer <token>' or ?token=<token>), or bind web.host 127.0.0.1")


def _token_of(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    if auth.startswith("Bearer "):
        return auth[7:].strip()
    return request.query.get("token") or request.cookies.get(COOKIE)


@web.middleware
async def _guard(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
    view = request.app[VIEW_KEY]
    token = view.settings.token.get_secret_value() if view.settings.token else None
    if token is not None:
        given = _token_of(request) or ""
        if not hmac.compare_digest(given.encode(), token.encode()):
            resp = web.Response(status=401, text="401: a token is required: send 'Authorization: Bearer "
                                "<token>' or add ?token=<token> (the value of MOLTBOT_WEB_TOKEN)\n")
            resp.headers.update(SECURITY_HEADERS)
            return resp
    if request.method not in ("GET", "HEAD") and not _is_api(request) and request.path != "/chat":
        return web.Response(status=405, text="405: the web view is read-only\n")
    wait = request.app[PACE_KEY].take(time.monotonic())
    if wait is None:   # more asked than the view serves without slowing the mind (src/web/pace.py)
        resp = _error(request, 503, "the web view is busy: too many requests; try again in a few seconds")
        resp.headers.update({**SECURITY_HEADERS, "Retry-After": "5"})
        return resp
    if wait:
        await asyncio.sleep(wait)
    try:
        resp = await handler(request)
    except BadRequest as exc:
        resp = _error(request, 400, str(exc))
    except Refused as exc:
        resp = _error(request, exc.status, str(exc))
    except web.HTTPNotFound:   # the router's own plain-text 404, styled like every other error
        resp = _error(request, 404, f"no page at {request.path[:80]}; the pages are listed at the top")
    except web.HTTPException:
        raise
    except Exception:  # one broken page must not take the view down; details go to the log
        log.exception("web page %s failed", request.path)
        resp = _error(request, 500, "this page could not be built (details in the service log)")
    resp.headers.update(SECURITY_HEADERS)
    if token is not None and request.query.get("token") and request.cookies.get(COOKIE) != token:
        resp.set_cookie(COOKIE, token, httponly=True, samesite="Strict")
    return resp


def _is_api(request: web.Request) -> bool:
    """The HTTP API (src/api), mounted at /api/v1: JSON both ways, and it may write."""
    return request.path.startswith("/api/")


def _wants_json(request: web.Request) -> bool:
    return request.query.get("format") == "json" or _is_api(request)


def _error(request: web.Request, status: int, message: str) -> web.Response:
    if _wants_json(request):
        return web.json_response({"error": message}, status=status)
    page = Page(f"{status}", {}, lambda: [f"<p>{esc(message)}</p>"])
    return web.Response(status=status, text=layout(page, request.path), content_type="text/html")


async def _render(request: web.Request, page: Page) -> web.Response:
    """HTML or JSON, built in a worker thread so the loop keeps cycling meanwhile."""
    if _wants_json(request):
        body = await asyncio.to_thread(json.dumps, {"title": page.title, **page.data}, default=jsonable)
        return web.Response(text=body, status=page.status, content_type="application/json")
    return web.Response(text=await asyncio.to_thread(layout, page, request.path), status=page.status,
                        content_type="text/html")


def _page(build: Callable[[View], Awaitable[Page]]):
    async def handler(request: web.Request) -> web.Response:
        return await _render(request, await build(request.app[VIEW_KEY]))
    return handler


async def _memories(request: web.Request) -> web.Response:
    return await _render(request, await memory_pages.memories(request.app[VIEW_KEY], request.query))


async def _memory(request: web.Request) -> web.Response:
    raw = request.match_info["memory_id"]
    # ASCII digits only: "²" and "٣" pass str.isdigit and then int() raises (a 500 once)
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        return _error(request, 404, f"no memory {raw[:40]!r}: memory ids are whole numbers")
    page = await memory_pages.memory_page(request.app[VIEW_KEY], int(raw))
    if page is None:
        return _error(request, 404, f"no memory #{raw}")
    return await _render(request, page)


async def _chat(request: web.Request) -> web.Response:
    page = await chat_page.show(request.app[VIEW_KEY], request.app[CHAT_KEY],
                                reload=request.query.get("reload") != "off")
    return await _render(request, page)


async def _chat_post(request: web.Request) -> web.Response:
    page = await chat_page.post(request, request.app[VIEW_KEY], request.app[CHAT_KEY])
    if page is None:        # sent: back to the conversation (post/redirect/get)
        return web.Response(status=303, headers={"Location": "/chat"})
    return await _render(request, page)


def build_app(view: View, api: web.Application | None = None, chat: ChatDesk | None = None) -> web.Application:
    """The application: routes for every page, the guard middleware, the API when given, the
    chat page (a form only with `chat`'s messages; src/web/chat_page.py)."""
    chat = chat or ChatDesk.closed(chat_page.STANDALONE)
    # the chat form is the one body the view reads (the API has its own limit)
    app = web.Application(middlewares=[_guard], client_max_size=chat.max_body())
    app[VIEW_KEY] = view
    app[CHAT_KEY] = chat
    s = view.settings
    app[PACE_KEY] = Pace(s.max_requests_per_s, s.burst, s.max_wait_s)
    app.router.add_get("/", _page(pages.overview))
    app.router.add_get("/memories", _memories)
    app.router.add_get("/memories/{memory_id}", _memory)
    app.router.add_get("/thoughts", _page(pages.thoughts))
    app.router.add_get("/gates", _page(pages.gates))
    app.router.add_get("/consolidation", _page(background_pages.consolidation))
    app.router.add_get("/gut", _page(background_pages.gut))
    app.router.add_get("/chat", _chat)
    app.router.add_post("/chat", _chat_post)
    if api is not None:
        app.add_subapp("/api/v1", api)
    return app


class WebServer:
    """The view served on the running event loop (aiohttp AppRunner + TCPSite)."""

    def __init__(self, view: View, *, on_stop: Sequence[Callable[[], Awaitable[object]]] = (),
                 busy_hint: str = "choose another web.port or set web.enabled: false",
                 api: web.Application | None = None, chat: ChatDesk | None = None):
        token = view.settings.token.get_secret_value() if view.settings.token else None
        check_bind(view.settings.host, token)
        self.view = view
        self.api = api                    # the HTTP API's sub-application (src/api), beside the mind
        self.chat = chat                  # what the chat page sends through (src/web/chat_page.py)
        # what to do when the port is taken: beside the mind, a setting; standalone, --port
        self.busy_hint = busy_hint
        self._on_stop = list(on_stop)     # run after the server stops (the view's own pool closes)
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        """Bind and serve; return the URL (with the port actually bound)."""
        s = self.view.settings
        self._runner = web.AppRunner(build_app(self.view, self.api, self.chat), access_log=None, handle_signals=False,
                                     logger=_RequestErrorLog(logging.getLogger("aiohttp.server"), {}))
        await self._runner.setup()
        site = web.TCPSite(self._runner, s.host, s.port)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            self._runner = None
            raise StartupError(f"web view cannot listen on {s.host}:{s.port} ({exc.strerror}); "
                               f"{self.busy_hint}") from exc
        port = self._runner.addresses[0][1] if self._runner.addresses else s.port
        host = f"[{s.host}]" if ":" in s.host else s.host
        self.url = f"http://{host}:{port}/"
        return self.url

    async def stop(self) -> None:
        """Stop serving, then run the `on_stop` callbacks (once)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        closers, self._on_stop = self._on_stop, []
        for close in closers:
            await close()
