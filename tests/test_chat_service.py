"""The chat page of a real service (`python -m src.main`, a subprocess): a message posted with
the page's form is answered on the page, and the terminal shows both as quiet lines."""

from __future__ import annotations

import asyncio
import re
import time

import aiohttp

from tests.web_service import Service, post_chat

REFRESH = '<meta http-equiv="refresh" content="2">'


async def test_a_message_posted_with_the_form_is_answered_on_the_page(db_dsn, tmp_path):
    service = Service(db_dsn, tmp_path)
    try:
        async with aiohttp.ClientSession(base_url=service.url) as http:
            await post_chat(http, service.url, "My sister Maren lives in Lisbon.")
            deadline = time.monotonic() + 60
            while True:
                async with http.get("/chat") as r:
                    html = await r.text()
                if REFRESH not in html or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
    finally:
        out, _ = service.stop()
    assert REFRESH not in html, html
    you = re.search(r"You, on this page · today, \d\d:\d\d · message #(\d+)</div><div class=said>"
                    r"My sister Maren lives in Lisbon\.</div>", html)
    assert you is not None, html
    mid = you[1]
    reply = re.search(rf"MoltBot · today, \d\d:\d\d · the reply to message #{mid}</div><div class=said>"
                      r"(\(reflex mode — [^<]*)</div>", html)
    assert reply is not None, html
    assert f"(from the chat page, message {mid}) My sister Maren lives in Lisbon." in out
    assert f"(answered on the chat page, message {mid}) (reflex mode — " in out
