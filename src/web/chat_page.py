"""`/chat`: talk to the mind from a browser, without script (issue 41 item 3).

The page is a plain HTML form. `POST /chat` sends one message through the HTTP API's
`Messages` (src/api/messages.py) on the `page` channel: the same input journal, the same
order and the same once-only answer as a typed line, and its reply comes back to this page
(the terminal shows both as quiet lines). Then the browser is sent back to `GET /chat`
(303, post/redirect/get), so a reload never posts twice; the form's Idempotency key, new
with each form shown, makes a double click or a browser's re-POST store the line once.

`GET /chat` shows the one conversation of the mind, whichever way each message came
(terminal, HTTP API, this page, MCP): the newest `LIMIT` messages from the input journal,
and each reply from the cycle that answered it (or from the reply board, which alone has a
reply's words in memory mode off). While a reply is on its way the page reloads itself
every `REFRESH_S` seconds with a `<meta>` refresh (the view's CSP allows no script) and
hides the form, whose text a reload would wipe; a link stops the reloading to write meanwhile.

Who may post is src/web/form_guard.py. The view's own pool only reads; the message is
written by the journal's pool, through `Messages`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aiohttp import web

from src.api.messages import MessageError, Messages
from src.db.pool import DB_ERRORS
from src.loop.input_journal import is_command
from src.loop.replies import Reply
from src.recall.when import said_when
from src.web import queries as q
from src.web.errors import Refused
from src.web.escape import esc
from src.web.form_guard import FormGuard, refused_source
from src.web.html import Page
from src.web.view import View

#: Messages shown: the newest, with their replies.
LIMIT = 50
#: Characters of one message or reply shown (a message may be agent.max_input_chars long).
SHOWN_CHARS = 20_000
#: Seconds between reloads while a reply is on its way.
REFRESH_S = 2
#: Where each message came from, as the page says it ("You, at the terminal").
WHERE = {"terminal": "at the terminal", "api": "over the HTTP API", "page": "on this page",
         "mcp": "from an MCP client"}
STANDALONE = ("this viewer (python -m src.web) only reads the mind's database; talk to the mind on the "
              "page of the running service (python -m src.main)")


@dataclass
class ChatDesk:
    """What the chat page sends through: the HTTP API's `Messages`, or why there is none here."""

    messages: Messages | None
    unavailable: str = ""           # why the page shows no form (messages is None)
    guard: FormGuard = field(default_factory=FormGuard)

    @classmethod
    def closed(cls, why: str) -> ChatDesk:
        return cls(None, why)

    def max_body(self) -> int:
        """The largest form this page reads: a message of agent.max_input_chars characters,
        percent-encoded (up to 12 bytes a character), and its two hidden fields."""
        chars = self.messages.max_chars if self.messages is not None else 0
        return max(1024 ** 2, 12 * chars + 4096)


async def show(view: View, desk: ChatDesk, *, reload: bool = True, error: str | None = None,
               text: str = "", status: int = 200) -> Page:
    """The conversation, and the form (with `error` and the refused `text` after a refused post)."""
    messages = desk.messages
    posted: Callable[[int], Reply | None] = messages.replies.get if messages is not None else _nothing
    unread = None
    try:
        rows = await q.chat_lines(view.pool, LIMIT, SHOWN_CHARS)
    except DB_ERRORS:
        rows, unread = [], ("the database is not answering, so the conversation cannot be read now; a message "
                            "sent meanwhile is held and delivered when it is back")
    held = messages.journal.held() if messages is not None else []
    entries = conversation(rows, posted) + [
        {"who": "user", "channel": line.channel, "id": None, "text": line.text[:SHOWN_CHARS],
         "text_chars": len(line.text), "at": None, "state": "held"} for line in held]
    waiting = any(e.get("state") in ("pending", "held") for e in entries)
    data = {"available": messages is not None, "why_not": desk.unavailable or None, "limit": LIMIT,
            "waiting": waiting, "error": error, "database": unread, "conversation": entries}
    key = str(uuid.uuid4())
    now = view.clock()

    def body() -> list[str]:     # built in a worker thread (src/web/app.py)
        out = [f"<p class=muted>One conversation with the mind, whichever way each message came: the "
               f"terminal, this page, the HTTP API or an MCP client. The newest {LIMIT} messages.</p>"]
        if unread:
            out.append(f"<p class=err>{esc(unread)}</p>")
        out.append(_conversation_html(entries, now))
        if messages is None:
            out.append(f"<p class=err>You cannot write to the mind here: {esc(desk.unavailable)}.</p>")
        elif waiting and reload and error is None:
            out.append(f"<p class=muted>Waiting for the mind's reply: this page reloads itself every {REFRESH_S} s "
                       "until it is here. <a href=\"/chat?reload=off\">Write meanwhile</a> (the page then "
                       "stops reloading).</p>")
        else:
            out.append(_form(desk, key, text, error, messages.max_chars))
            if waiting:
                out.append("<p class=muted><a href=\"/chat\">Wait for the reply</a> (the page reloads itself "
                           "until it is here).</p>")
        return out

    refresh = REFRESH_S if waiting and reload and error is None and messages is not None else None
    note = "Messages sent here are journaled and answered like a typed line." if messages is not None else \
        "Read-only view."
    return Page("Chat", data, body, status=status, refresh_s=refresh, note=note)


