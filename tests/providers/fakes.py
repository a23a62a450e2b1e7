"""Fake HTTP servers for the cloud clients, at the httpx2 transport seam.

`FakeServer` records every request and answers from a script (a queue of responses,
exceptions or callables); when the script is empty it answers with `default(request)`.
The canned bodies follow the real APIs' JSON shapes.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Callable
from typing import Any

import httpx2

Answer = httpx2.Response | BaseException | Callable[[httpx2.Request], Any]


def vector_for(text: str, dims: int = 768) -> list[float]:
    """A deterministic, not-unit-length vector per text (like Gemini at 768 dimensions)."""
    seed = hashlib.sha256(text.encode()).digest()
    return [((seed[i % 32] + i) % 17 - 8) / 4.0 for i in range(dims)]


def embed_key(text: str, task_type: str, title: str | None = None) -> str:
    """What the fake embeds: like the real API, the task type and title change the vector."""
    return f"{task_type}|{title}|{text}"


def gemini_embed_ok(request: httpx2.Request, dims: int | None = None) -> httpx2.Response:
    body = json.loads(request.content)
    out = []
    for item in body["requests"]:
        key = embed_key(item["content"]["parts"][0]["text"], item["taskType"], item.get("title"))
        out.append({"values": vector_for(key, dims or item.get("outputDimensionality", 768))})
    return httpx2.Response(200, json={"embeddings": out})


def gemini_generate_ok(text: str = "hello from gemini", tokens_in: int = 11, tokens_out: int = 4,
                       logprobs: list[tuple[str, float]] | None = None) -> httpx2.Response:
    candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"},
                                 "finishReason": "STOP"}
    if logprobs is not None:
        candidate["logprobsResult"] = {
            "chosenCandidates": [{"token": t, "logProbability": lp} for t, lp in logprobs],
            "topCandidates": []}
    return httpx2.Response(200, json={
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": tokens_in, "candidatesTokenCount": tokens_out,
                          "totalTokenCount": tokens_in + tokens_out},
        "modelVersion": "gemini-2.5-flash-lite"})


def anthropic_ok(text: str = "hello from claude", tokens_in: int = 20, tokens_out: int = 6) -> httpx2.Response:
    return httpx2.Response(200, json={
        "id": "msg_fake", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out}})


def openai_ok(text: str = "hello from llama", tokens_in: int = 9, tokens_out: int = 3,
              logprobs: list[tuple[str, float]] | None = None) -> httpx2.Response:
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                              "finish_reason": "stop"}
    if logprobs is not None:
        choice["logprobs"] = {"content": [{"token": t, "logprob": lp} for t, lp in logprobs]}
    return httpx2.Response(200, json={"id": "c1", "object": "chat.completion", "choices": [choice],
                                      "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out}})


def gemini_error(status: int, message: str, grpc_status: str, retry_delay: str | None = None) -> httpx2.Response:
    error: dict[str, Any] = {"code": status, "message": message, "status": grpc_status}
    if retry_delay:
        error["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}]
    return httpx2.Response(status, json={"error": error})


def anthropic_error(status: int, kind: str, message: str, headers: dict | None = None) -> httpx2.Response:
    return httpx2.Response(status, json={"type": "error", "error": {"type": kind, "message": message}},
                           headers=headers)


class FakeServer:
    """A scripted HTTP server behind an httpx2 MockTransport."""

    def __init__(self, default: Callable[[httpx2.Request], Any] | None = None):
        self.requests: list[httpx2.Request] = []
        self.script: deque[Answer] = deque()
        self.default = default

    def push(self, *answers: Answer) -> FakeServer:
        self.script.extend(answers)
        return self

    @property
    def bodies(self) -> list[dict]:
        return [json.loads(r.content) for r in self.requests]

    @property
    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self._handle)

    async def _handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer: Answer | None = self.script.popleft() if self.script else self.default
        if answer is None:
            raise AssertionError(f"unexpected request {request.method} {request.url}")
        if isinstance(answer, BaseException):
            if isinstance(answer, httpx2.RequestError):
                answer = type(answer)(str(answer), request=request)
            raise answer
        if callable(answer):
            answer = answer(request)
            if hasattr(answer, "__await__"):
                answer = await answer
        return answer


class Sleeps:
    """Injectable sleep that records the delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


class FakeClock:
    """Injectable monotonic clock moved by hand."""

    def __init__(self, start: float = 1000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


FAKE_GEMINI_KEY = "AIzaFAKE-gemini-key-0123456789abcdef"
FAKE_ANTHROPIC_KEY = "sk-ant-FAKE-anthropic-key-0123456789"


def gemini_client(server: FakeServer, api_key: str = FAKE_GEMINI_KEY):
    """A real google-genai client whose HTTP goes to `server`."""
    from google import genai
    from google.genai import types as genai_types

    http = httpx2.AsyncClient(transport=server.transport)
    return genai.Client(api_key=api_key, vertexai=False,
                        http_options=genai_types.HttpOptions(httpx_async_client=http))


def anthropic_client(server: FakeServer, api_key: str = FAKE_ANTHROPIC_KEY):
    """A real AsyncAnthropic client (SDK retries off) whose HTTP goes to `server`."""
    import anthropic

    return anthropic.AsyncAnthropic(api_key=api_key, base_url="https://api.anthropic.com", max_retries=0,
                                    http_client=httpx2.AsyncClient(transport=server.transport))
