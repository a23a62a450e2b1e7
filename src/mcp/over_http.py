"""The running mind reached through its HTTP API (src/api), for the stdio server: a
desktop client starts `python -m src.mcp`, which holds no database connection of its own.

Every failure becomes the API's `MessageError`, translated here and only here: a refused
connection says the mind is not running at that address and how to start it or point
elsewhere; a 401 says which token to set; any other refusal carries the API's own words.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import aiohttp

from src.api.messages import MessageError

#: Beyond the reply's own wait: time for the request and its answer to travel.
SLACK_S = 30.0
#: The channel a message from an MCP client is journalled under (src/loop/input_journal.py).
CHANNEL_HEADER = "X-MoltBot-Channel"


class OverHttp:
    """`MindAccess` (src/mcp/access.py) over the HTTP API at `base_url` (ending in '/')."""

    def __init__(self, base_url: str, token: str | None = None):
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def remember(self, text: str) -> dict[str, Any]:
        return await self._call("POST", "memories", json={"text": text})

    async def recall(self, query: str, k: int) -> dict[str, Any]:
        return await self._call("GET", "memories/search", params={"q": query, "k": str(k)})

    async def ask(self, text: str, wait_s: float) -> dict[str, Any]:
        headers = {"Idempotency-Key": str(uuid.uuid4()), CHANNEL_HEADER: "mcp"}
        return await self._call("POST", "messages", json={"text": text, "wait_s": wait_s}, headers=headers,
                                wait_s=wait_s)

    async def reply(self, message_id: int, wait_s: float) -> dict[str, Any]:
        return await self._call("GET", f"messages/{message_id}", params={"wait_s": str(wait_s)}, wait_s=wait_s)

    async def forget(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call("POST", "forget", json=body)

    async def status(self) -> dict[str, Any]:
        return await self._call("GET", "status")

    async def _call(self, method: str, path: str, *, wait_s: float = 0.0, headers: dict[str, str] | None = None,
                    **kwargs: Any) -> dict[str, Any]:
        if self._http is None:
            self._http = aiohttp.ClientSession(headers=self._headers)
        url = f"{self.base_url}api/v1/{path}"
        try:
            async with self._http.request(method, url, headers=headers,
                                          timeout=aiohttp.ClientTimeout(total=wait_s + SLACK_S), **kwargs) as r:
                status, raw = r.status, await r.text()
        except aiohttp.ClientConnectorError:
            raise MessageError(503, f"the mind is not running at {self.base_url} (nothing answers there): "
                                    "start it with `make run` (python -m src.main), or point --url / "
                                    "MOLTBOT_API_URL at its web server") from None
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise MessageError(503, f"the mind at {self.base_url} did not answer ({type(exc).__name__}); "
                                    "is it running?") from None
        if status == 401:
            raise MessageError(401, f"the mind at {self.base_url} wants its token: set MOLTBOT_WEB_TOKEN "
                                    "to the value the mind was started with")
        try:
            body = json.loads(raw)
        except ValueError:
            raise MessageError(502, f"{self.base_url} answered something that is not the MoltBot API "
                                    f"({status}, not JSON): is --url / MOLTBOT_API_URL the mind's web "
                                    "server?") from None
        if status >= 400:
            said = body.get("error") if isinstance(body, dict) else None
            raise MessageError(status, said or f"the API answered {status} to {method} /api/v1/{path}")
        return body if isinstance(body, dict) else {"result": body}


__all__ = ["CHANNEL_HEADER", "OverHttp"]
