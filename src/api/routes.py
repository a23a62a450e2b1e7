"""The HTTP API, mounted at /api/v1 on the web server (issue 41 item 1).

The same process and the same token rules as the view (src/web/app.py: loopback without a
token, anything else only with one; the same pacing), JSON in and out, errors as
`{"error": "…"}` with a status that says what kind. What each route does and answers:
`GET /api/v1/openapi.json` (src/api/openapi.py), checked against the router by a test.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
import numpy as np
from aiohttp import web

from src.api.erasure import Erasure
from src.api.messages import MessageError, Messages, idempotency_key
from src.api.openapi import document
from src.bootstrap.readiness import readiness
from src.gates import held_repository
from src.providers.costs import CostLedger
from src.recall.explain import dated_json
from src.recall.retrieval import Retriever

log = logging.getLogger(__name__)

#: The longest wait for a reply a request may ask (`wait_s`); longer turns are polled.
MAX_WAIT_S = 120.0
#: The most memories one search returns.
MAX_K = 50


@dataclass(frozen=True)
class Api:
    """What the API's routes use of the running mind."""

    pool: asyncpg.Pool
    messages: Messages
    retriever: Retriever
    ledger: CostLedger
    session_id: str
    erasure: Erasure | None = None      # forget, correct, remember (src/api/erasure.py)
    wait_s: float = 30.0                # how long POST /messages waits for the reply by default


API_KEY = web.AppKey("api", Api)


def _json_error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


