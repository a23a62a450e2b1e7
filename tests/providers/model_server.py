"""A fake local model server (aiohttp, in-process, on a real socket) that records what it is sent.

Speaks `POST /v1/embeddings` (OpenAI shape), `POST /v1/rerank` (Jina shape) and `POST /rerank`
(TEI shape). Embeddings are bag-of-words vectors `dims` wide and not unit length (texts
sharing words point the same way, as with a real model); rerank scores are the share of the
query's words a passage has. `script` holds answers to give first (status, body) — a body
that is a str is sent as it is (malformed JSON) — after which the default answers.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from aiohttp import web
from aiohttp.test_utils import TestServer

_WORD = re.compile(r"[a-z0-9]+")


def word_vector(text: str, dims: int) -> list[float]:
    """Sum of one pseudo-random vector per word, scaled by 3 (so not unit length)."""
    out = np.zeros(dims)
    for word in _WORD.findall(text.lower()) or ["<empty>"]:
        seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big")
        out += np.random.default_rng(seed).standard_normal(dims)
    return list(3.0 * out / np.linalg.norm(out))


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: object


@dataclass
class ModelServer:
    dims: int = 1024
    seen: list[Seen] = field(default_factory=list)
    script: deque = field(default_factory=deque)
    url: str = ""
    _server: TestServer | None = None

    def sent(self, path: str) -> list[Seen]:
        return [s for s in self.seen if s.path == path]

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.text()
        body = json.loads(raw)
        self.seen.append(Seen(request.path, dict(request.headers), body))
        if self.script:
            status, answer = self.script.popleft()
            if isinstance(answer, str):
                return web.Response(status=status, text=answer, content_type="application/json")
            return web.json_response(answer, status=status)
        if request.path == "/v1/embeddings":
            data = [{"object": "embedding", "index": i, "embedding": word_vector(t, self.dims)}
                    for i, t in enumerate(body["input"])]
            data.reverse()   # the index, not the order, says which text a vector is for
            return web.json_response({"object": "list", "data": data, "model": body["model"],
                                      "usage": {"prompt_tokens": 7 * len(data), "total_tokens": 7 * len(data)}})
        documents = body["documents"] if request.path == "/v1/rerank" else body["texts"]
        query = set(_WORD.findall(body["query"].lower()))
        scores = [len(query & set(_WORD.findall(d.lower()))) / max(1, len(query)) for d in documents]
        ranked = sorted(range(len(scores)), key=lambda i: -scores[i])
        if request.path == "/v1/rerank":
            return web.json_response({"model": body["model"],
                                      "results": [{"index": i, "relevance_score": scores[i]} for i in ranked]})
        return web.json_response([{"index": i, "score": scores[i]} for i in ranked])

    async def __aenter__(self) -> ModelServer:
        app = web.Application()
        for path in ("/v1/embeddings", "/v1/rerank", "/rerank"):
            app.router.add_post(path, self._handle)
        self._server = TestServer(app, host="127.0.0.1")
        await self._server.start_server()
        self.url = str(self._server.make_url("/")).rstrip("/")
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        await self._server.close()
