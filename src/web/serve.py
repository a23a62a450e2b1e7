"""Starting the web view beside a running mind (python -m src.main)."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from src.config import Settings
from src.errors import StartupError
from src.web.app import WebServer
from src.web.view import View

log = logging.getLogger(__name__)


class RunningMind(Protocol):
    """What the view reads from src.mind.Mind (named structurally: features never import the wiring)."""

    pool: Any
    providers: Any
    safety: Any
    retriever: Any
    loop: Any


async def start_beside_mind(settings: Settings, mind: RunningMind,
                            session_id: str) -> tuple[WebServer | None, str | None]:
    """Serve the view on the mind's pool and loop; return it and the start-up line.

    A missing token for a public bind is a configuration error (raised). A port in use
    is not: the mind matters more than its window, so it runs on and the line says why
    the view is missing.
    """
    if not settings.web.enabled:
        return None, None
    view = View(pool=mind.pool, settings=settings.web, mode="in-process", session_id=session_id,
                providers_report=mind.providers.report, safety_modes=mind.safety.phase_modes(),
                retriever=mind.retriever, cycles=lambda: mind.loop.cycles)
    server = WebServer(view)
    try:
        url = await server.start()
    except StartupError as exc:
        log.warning("%s", exc)
        return None, f"web view not started: {exc}"
    return server, f"web view (read-only): {url}"
