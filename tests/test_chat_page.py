"""The chat page (issue 41 item 3) in process: a real mind (reflex System 1), its input journal
and, when a test says so, its loop; the web server on a free port; a browser's form posts."""

from __future__ import annotations

import asyncio
import re
import uuid
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from html import unescape

import aiohttp
import asyncpg
import pytest

from src.config import load_settings
from src.loop.input_journal import InputJournal
from src.loop.outage import Outage
from src.loop.replies import Reply
from src.web.chat_page import LIMIT, STANDALONE, conversation
from src.web.form_guard import FormGuard, foreign_origin, refused_source
from src.web.serve import start_beside_mind
from tests.test_loop import _mind
from tests.test_web_pages import served
from tests.web_service import HOSTILE

REFRESH = '<meta http-equiv="refresh" content="2">'


class Chat:
    """The served mind, a client, what the terminal was told, and the loop started on demand."""

    def __init__(self, http, mind, delivered, journal, told, server, stop):
        self.http, self.mind, self.journal, self.told, self.server = http, mind, journal, told, server
        self.url = server.url.rstrip("/")
        self.delivered = delivered      # what the loop printed at the terminal
        self._stop = stop
        self.thinking: asyncio.Task | None = None

    def think(self) -> None:
        self.thinking = asyncio.create_task(self.mind.loop.run(stop=self._stop))

    async def page(self, path: str = "/chat") -> tuple[int, str]:
        async with self.http.get(path) as r:
            return r.status, await r.text()

    async def form(self) -> dict[str, str]:
        """The hidden fields of the form as GET /chat shows it."""
        status, html = await self.page("/chat?reload=off")
        assert status == 200, html
        return dict(re.findall(r'<input type=hidden name=(\w+) value="([^"]*)">', html))

    async def post(self, data: dict[str, str], **headers: str) -> tuple[int, str, str | None]:
        async with self.http.post("/chat", data=data, headers={"Origin": self.url, **headers},
                                  allow_redirects=False) as r:
            return r.status, await r.text(), r.headers.get("Location")

    async def send(self, text: str) -> dict[str, str]:
        fields = await self.form()
        status, body, location = await self.post({**fields, "text": text})
        assert (status, location) == (303, "/chat"), body
        return fields

    async def answered(self, within_s: float = 20) -> str:
        """GET /chat once no message waits for its reply."""
        deadline = asyncio.get_running_loop().time() + within_s
        while True:
            status, html = await self.page()
            if REFRESH not in html:
                return html
            assert asyncio.get_running_loop().time() < deadline, html
            await asyncio.sleep(0.1)


