"""A fake llama.cpp server at the httpx2 transport seam, enforcing its context size.

`FakeLlamaServer` answers what MoltBot asks of an OpenAI-compatible endpoint the way
llama.cpp's `llama-server` does: `GET /props` says its per-slot `n_ctx`, and `POST
/v1/chat/completions` renders the messages with a ChatML template (Qwen's), counts the
prompt with a real tokenizer that is not ours (Llama 2's, shipped inside the wordllama
wheel: it counts 1.18–1.39× what src/tokens.py counts), and refuses a prompt of `n_ctx`
tokens or more with llama.cpp's HTTP 400 `exceed_context_size_error`. It records every
request: what it counted, what it refused, and requests that left the reply less room
than `max_tokens` (llama.cpp would cut such a reply short).

Replies: a structured call (JSON mode or a response schema) gets the smallest JSON value
its schema allows (`sample`); a plain call echoes the start of its last message and says
`Confidence: 0.9`, so a test can match replies to turns.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import wordllama
from tokenizers import Tokenizer

from src.loop.prompts import CONTEXT_CLOSE

_TOKENIZER_FILE = Path(wordllama.__file__).parent / "tokenizers" / "l2_supercat_tokenizer_config.json"
_SCHEMA_IN_SYSTEM = re.compile(r"It must match this JSON Schema: (\{.*\})\s*$", re.DOTALL)


def llama_tokenizer() -> Tokenizer:
    return Tokenizer.from_file(str(_TOKENIZER_FILE))


def chatml(messages: list[dict]) -> str:
    """The prompt a ChatML template (Qwen2.5's) builds from the messages."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages) + \
        "<|im_start|>assistant\n"


def sample(schema: dict, defs: dict | None = None) -> Any:
    """The smallest value `schema` (a JSON Schema of pydantic's) accepts."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return sample(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return sample(options[0], defs)
    kind = schema.get("type", "object")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: sample(props[name], defs) for name in schema.get("required", list(props))}
    if kind == "array":
        return [sample(schema["items"], defs)] if schema.get("minItems") else []
    if kind == "boolean":
        return False
    if kind in ("number", "integer"):
        low, high = schema.get("minimum", 0), schema.get("maximum", 1)
        value = min(max(0.9, low), high)
        return int(value) if kind == "integer" else value
    return "noted"


@dataclass
class FakeLlamaServer:
    """See the module docstring. `handle` is the MockTransport handler."""

    n_ctx: int = 4096
    model: str = "qwen2.5-1.5b-instruct"
    tokenizer: Tokenizer = field(default_factory=llama_tokenizer)
    props_requests: int = 0
    counted: list[int] = field(default_factory=list)         # prompt tokens of each chat request
    rejected: list[int] = field(default_factory=list)        # prompts refused as too long
    no_room: list[tuple[int, int]] = field(default_factory=list)   # (prompt, max_tokens) over n_ctx
    bodies: list[dict] = field(default_factory=list)

    def tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "GET" and request.url.path == "/props":
            self.props_requests += 1
            return httpx2.Response(200, json={
                "default_generation_settings": {"n_ctx": self.n_ctx, "params": {"n_predict": -1}},
                "total_slots": 1, "model_path": f"/models/{self.model}.gguf"})
        if request.method == "POST" and request.url.path == "/v1/chat/completions":
            return self._chat(json.loads(request.content))
        return httpx2.Response(404, json={"error": {"code": 404, "message": "File Not Found"}})

    def _chat(self, body: dict) -> httpx2.Response:
        self.bodies.append(body)
        prompt = self.tokens(chatml(body["messages"]))
        self.counted.append(prompt)
        if prompt >= self.n_ctx:       # llama.cpp: the prompt alone must be shorter than the slot
            self.rejected.append(prompt)
            return httpx2.Response(400, json={"error": {
                "code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": prompt, "n_ctx": self.n_ctx,
                "message": f"request ({prompt} tokens) exceeds the available context size "
                           f"({self.n_ctx} tokens), try increasing it"}})
        if prompt + body.get("max_tokens", 0) > self.n_ctx:
            self.no_room.append((prompt, body["max_tokens"]))
        text = self._reply(body)
        return httpx2.Response(200, json={
            "id": "chatcmpl-fake", "object": "chat.completion", "model": self.model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": self.tokens(text)}})

    @staticmethod
    def _reply(body: dict) -> str:
        system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
        declared = (body.get("response_format") or {}).get("json_schema", {}).get("schema")
        found = _SCHEMA_IN_SYSTEM.search(system)
        if declared is not None or found is not None:
            return json.dumps(sample(declared if declared is not None else json.loads(found.group(1))))
        # the message itself, after the context the mind sends ahead of it (src/loop/turn_context.py)
        last = " ".join(body["messages"][-1]["content"].rsplit(CONTEXT_CLOSE, 1)[-1].split())
        return f"Noted ({last[:48]}). Confidence: 0.9"


async def providers_for(server: FakeLlamaServer, pool, tmp_path: Path, session: str):
    """(settings, providers) of a mind whose System 1 is `server` at the HTTP seam: the real
    OpenAI-compatible backend and its start-up probe of the window; the embedder a stand-in
    (HashEmbedder), no reranker, the exit gate without noise."""
    from src.config import load_settings
    from src.providers.factory import build_providers
    from tests.fakes import HashEmbedder

    settings = load_settings(tmp_path / "none.yaml", env={}, overrides={
        "providers": {"llm": {"provider": "openai_compat", "base_url": "http://127.0.0.1:8080/v1",
                              "openai_model": server.model},
                      "embeddings": {"provider": "wordllama"}, "rerank": {"provider": "none"}},
        "gates": {"seed": 1, "exit": {"noise_floor": 0.0}},
        "layers": {"values_path": str(tmp_path / "v.json"), "goals_path": str(tmp_path / "g.json"),
                   "cache_dir": str(tmp_path / "cache")}})
    providers = build_providers(settings.providers, settings.secrets, pool, session,
                                http_transport=httpx2.MockTransport(server.handle))
    providers.embedder = HashEmbedder()
    await providers.probe_context_windows()
    return settings, providers