async def post(request: web.Request, view: View, desk: ChatDesk) -> Page | None:
    """Send the form's message; None when it was sent (or held): the caller redirects to
    GET /chat. A message the mind cannot take comes back as the form with the error.
    A post not from this server's own form raises Refused (403)."""
    if desk.messages is None:
        raise Refused(405, f"the chat page takes no messages here: {desk.unavailable}")
    refusal = refused_source(origin=request.headers.get("Origin"), referer=request.headers.get("Referer"),
                             host=request.host, token_set=view.settings.token is not None)
    if refusal is not None:         # before the body is read: another site's post costs nothing
        raise Refused(403, refusal)
    try:
        form = await request.post()
    except web.HTTPRequestEntityTooLarge:
        return await show(view, desk, error=f"the message is longer than the "
                                            f"{desk.messages.max_chars:,} characters allowed "
                                            "(agent.max_input_chars); nothing was stored", status=413)
    key, given, text = (_field(form, name) for name in ("key", "csrf", "text"))
    refusal = desk.guard.refused_form(key, given)
    if refusal is not None:
        raise Refused(403, refusal)
    if not text.strip():
        return await show(view, desk, error="the message was empty; nothing was stored", status=400)
    if is_command(text):
        return await show(view, desk, error="a line starting with '/' is a command; commands are typed at the "
                                            "terminal. Nothing was stored", text=text, status=400)
    try:
        await desk.messages.send(text, key, 0.0, channel="page")
    except MessageError as exc:     # too long (413); a key not a UUID is no form of this page (400)
        return await show(view, desk, error=str(exc), text=text, status=exc.status)
    return None


def conversation(rows: Sequence[Mapping[str, Any]],
                 posted: Callable[[int], Reply | None]) -> list[dict[str, Any]]:
    """The journal's messages and their replies as one list in the order they were said.

    `rows`: src/web/queries.chat_lines, oldest first. `posted`: the reply board's reply to a
    journal id (its words in memory mode off, where thought_log keeps a placeholder; or one
    delivered before its row says answered). A turn that answered several messages at once
    is one reply, after the last of them.
    """
    entries: list[dict[str, Any]] = []
    replies: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        board = posted(r["id"])
        state = "answered" if board is not None else r["state"]
        entries.append({"who": "user", "channel": r["channel"], "id": r["id"], "text": r["text"],
                        "text_chars": r["text_chars"], "at": r["received_at"], "state": state})
        if state != "answered":
            continue
        cycle = (r["answered_session"], r["answered_cycle"]) if r["answered_cycle"] is not None else (r["id"],)
        reply = replies.get(cycle)
        if reply is None:
            text, chars = ((board.text[:SHOWN_CHARS], len(board.text)) if board is not None
                           else (r["reply"], r["reply_chars"]))
            reply = replies[cycle] = {"who": "mind", "channel": r["channel"], "answers": [],
                                      "text": text, "text_chars": chars,
                                      "at": board.at if board is not None else r["answered_at"]}
        reply["answers"].append(r["id"])
    said = entries + list(replies.values())
    # a reply after the messages it answers; a message typed while the mind thought, before it
    return sorted(said, key=lambda e: (e["at"] is None, e["at"] or datetime.min, e["who"] == "mind",
                                       e.get("id") or max(e.get("answers") or [0])))


def _conversation_html(entries: list[dict[str, Any]], now: datetime) -> str:
    if not entries:
        return "<p class=muted>Nothing said yet.</p>"
    # a box of the window's height that starts scrolled to its end (column-reverse around one
    # child): the newest message and the form under it are in view without a script to scroll
    return "<div class=talk><ol class=chat>" + "".join(_entry_html(e, now) for e in entries) + "</ol></div>"


def _entry_html(e: Mapping[str, Any], now: datetime) -> str:
    when = said_when(e["at"], now) if e["at"] is not None else ""
    if e["who"] == "mind":
        ids = ", ".join(f"#{i}" for i in e["answers"])
        head = f"MoltBot · {when} · the reply to message{'s' if len(e['answers']) > 1 else ''} {ids}"
        text = e["text"] if e["text"] is not None else "(the reply was not recorded)"
        return f"<li class=mind><div class=who>{esc(head)}</div><div class=said>{esc(text)}{_more(e)}</div></li>"
    head = f"You, {WHERE.get(e['channel'], e['channel'])}" + (f" · {when} · message #{e['id']}" if when else "")
    wait = {"pending": "waiting for the reply…",
            "held": "held: the database is away; it is stored and answered when it is back"}.get(e["state"])
    cls = "you wait" if wait else "you"
    note = f"<div class=who>{esc(wait)}</div>" if wait else ""
    return (f"<li class=\"{cls}\"><div class=who>{esc(head)}</div>"
            f"<div class=said>{esc(e['text'])}{_more(e)}</div>{note}</li>")


def _more(e: Mapping[str, Any]) -> str:
    """The note on a text cut to SHOWN_CHARS."""
    left = (e["text_chars"] or 0) - len(e["text"] or "")
    return f" <span class=muted>… ({left:,} more characters)</span>" if left > 0 else ""


def _form(desk: ChatDesk, key: str, text: str, error: str | None, max_chars: int) -> str:
    """The form: the message, its Idempotency key and the key's check token (form_guard)."""
    err = f"<p class=err>{esc(error)}</p>" if error else ""
    return (f"{err}<form class=chat method=post action=\"/chat\">"
            f"<input type=hidden name=key value=\"{esc(key)}\">"
            f"<input type=hidden name=csrf value=\"{esc(desk.guard.token(key))}\">"
            f"<input type=text name=text value=\"{esc(text)}\" maxlength={max_chars:d} required autofocus "
            "autocomplete=off aria-label=\"Your message\" placeholder=\"Write to the mind…\">"
            "<button type=submit>Send</button></form>")


def _field(form: Mapping[str, Any], name: str) -> str:
    """A text field of the posted form; "" when absent or a file."""
    value = form.get(name)
    return value if isinstance(value, str) else ""


def _nothing(_: int) -> Reply | None:
    return None


__all__ = ["LIMIT", "STANDALONE", "ChatDesk", "conversation", "post", "show"]
