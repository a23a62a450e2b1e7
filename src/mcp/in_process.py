"""The mind reached in its own process, for /mcp on its web server: the objects the HTTP
API's routes call (src/api), with the routes' checks, so a tool and its route cannot differ."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from src.api.erasure import Erasure
from src.api.messages import MessageError, idempotency_key
from src.api.routes import Api, recall, status_of


@dataclass(frozen=True)
class InProcess:
    """`MindAccess` (src/mcp/access.py) on the API's in-process objects."""

    api: Api

    async def remember(self, text: str) -> dict[str, Any]:
        return await self._erasure().remember(self.api.messages.check(text))

    async def recall(self, query: str, k: int) -> dict[str, Any]:
        if not query.strip():
            raise MessageError(400, "say what to search for: some words")
        return await recall(self.api, query.strip(), k)

    async def ask(self, text: str, wait_s: float) -> dict[str, Any]:
        # a new key per call: a tool call is not retried by the SDK, and the model asks anew
        sent = await self.api.messages.send(text, idempotency_key(None), wait_s, channel="mcp")
        return sent.json()

    async def reply(self, message_id: int, wait_s: float) -> dict[str, Any]:
        return (await self.api.messages.state(message_id, wait_s)).json()

    async def forget(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._erasure().forget(body)

    async def status(self) -> dict[str, Any]:
        return await status_of(self.api)

    def _erasure(self) -> Erasure:
        if self.api.erasure is None:
            raise MessageError(503, "this needs the running mind")
        return self.api.erasure


__all__ = ["InProcess"]
