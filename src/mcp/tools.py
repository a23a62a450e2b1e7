"""The MCP server: six tools over the mind, their descriptions written for the model that
reads them, their input schemas bounded as the HTTP API bounds the same fields.

`ask` waits up to `wait_s` for the mind's reply; a turn may take longer (a slow model, a
queue of messages), so an unanswered `ask` returns the message's id, and `reply` fetches the
answer later: the message is journalled and answered once either way. `remember` returns
once the statement is stored by the entry gate; no model is called (the exit gate decides
at its next flush whether it becomes a memory). `recall` is read-only and calls no model.

Refusals (`MessageError`, from either way of reaching the mind) become tool errors with the
API's words, so a model reads what was wrong and how to fix it, never a traceback.

No `from __future__ import annotations` here: the SDK reads the tools' annotations, whose
limits come from the settings passed to `build_server`, at registration.
"""

from collections.abc import Awaitable
from typing import Annotated, Any, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from src.api.erasure import MAX_IDS
from src.api.messages import MessageError
from src.api.routes import MAX_K, MAX_WAIT_S
from src.mcp.access import MindAccess
from src.mcp.prompts import ASK, FORGET, HELD, INSTRUCTIONS, RECALL, REMEMBER, REPLY, STATUS

T = TypeVar("T")



def build_server(mind: MindAccess, *, max_chars: int) -> MCPServer:
    """The MCP server of the mind; texts are limited to `max_chars` (agent.max_input_chars)."""
    # MCPServer calls logging.basicConfig: a no-op, as the process has set up its root logger
    # before (src/logging_setup.py beside the mind; src/mcp/__main__.py, stderr only, for stdio)
    server = MCPServer("moltbot", title="MoltBot", instructions=INSTRUCTIONS)
    Text = Annotated[str, Field(min_length=1, max_length=max_chars)]
    Wait = Annotated[float, Field(ge=0, le=MAX_WAIT_S, description="seconds to wait for the reply")]

    @server.tool(description=REMEMBER, annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def remember(statement: Annotated[Text, Field(description="the statement to remember")]) -> dict[str, Any]:
        return await _answer(mind.remember(statement))

    @server.tool(description=RECALL, annotations=ToolAnnotations(read_only_hint=True))
    async def recall(query: Annotated[Text, Field(description="what to search for")],
                     k: Annotated[int, Field(ge=1, le=MAX_K, description="how many memories")] = 5) -> dict[str, Any]:
        return await _answer(mind.recall(query, k))

    @server.tool(description=ASK, annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def ask(message: Annotated[Text, Field(description="what to say to the mind")],
                  wait_s: Wait = 30.0) -> dict[str, Any]:
        sent = await _answer(mind.ask(message, wait_s))
        return _how_to_get_the_reply(sent)

    @server.tool(description=REPLY, annotations=ToolAnnotations(read_only_hint=True))
    async def reply(message_id: Annotated[int, Field(ge=1, lt=2**63, description="the id `ask` returned")],
                    wait_s: Wait = 30.0) -> dict[str, Any]:
        return _how_to_get_the_reply(await _answer(mind.reply(message_id, wait_s)))

    @server.tool(description=FORGET, annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    async def forget(ids: Annotated[list[Annotated[int, Field(ge=1, lt=2**63)]] | None,
                                    Field(min_length=1, max_length=MAX_IDS, description="memory ids")] = None,
                     match: Annotated[Text | None, Field(description="words whose every trace goes")] = None,
                     confirm: Annotated[bool, Field(description="true: really forget")] = False) -> dict[str, Any]:
        body: dict[str, Any] = {"confirm": confirm}
        if ids is not None:
            body["ids"] = ids
        if match is not None:
            body["match"] = match
        return await _answer(mind.forget(body))

    @server.tool(description=STATUS, annotations=ToolAnnotations(read_only_hint=True))
    async def status() -> dict[str, Any]:
        return await _answer(mind.status())

    return server


async def _answer(call: Awaitable[T]) -> T:
    """The mind's answer, or a tool error in the API's words (the one place they are mapped)."""
    try:
        return await call
    except MessageError as exc:
        raise ToolError(str(exc)) from None


def _how_to_get_the_reply(sent: dict[str, Any]) -> dict[str, Any]:
    """A message's JSON with the HTTP API's `poll` URL replaced by the tool that polls here."""
    out = {k: v for k, v in sent.items() if k != "poll"}
    if out.get("state") == "pending" and out.get("id") is not None:
        out["note"] = f"not answered yet: call `reply` with message_id={out['id']} to get the answer"
    elif out.get("state") == "held":
        out["note"] = HELD.format(key=out.get("key"))
    return out


__all__ = ["build_server"]