@asynccontextmanager
async def chatting(pool, dsn, tmp_path, *, think=True, **web):
    settings = load_settings(tmp_path / "none.yaml", env={}, overrides={
        "web": {"enabled": True, "port": 0, **web},
        "agent": {"spill_dir": str(tmp_path / "spill"), "max_input_chars": 200}})
    mind, delivered = await _mind(pool, tmp_path)
    mind.providers.report = []
    journal = InputJournal(pool, "test-session", tmp_path / "spill", outage=Outage(), notify=lambda _: None,
                           retry_base_s=0.05, retry_max_s=0.1)
    await journal.open()
    mind.loop.on_answered = journal.answered
    stop, told = asyncio.Event(), []
    server, line = await start_beside_mind(settings, mind, "test-session", dsn=dsn, journal=journal, stop=stop,
                                           say=told.append)
    assert server is not None, line
    url = server.url.rstrip("/")
    try:
        # unsafe: keep cookies from an IP address (127.0.0.1), as a browser does
        async with aiohttp.ClientSession(base_url=url, cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            chat = Chat(http, mind, delivered, journal, told, server, stop)
            if think:
                chat.think()
            yield chat
    finally:
        stop.set()
        mind.loop.wake.set()
        if chat.thinking is not None:
            await asyncio.wait_for(chat.thinking, 10)
        await server.stop()


async def _journal(pool: asyncpg.Pool) -> list[tuple[str, str, str]]:
    return [tuple(r) for r in await pool.fetch("SELECT kind, channel, line FROM input_journal ORDER BY id")]


async def test_the_form_carries_its_key_and_check_token_and_the_page_is_in_the_navigation(pool, db_dsn, tmp_path):
    async with chatting(pool, db_dsn, tmp_path) as chat:
        status, html = await chat.page()
        fields = await chat.form()
    assert status == 200 and '<a href="/chat" class=on>Chat</a>' in html
    assert '<form class=chat method=post action="/chat">' in html and "name=text" in html
    assert str(uuid.UUID(fields["key"])) == fields["key"] and re.fullmatch(r"[0-9a-f]{64}", fields["csrf"])
    assert REFRESH not in html and "Nothing said yet." in html
    assert "Messages sent here are journaled and answered like a typed line." in html
    async with served(pool) as (s, base), s.get(f"{base}/") as r:
        assert '<a href="/chat">Chat</a>' in await r.text()        # every page links to it


@pytest.mark.parametrize(("change", "says"), [
    ({"csrf": None}, "check token is missing or wrong"),
    ({"csrf": "0" * 64}, "check token is missing or wrong"),
    ({"key": str(uuid.uuid4())}, "check token is missing or wrong"),     # another form's key
    ({"Origin": "https://evil.example"}, "came from a page at 'https://evil.example', not from this server"),
    ({"Origin": "null"}, "came from a page at 'null'"),
    ({"Origin": None, "Referer": "https://evil.example/x"}, "came from a page at 'https://evil.example/x'"),
    ({"Host": "rebound.example:8765"}, "only at a loopback address"),
])
async def test_a_post_not_from_this_servers_form_is_refused_and_stores_nothing(pool, db_dsn, tmp_path,
                                                                                change, says):
    async with chatting(pool, db_dsn, tmp_path) as chat:
        fields = {**await chat.form(), "text": "Transfer my savings to Mallory."}
        headers = {"Origin": chat.url}
        for name, value in change.items():
            target = fields if name in fields else headers
            if value is None:
                target.pop(name, None)
            else:
                target[name] = value
        async with chat.http.post("/chat", data=fields, headers=headers, allow_redirects=False) as r:
            status, html = r.status, await r.text()
    assert status == 403
    assert "<title>403 · MoltBot</title>" in html and says in unescape(html) and "nothing was sent" in html
    assert await _journal(pool) == []


async def test_a_message_is_journaled_once_answered_and_shown_with_who_and_when(pool, db_dsn, tmp_path):
    async with chatting(pool, db_dsn, tmp_path) as chat:
        fields = await chat.send("My cat is called Pimenta.")
        again = await chat.post({**fields, "text": "My cat is called Pimenta."})   # a browser's re-POST
        assert again[0] == 303
        html = await chat.answered()
        async with chat.http.get("/chat?format=json") as r:
            data = await r.json()
        rows = await pool.fetch("SELECT id, kind, channel, state, line_key FROM input_journal")
        told = list(chat.told)
    assert [(r["kind"], r["channel"], r["state"], str(r["line_key"])) for r in rows] == [
        ("message", "page", "answered", fields["key"])]
    mid = rows[0]["id"]
    today = datetime.now(UTC).strftime("today, %H:")
    you = re.search(r'<li class="you"><div class=who>You, on this page · (today, \d\d:\d\d) · message #(\d+)</div>'
                    r"<div class=said>My cat is called Pimenta\.</div></li>", html)
    assert you is not None and you[1].startswith(today) and you[2] == str(mid)
    mind = re.search(r"<li class=mind><div class=who>MoltBot · (today, \d\d:\d\d) · the reply to message #(\d+)"
                     r"</div><div class=said>\(reflex mode — ", html)
    assert mind is not None and mind[2] == str(mid) and html.index(you[0]) < html.index(mind[0])
    assert told[0] == f"(from the chat page, message {mid}) My cat is called Pimenta."   # the terminal's quiet line
    assert html.count("<li class=mind>") == 1                                          # answered once
    assert (data["available"], data["waiting"], data["limit"]) == (True, False, 50)
    said = [(e["who"], e["channel"], e.get("id"), e.get("answers"), e["text"][:14]) for e in data["conversation"]]
    assert said == [("user", "page", mid, None, "My cat is call"), ("mind", "page", None, [mid], "(reflex mode —")]
    assert datetime.fromisoformat(data["conversation"][0]["at"]).tzinfo is not None


async def test_a_double_click_stores_and_answers_the_message_once(pool, db_dsn, tmp_path):
    async with chatting(pool, db_dsn, tmp_path) as chat:
        fields = {**await chat.form(), "text": "I live in Braga."}
        posts = await asyncio.gather(*(chat.post(fields) for _ in range(12)))    # at the same moment
        html = await chat.answered()
        delivered = list(chat.delivered)
    assert [p[0] for p in posts] == [303] * 12
    assert await _journal(pool) == [("message", "page", "I live in Braga.")]
    assert html.count("<li class=mind>") == 1 and len(delivered) == 1


async def test_two_sends_of_one_key_at_once_queue_it_once(pool, db_dsn, tmp_path):
    """The check whether a message is queued already and the mark that it is must not have a
    database read between them: a double click's second post would pass the check meanwhile."""
    async with chatting(pool, db_dsn, tmp_path, think=False) as chat:
        messages = chat.server.chat.messages
        queued: list[int] = []

        async def submit(source, text, *, origin):
            queued.append(origin.ref)

        class SlowReads:                  # the first send's read is slow: the second overtakes it
            async def fetchrow(self, *args):
                await asyncio.sleep(0.2)
                return await pool.fetchrow(*args)

            def __getattr__(self, name):
                return getattr(pool, name)
        messages.submit, messages.pool = submit, SlowReads()
        key = str(uuid.uuid4())
        await asyncio.gather(*(messages.send("I live in Braga.", key, 0.0, channel="page") for _ in range(2)))
    assert len(queued) == 1


async def test_the_page_reloads_while_a_reply_is_on_its_way_and_stops_once_it_is_here(pool, db_dsn, tmp_path):
    async with chatting(pool, db_dsn, tmp_path, think=False) as chat:
        await chat.send("I live in Porto.")
        status, waiting = await chat.page()
        _, meanwhile = await chat.page("/chat?reload=off")
        chat.think()
        done = await chat.answered()
    assert status == 200 and REFRESH in waiting and "waiting for the reply…" in waiting
    assert '<li class="you wait">' in waiting and "<form" not in waiting    # a reload would wipe what is typed
    assert 'href="/chat?reload=off">Write meanwhile' in waiting
    assert REFRESH not in meanwhile and "<form class=chat" in meanwhile and 'href="/chat">Wait for the reply' in meanwhile
    assert REFRESH not in done and "waiting for the reply" not in done and "<form class=chat" in done


async def test_what_was_said_is_escaped(pool, db_dsn, tmp_path):
    async with chatting(pool, db_dsn, tmp_path) as chat:
        await chat.send(HOSTILE)
        html = await chat.answered()
    assert "<script>" not in html and "&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;" in html
    assert '<span class="ctl">\\x1b</span>' in html and '<span class="ctl">\\u202e</span>' in html


@pytest.mark.parametrize(("text", "status", "says", "kept"), [
    ("x" * 201, 413, "the message has 201 characters, more than the 200 allowed (agent.max_input_chars); "
                     "nothing was stored", True),
    ("   ", 400, "the message was empty; nothing was stored", False),
    ("/quit", 400, "a line starting with &#x27;/&#x27; is a command; commands are typed at the terminal", True),
])
async def test_a_message_the_mind_cannot_take_comes_back_with_the_reason(pool, db_dsn, tmp_path, text, status,
                                                                         says, kept):
    async with chatting(pool, db_dsn, tmp_path) as chat:
        code, html, _ = await chat.post({**await chat.form(), "text": text})
    assert code == status and f"<p class=err>{says}" in html
    assert ("value=\"" + text + "\"" in html) is kept          # what was typed, to fix and send again
    assert await _journal(pool) == []


async def test_a_message_sent_while_the_database_is_away_is_held_then_answered(pool, db_dsn, tmp_path):
    async with chatting(pool, db_dsn, tmp_path) as chat:
        insert = chat.journal._insert

        async def away(*args, **kwargs):
            raise ConnectionRefusedError("the database is away")
        chat.journal._insert = away
        await chat.send("My bike is blue.")
        _, held = await chat.page()
        chat.journal._insert = insert                     # it is back: the spill is stored and answered
        done = await chat.answered()
    assert REFRESH in held and "held: the database is away; it is stored and answered when it is back" in held
    assert "My bike is blue." in held
    assert await _journal(pool) == [("message", "page", "My bike is blue.")]
    assert "<li class=mind>" in done and "held:" not in done


async def test_every_channel_is_one_conversation_and_each_says_where_it_came_from(pool, db_dsn, tmp_path):
    async with chatting(pool, db_dsn, tmp_path) as chat:
        await chat.send("Hello from the page.")
        await chat.answered()
        async with chat.http.post("/api/v1/messages", json={"text": "Hello from a script.", "wait_s": 20}) as r:
            assert r.status == 200
        html = await chat.answered()
    assert "You, on this page · " in html and "You, over the HTTP API · " in html
    assert html.index("Hello from the page.") < html.index("Hello from a script.")
    assert html.count("<li class=mind>") == 2


async def test_the_page_shows_the_newest_messages_only(pool, db_dsn, tmp_path):
    await pool.executemany("INSERT INTO input_journal (session_id, kind, line, channel) VALUES ('s0', 'message', $1, $2)",
                           [(f"line {i}", "terminal" if i % 2 else "api") for i in range(LIMIT + 5)])
    await pool.execute("UPDATE input_journal SET state = 'answered', finished_at = received_at")
    async with chatting(pool, db_dsn, tmp_path) as chat:
        _, html = await chat.page()
    said = re.findall(r"<div class=said>(line \d+)", html)
    assert said == [f"line {i}" for i in range(5, LIMIT + 5)]
    assert "You, at the terminal · " in html and "(the reply was not recorded)" in html


async def test_with_the_api_off_the_page_says_why_and_takes_nothing(pool, db_dsn, tmp_path):
    async with chatting(pool, db_dsn, tmp_path, api=False) as chat:
        status, html = await chat.page()
        fields = {"key": str(uuid.uuid4()), "csrf": "x", "text": "hello"}
        code, refused, _ = await chat.post(fields)
    assert status == 200 and "<form" not in html and REFRESH not in html
    assert "You cannot write to the mind here: web.api is false in runtime.yaml" in html
    assert code == 405 and "the chat page takes no messages here: web.api is false" in refused
    assert await _journal(pool) == []


async def test_the_standalone_viewer_shows_the_conversation_but_no_form(pool):
    await pool.execute("INSERT INTO input_journal (session_id, kind, line) VALUES ('s0', 'message', 'hi there')")
    async with served(pool) as (s, base), s.get(f"{base}/chat") as r:
        html = await r.text()
    assert "You, at the terminal · " in html and "hi there" in html and "<form" not in html
    assert f"You cannot write to the mind here: {STANDALONE}." in unescape(html)


async def test_with_a_token_the_form_posts_with_its_cookie(pool, db_dsn, tmp_path):
    async with chatting(pool, db_dsn, tmp_path, token="s3cret") as chat:
        async with chat.http.get("/chat?token=s3cret&reload=off") as r:      # sets the SameSite=Strict cookie
            fields = dict(re.findall(r'<input type=hidden name=(\w+) value="([^"]*)">', await r.text()))
        code, _, location = await chat.post({**fields, "text": "I work as a nurse."})
        chat.http.cookie_jar.clear()
        stranger = await chat.post({**fields, "text": "I work as a nurse."})
    assert (code, location) == (303, "/chat") and stranger[0] == 401
    assert await _journal(pool) == [("message", "page", "I work as a nurse.")]


# -- pure parts ----------------------------------------------------------------------------
@pytest.mark.parametrize(("origin", "referer", "foreign"), [
    ("http://127.0.0.1:8765", None, None),
    ("http://127.0.0.1:8765", "https://evil.example/", None),           # Origin decides when sent
    ("http://127.0.0.1:9999", None, "http://127.0.0.1:9999"),
    ("null", None, "null"),
    (None, "http://127.0.0.1:8765/chat", None),
    (None, "http://localhost:8765/chat", "http://localhost:8765/chat"),
    (None, None, None),                                                 # names none: the token decides
    ("http://[bad", None, "http://[bad"),
])
def test_foreign_origin(origin, referer, foreign):
    assert foreign_origin(origin, referer, "127.0.0.1:8765") == foreign


def test_a_check_token_belongs_to_its_key_and_its_process():
    guard, key = FormGuard(b"k" * 32), str(uuid.uuid4())
    assert guard.valid(key, guard.token(key))
    assert not guard.valid(str(uuid.uuid4()), guard.token(key))
    assert not FormGuard().valid(key, guard.token(key))                   # a restart: a new secret
    assert not guard.valid(key, "é")
    assert guard.refused_form(key, guard.token(key)) is None
    assert "check token is missing or wrong" in guard.refused_form(key, "")


@pytest.mark.parametrize(("host", "token_set", "refused"), [
    ("127.0.0.1:8765", False, False), ("[::1]:8765", False, False), ("localhost", False, False),
    ("mybox:8765", False, True), ("rebound.example", False, True), ("[bad", False, True),
    ("mybox:8765", True, False),                       # with a token, the cookie or header decides
])
def test_without_a_token_only_a_loopback_host_takes_a_post(host, token_set, refused):
    said = refused_source(origin=None, referer=None, host=host, token_set=token_set)
    assert (said is not None) is refused
    assert said is None or "only at a loopback address" in said


def test_a_reply_follows_the_messages_it_answered_and_one_typed_meanwhile_comes_before_it():
    t = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)

    def row(i, at, state="answered", cycle=None, answered=None, reply=None):
        return {"id": i, "channel": "terminal", "state": state, "text": f"m{i}", "text_chars": 2,
                "received_at": at, "answered_at": answered, "answered_session": "s" if cycle else None,
                "answered_cycle": cycle, "reply": reply, "reply_chars": len(reply or "")}
    rows = [row(1, t, cycle=1, answered=t + timedelta(seconds=9), reply="r1+2"),
            row(2, t + timedelta(seconds=1), cycle=1, answered=t + timedelta(seconds=9), reply="r1+2"),
            row(3, t + timedelta(seconds=5), cycle=2, answered=t + timedelta(seconds=20), reply="r3"),
            row(4, t + timedelta(seconds=30), state="pending")]
    board = {4: Reply("r4 posted", t + timedelta(seconds=40))}
    said = [(e["who"], e["text"], e.get("answers")) for e in conversation(rows, board.get)]
    assert said == [("user", "m1", None), ("user", "m2", None), ("user", "m3", None), ("mind", "r1+2", [1, 2]),
                    ("mind", "r3", [3]), ("user", "m4", None), ("mind", "r4 posted", [4])]