@web.middleware
async def _errors(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
    """Every failure as JSON: a refused request says why; a broken handler, where to look."""
    try:
        return await handler(request)
    except MessageError as exc:
        return _json_error(exc.status, str(exc))
    except web.HTTPNotFound:
        return _json_error(404, f"no API route at {request.path[:80]}; GET /api/v1/openapi.json lists them")
    except web.HTTPMethodNotAllowed as exc:
        return _json_error(405, f"{request.method} is not allowed here; allowed: {', '.join(sorted(exc.allowed_methods))}")
    except web.HTTPRequestEntityTooLarge:
        return _json_error(413, "the request body is too large")
    except Exception:  # one failed request must not take the API down; details go to the log
        log.exception("API request %s %s failed", request.method, request.path)
        return _json_error(500, "the request failed (details in the service log)")


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json(loads=json.loads)
    except (ValueError, UnicodeDecodeError):
        raise MessageError(400, "the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise MessageError(400, "the body must be a JSON object")
    return body


def _seconds(raw: object, default: float) -> float:
    if raw is None:
        return default
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise MessageError(400, f"wait_s must be a number of seconds, got {str(raw)[:40]!r}") from None
    if not 0.0 <= value <= MAX_WAIT_S:
        raise MessageError(400, f"wait_s must be between 0 and {MAX_WAIT_S:g}")
    return value


async def post_message(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    body = await _body(request)
    key = idempotency_key(request.headers.get("Idempotency-Key"))
    # an MCP client reaching the mind through this API (src/mcp over stdio) names itself
    channel = request.headers.get("X-MoltBot-Channel", "api").strip().lower()
    if channel not in ("api", "mcp"):
        raise MessageError(400, "X-MoltBot-Channel must be api or mcp")
    sent = await api.messages.send(body.get("text"), key, _seconds(body.get("wait_s"), api.wait_s),
                                   channel=channel)
    status = 200 if sent.state == "answered" else 202
    resp = web.json_response(sent.json(), status=status)
    if sent.id is not None:
        resp.headers["Location"] = f"/api/v1/messages/{sent.id}"
    return resp


async def find_message(request: web.Request) -> web.Response:
    """A message by the key it was sent with (`?key=`): also one held while the database is away."""
    api = request.app[API_KEY]
    key = request.query.get("key")
    if not key:
        raise MessageError(400, "say which message: ?key=<its Idempotency-Key>, or GET /api/v1/messages/<id>")
    sent = await api.messages.by_key(idempotency_key(key), _seconds(request.query.get("wait_s"), 0.0))
    return web.json_response(sent.json())


async def get_message(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    raw = request.match_info["message_id"]
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise MessageError(404, f"no message {raw[:40]!r}: message ids are whole numbers")
    sent = await api.messages.state(int(raw), _seconds(request.query.get("wait_s"), 0.0))
    return web.json_response(sent.json())


async def search(request: web.Request) -> web.Response:
    """The read-only recall pipeline, as `python -m src.memory search --json` prints it."""
    api = request.app[API_KEY]
    query = request.query.get("q", "").strip()
    if not query:
        raise MessageError(400, "say what to search for: ?q=<words>")
    try:
        k = int(request.query.get("k", "5"))
    except ValueError:
        raise MessageError(400, "k must be a whole number") from None
    if not 1 <= k <= MAX_K:
        raise MessageError(400, f"k must be between 1 and {MAX_K}")
    now = datetime.now(UTC)
    result = await api.retriever.retrieve(query, rng=np.random.default_rng(), now=now, mutate=False)
    out = dated_json(result, now)
    out["results"] = out["results"][:k]
    return web.json_response(out)


async def status(request: web.Request) -> web.Response:
    api = request.app[API_KEY]
    row = await api.pool.fetchrow(
        """SELECT (SELECT count(*) FROM memories) AS memories,
                  (SELECT count(*) FROM input_journal WHERE state = 'pending' AND kind = 'message') AS pending""")
    out = {"session_id": api.session_id, "memories": row["memories"], "pending_messages": row["pending"]}
    if api.erasure is not None:
        out["memory_mode"] = api.erasure.gates.mode.current
    return web.json_response(out)


async def cost(request: web.Request) -> web.Response:
    """What /cost prints, as numbers: spend by model and purpose (US dollars as decimal strings)."""
    totals = await request.app[API_KEY].ledger.totals()
    out = {"session_usd": totals.session_cost, "day_usd": totals.day_cost, "lifetime_usd": totals.lifetime_cost,
           "rows": [asdict(r) for r in totals.rows], "pending": totals.pending,
           "database_error": totals.database_error}
    return web.json_response(out, dumps=lambda o: json.dumps(o, default=str))


async def readiness_route(request: web.Request) -> web.Response:
    rows = await readiness(request.app[API_KEY].pool)
    return web.json_response([{"number": n, "key": a.key, "title": a.title,
                               "reached_at": a.reached_at.isoformat() if a.reached_at else None}
                              for n, a in enumerate(rows, 1)])


async def held(request: web.Request) -> web.Response:
    rows = await held_repository.held_items(request.app[API_KEY].pool)
    return web.json_response([{"scratch_id": r["scratch_id"], "why": r["why"], "action": r["action"],
                               "held_at": r["held_at"].isoformat(), "content": r["content"]} for r in rows])


def _erasure(request: web.Request) -> Erasure:
    erasure = request.app[API_KEY].erasure
    if erasure is None:
        raise MessageError(503, "this needs the running mind")
    return erasure


async def remember(request: web.Request) -> web.Response:
    """A statement through the entry gate as the user's (the exit gate decides at its flush)."""
    erasure, body = _erasure(request), await _body(request)
    text = request.app[API_KEY].messages.check(body.get("text"))
    return web.json_response(await erasure.remember(text), status=202)


async def forget_route(request: web.Request) -> web.Response:
    return web.json_response(await _erasure(request).forget(await _body(request)))


async def correct_route(request: web.Request) -> web.Response:
    return web.json_response(await _erasure(request).correct(await _body(request)), status=201)


async def held_answer(request: web.Request) -> web.Response:
    """The answer to copilot's "Keep these? (y/n/numbers)", as typed at the prompt."""
    erasure, body = _erasure(request), await _body(request)
    answer = body.get("answer")
    if not isinstance(answer, str) or not answer.strip():
        raise MessageError(400, '"answer" must be y, n or the numbers of the items to keep')
    reply = await erasure.gates.answer_confirmation(answer)
    if reply is None:
        raise MessageError(409, "no question about held items is open: it is asked after the next answer "
                                "while items are held (GET /api/v1/held lists them)")
    return web.json_response({"reply": reply})


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(document())


#: (method, path under /api/v1, handler): the router and the OpenAPI document are checked
#: against each other (tests/test_api.py).
ROUTES: tuple[tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]], ...] = (
    ("POST", "/messages", post_message),
    ("GET", "/messages", find_message),
    ("GET", "/messages/{message_id}", get_message),
    ("GET", "/memories/search", search),
    ("POST", "/memories", remember),
    ("POST", "/forget", forget_route),
    ("POST", "/correct", correct_route),
    ("POST", "/held/answer", held_answer),
    ("GET", "/status", status),
    ("GET", "/cost", cost),
    ("GET", "/readiness", readiness_route),
    ("GET", "/held", held),
    ("GET", "/openapi.json", openapi),
)


def build_api(api: Api, *, max_body: int) -> web.Application:
    """The sub-application mounted at /api/v1 (its body limit: one message and its JSON)."""
    app = web.Application(middlewares=[_errors], client_max_size=max_body)
    app[API_KEY] = api
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, handler)
    return app


__all__ = ["API_KEY", "MAX_WAIT_S", "ROUTES", "Api", "build_api"]
