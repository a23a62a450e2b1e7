"""What the MCP tools need of the mind: one interface, two ways to reach it.

`InProcess` (src/mcp/in_process.py) calls the objects the HTTP API's routes call, for /mcp
on the mind's web server; `OverHttp` (src/mcp/over_http.py) calls the HTTP API of a running
mind, for the stdio server. Both answer the route's JSON and refuse with the route's
`MessageError` (its status and the text a client reads), so the tools (src/mcp/tools.py)
map one error type in one place.
"""

from __future__ import annotations

from typing import Any, Protocol


class MindAccess(Protocol):
    """The running mind as the MCP tools reach it."""

    async def remember(self, text: str) -> dict[str, Any]:
        """POST /api/v1/memories: the entry gate's decision once the line is stored."""

    async def recall(self, query: str, k: int) -> dict[str, Any]:
        """GET /api/v1/memories/search: read-only recall, no model call."""

    async def ask(self, text: str, wait_s: float) -> dict[str, Any]:
        """POST /api/v1/messages (channel mcp): the reply, or the message's id and state."""

    async def reply(self, message_id: int, wait_s: float) -> dict[str, Any]:
        """GET /api/v1/messages/<id>: the reply to an earlier `ask`, waiting up to `wait_s`."""

    async def forget(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /api/v1/forget: what would go, or (confirm) the receipt."""

    async def status(self) -> dict[str, Any]:
        """GET /api/v1/status."""


__all__ = ["MindAccess"]
