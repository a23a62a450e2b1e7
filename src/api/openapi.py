"""The OpenAPI 3.1 document of the HTTP API (src/api/routes.py), served at
/api/v1/openapi.json; tests/test_api.py checks that it names every route and no other."""

from __future__ import annotations

from typing import Any

_ERROR = {"description": "refused or failed: {\"error\": \"what is wrong\"}",
          "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
_MESSAGE = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Message"}}}}


def _ok(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": schema or {"type": "object"}}}}


def _text_body(what: str) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "required": ["text"], "properties": {"text": {"type": "string", "description": what}}}}}}


_BY_KEY = {
    "summary": "A message by the Idempotency-Key it was sent with: also one held while the database is away",
    "parameters": [{"name": "key", "in": "query", "required": True, "schema": {"type": "string", "format": "uuid"}},
                   {"name": "wait_s", "in": "query", "required": False,
                    "schema": {"type": "number", "minimum": 0, "maximum": 120}}],
    "responses": {"200": {"description": "the message", **_MESSAGE}, "400": _ERROR, "404": _ERROR}}


def _message_paths() -> dict[str, Any]:
    """Messages in and their replies."""
    paths = _message_routes()
    paths["/messages"]["get"] = _BY_KEY
    return paths


def _message_routes() -> dict[str, Any]:
    return {
        "/messages": {"post": {
            "summary": "Send a message; the reply when it comes within wait_s, else 202 and a URL to poll",
            "description": "Stored in the input journal before the answer (durable; a restart answers it). "
                           "An Idempotency-Key (UUID) makes a retry store and answer nothing twice.",
            "parameters": [{"name": "Idempotency-Key", "in": "header", "required": False,
                            "schema": {"type": "string", "format": "uuid"}},
                           {"name": "X-MoltBot-Channel", "in": "header", "required": False,
                            "description": "who sends it: api (default) or mcp (an MCP client over this API)",
                            "schema": {"type": "string", "enum": ["api", "mcp"]}}],
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["text"],
                "properties": {"text": {"type": "string"},
                               "wait_s": {"type": "number", "minimum": 0, "maximum": 120}}}}}},
            "responses": {"200": {"description": "answered", **_MESSAGE},
                          "202": {"description": "stored, not answered yet (state pending) or held while "
                                                 "the database is away (state held)", **_MESSAGE},
                          "400": _ERROR, "413": _ERROR, "503": _ERROR}}},
        "/messages/{message_id}": {"get": {
            "summary": "A message's state and reply; wait_s waits for a reply not yet given",
            "parameters": [{"name": "message_id", "in": "path", "required": True, "schema": {"type": "integer"}},
                           {"name": "wait_s", "in": "query", "required": False,
                            "schema": {"type": "number", "minimum": 0, "maximum": 120}}],
            "responses": {"200": {"description": "the message", **_MESSAGE}, "404": _ERROR}}},
    }


def _memory_paths() -> dict[str, Any]:
    """Memory and the mind's state."""
    return {
        "/memories/search": {"get": {
            "summary": "Recall without changing anything (the pipeline of `python -m src.memory search --json`)",
            "parameters": [{"name": "q", "in": "query", "required": True, "schema": {"type": "string"}},
                           {"name": "k", "in": "query", "required": False,
                            "schema": {"type": "integer", "minimum": 1, "maximum": 50}}],
            "responses": {"200": _ok("the query, the blend, each memory with every score and `said`"),
                          "400": _ERROR}}},
        "/memories": {"post": {
            "summary": "Remember a statement: through the entry gate as the user's; the exit gate decides",
            "requestBody": _text_body("the statement"),
            "responses": {"202": _ok("buffered (scratch_id) or dropped by the entry gate"),
                          "400": _ERROR, "413": _ERROR}}},
        "/forget": {"post": {
            "summary": "Forget memories by id or every trace of some words; without confirm, what would go",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "properties": {
                    "ids": {"type": "array", "items": {"type": "integer"}},
                    "match": {"type": "string"}, "confirm": {"type": "boolean"}}}}}},
            "responses": {"200": _ok("the matches and a dry run's counts, or the receipt"),
                          "400": _ERROR, "404": _ERROR}}},
        "/correct": {"post": {
            "summary": "Store a correction of a memory (the old kept as earlier unless forget_old)",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["id", "text"], "properties": {
                    "id": {"type": "integer"}, "text": {"type": "string"},
                    "forget_old": {"type": "boolean"}}}}}},
            "responses": {"201": _ok("the new memory's id"), "400": _ERROR, "404": _ERROR}}},
        "/held/answer": {"post": {
            "summary": "Answer copilot's open question about held items: y, n or the numbers to keep",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}}}}}},
            "responses": {"200": _ok("what was kept and dropped"), "400": _ERROR, "409": _ERROR}}},
        "/status": {"get": {"summary": "The session, the store's size, messages waiting",
                            "responses": {"200": _ok("status")}}},
        "/cost": {"get": {"summary": "Model spend by model and purpose: session, last 24 h, lifetime",
                          "responses": {"200": _ok("spend; dollars as decimal strings")}}},
        "/readiness": {"get": {"summary": "The ten readiness milestones and when each was reached",
                               "responses": {"200": _ok("milestones", {"type": "array"})}}},
        "/held": {"get": {"summary": "Memories copilot holds for the guardian's decision",
                          "responses": {"200": _ok("held items", {"type": "array"})}}},
        "/openapi.json": {"get": {"summary": "This document", "responses": {"200": _ok("OpenAPI 3.1")}}},
    }


def document() -> dict[str, Any]:
    """The document (a new dict each call)."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "MoltBot API", "version": "1",
                 "description": "Talk to the running mind and read its memory. Loopback without a token; "
                                "any other address only with `Authorization: Bearer <MOLTBOT_WEB_TOKEN>`."},
        "servers": [{"url": "/api/v1"}],
        "paths": {**_message_paths(), **_memory_paths()},
        "components": {"schemas": {
            "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
            "Message": {"type": "object", "required": ["id", "state"], "properties": {
                "id": {"type": ["integer", "null"], "description": "the input journal's id; null while held"},
                "key": {"type": "string", "description": "the Idempotency-Key"},
                "state": {"enum": ["held", "pending", "answered", "done", "skipped"]},
                "reply": {"type": "string"},
                "poll": {"type": "string", "description": "where to ask again"}}},
        }},
    }


__all__ = ["document"]
