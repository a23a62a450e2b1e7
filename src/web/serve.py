"""Starting the web view beside a running mind (python -m src.main), on its own small pool.

The view cannot slow the mind (issue 24): under many polling clients the loop's cycle once
slowed several times over, the pages holding the mind's own connections (notes.md). The
pages therefore read through a pool of their own (`web.pool_size`, 2 by default): at most
that many page statements run at once, whatever the number of clients, and the mind's pool
is never theirs. Each of its sessions starts read-only with a statement timeout
(`web.statement_timeout_s`), both set in the start-up packet, where asyncpg's RESET ALL
leaves them. Pages start at most `web.max_requests_per_s` a second (src/web/pace.py), so the
work the view puts on the loop and the database is bounded whatever the clients do; page
building and JSON run in worker threads (src/web/app.py). Measured: `python -m bench
web_polling` (notes.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

import asyncpg
from aiohttp import web

from src.api.erasure import Erasure
from src.api.messages import Messages
from src.api.routes import Api, build_api
from src.config import Settings
from src.db.pool import create_pool
from src.errors import ConfigError, StartupError
from src.loop.input_journal import InputJournal
from src.providers.budget import BudgetLeft
from src.web.app import WebServer, check_bind
from src.web.chat_page import ChatDesk
from src.web.view import View

log = logging.getLogger(__name__)

#: application_name of the view's connections (the service's are "moltbot", the CLI's "moltbot-cli").
WEB_APPLICATION = "moltbot-web"


class ViewedMind(Protocol):
    """What the view reads from src.mind.Mind (named structurally: features never import the wiring)."""

    pool: Any
    providers: Any
    safety: Any
    retriever: Any
    loop: Any
    gates: Any
    budget: Any


async def open_view_pool(settings: Settings, dsn: str, *, read_only: bool = True) -> asyncpg.Pool:
    """The view's own pool: `web.pool_size` connections whose statements end after
    `web.statement_timeout_s`, read-only sessions unless `read_only` is False (server
    settings in the start-up packet). Every page reads in a READ ONLY transaction anyway;
    the standalone viewer's sessions stay writable for its own cost ledger (a search's
    embedding call is a llm_calls row)."""
    timeout_ms = max(1, round(settings.web.statement_timeout_s * 1000))
    session = {"statement_timeout": str(timeout_ms)}
    if read_only:
        session["default_transaction_read_only"] = "on"
    return await create_pool(dsn, min_size=1, max_size=settings.web.pool_size,
                             connect_timeout=settings.database.connect_timeout_s,
                             command_timeout=settings.web.statement_timeout_s + 5.0,
                             application_name=WEB_APPLICATION, server_settings=session)


async def start_beside_mind(settings: Settings, mind: ViewedMind, session_id: str, *, dsn: str,
                            journal: InputJournal | None = None, stop: asyncio.Event | None = None,
                            say: Callable[[str], None] | None = None) -> tuple[WebServer | None, str | None]:
    """Serve the view on the mind's event loop and a pool of its own on `dsn`; return it and
    the start-up line.

    Neither a missing token for a public bind nor a port in use stops the mind: it matters
    more than its window, so it runs on without the view and the line says why (the README
    and docker-compose.yml promise this for a container started without MOLTBOT_WEB_TOKEN;
    the standalone `python -m src.web` refuses instead: the view is all it is for).
    """
    if not settings.web.enabled:
        return None, None
    token = settings.web.token.get_secret_value() if settings.web.token else None
    try:
        check_bind(settings.web.host, token)
    except ConfigError as exc:
        log.warning("web view not started: %s", exc)
        return None, f"web view not started: {exc}"
    pool = await open_view_pool(settings, dsn)
    budget = getattr(mind, "budget", None)

    async def budget_left() -> BudgetLeft:
        return budget.left()

    view = View(pool=pool, settings=settings.web, mode="in-process", session_id=session_id,
                providers_report=mind.providers.report, safety_modes=mind.safety.phase_modes(),
                retriever=mind.retriever, cycles=lambda: mind.loop.cycles,
                budget=budget_left if budget is not None else None)
    messages = _messages(settings, mind, session_id, journal, stop, say)
    try:
        server = WebServer(view, on_stop=[pool.close], api=_api(settings, mind, session_id, journal, messages),
                           chat=_chat(settings, journal, messages))
        url = await server.start()
    except StartupError as exc:
        await pool.close()
        log.warning("%s", exc)
        return None, f"web view not started: {exc}"
    except BaseException:
        await pool.close()
        raise
    api = f"\nHTTP API: {url}api/v1/ (described at {url}api/v1/openapi.json)" if server.api is not None else ""
    chat = f"\nchat page: {url}chat" if messages is not None else ""
    return server, f"web view (read-only): {url}{api}{chat}"


def _messages(settings: Settings, mind: ViewedMind, session_id: str, journal: InputJournal | None,
              stop: asyncio.Event | None, say: Callable[[str], None] | None) -> Messages | None:
    """Messages in and replies out (src/api/messages.py), shared by the HTTP API and the chat
    page: one journal, one order, one once-only answer. None when the API is off or the mind
    has no durable input."""
    if not settings.web.api or journal is None:
        return None
    return Messages(journal.pool, journal, mind.loop.submit, mind.loop.replies, session_id=session_id,
                    max_chars=settings.agent.max_input_chars, stop=stop, announce=say)


def _chat(settings: Settings, journal: InputJournal | None, messages: Messages | None) -> ChatDesk:
    """The chat page's way in, or why it has none (the page says so and shows no form)."""
    if messages is not None:
        return ChatDesk(messages)
    if not settings.web.api:
        return ChatDesk.closed("web.api is false in runtime.yaml, and the chat page sends through the HTTP "
                               "API's messages; set web.api: true to talk to the mind here")
    return ChatDesk.closed("this mind runs without an input journal, so a message from here could not be "
                           "made durable; write at its terminal")


def _api(settings: Settings, mind: ViewedMind, session_id: str, journal: InputJournal | None,
         messages: Messages | None) -> web.Application | None:
    """The HTTP API's sub-application (src/api) when enabled and the mind has durable input."""
    if messages is None or journal is None:
        return None
    max_chars = settings.agent.max_input_chars
    # a body holds one message: its characters as JSON-escaped UTF-8 (up to 6 bytes each) and a little more
    loop = mind.loop
    erasure = Erasure(journal.pool, mind.providers.embedder, settings.agent.spill_dir, mind.gates,
                      loop.turn_lock, on_forgotten=loop.forgetting.apply)
    return build_api(Api(journal.pool, messages, mind.retriever, mind.providers.ledger, session_id,
                         erasure=erasure, wait_s=settings.web.api_wait_s), max_body=6 * max_chars + 4096)
