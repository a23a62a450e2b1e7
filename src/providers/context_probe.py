"""Asking an OpenAI-compatible endpoint how large its context window is (issue 27).

Once at start (`Providers.probe_context_windows`), for a model whose
`providers.llm.context_window` is null, at the endpoint's root (`base_url` without a
trailing /v1), each request with `providers.llm.context_probe_timeout_s`:

    llama.cpp server  GET  /props       `default_generation_settings.n_ctx`, one slot's window
                                        (-c divided among the -np slots; the server refuses a
                                        prompt of that many tokens); newer servers also have a
                                        top-level `n_ctx`: the smaller of the two
    Ollama            POST /api/show    the Modelfile's `num_ctx` when set; else the model's
                                        `<arch>.context_length`, at most `OLLAMA_DEFAULT` (the
                                        server's own default below 24 GiB of VRAM, which
                                        OLLAMA_CONTEXT_LENGTH may raise and /api/show does not
                                        say: set providers.llm.context_window then)
    vLLM              GET  /v1/models   the served model's `max_model_len`

The first that names a window wins; an endpoint that cannot be reached or does not answer
in time is not asked further (a hung server delays the start by one timeout). None
answering leaves the known default, said once.
`configured_window` and `window_probe` are how the factory gives each model its window.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx2
from pydantic import SecretStr

from src.providers.context_window import ContextWindow, window_of
from src.providers.selection import Choice, public_url
from src.providers.settings import LLMSettings

log = logging.getLogger(__name__)

OLLAMA_DEFAULT = 4_096
_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Probed:
    """What the endpoint said: its window (None: nothing said one) and from where, or why not."""

    tokens: int | None
    source: str


def endpoint_root(base_url: str) -> str:
    """`http://host:8080/v1/` -> `http://host:8080`: where /props and /api/show live."""
    root = base_url.rstrip("/")
    return root[:-3] if root.endswith("/v1") else root


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def from_props(body: Any) -> int | None:
    """llama.cpp's /props: one slot's n_ctx (and the top-level one, when newer servers give it)."""
    if not isinstance(body, Mapping):
        return None
    settings = body.get("default_generation_settings")
    found = [_positive(body.get("n_ctx")),
             _positive(settings.get("n_ctx")) if isinstance(settings, Mapping) else None]
    found = [n for n in found if n is not None]
    return min(found) if found else None


def from_show(body: Any) -> int | None:
    """Ollama's /api/show: num_ctx when the Modelfile sets it, else the model's length capped
    at the server's default."""
    if not isinstance(body, Mapping):
        return None
    parameters = body.get("parameters")
    if isinstance(parameters, str) and (num_ctx := _NUM_CTX.search(parameters)):
        return int(num_ctx.group(1)) or None
    info = body.get("model_info")
    if not isinstance(info, Mapping):
        return None
    arch = info.get("general.architecture")
    length = _positive(info.get(f"{arch}.context_length")) if isinstance(arch, str) else None
    if length is None:   # an architecture key not named in general.architecture
        length = next((_positive(v) for k, v in info.items() if str(k).endswith(".context_length")), None)
    return None if length is None else min(length, OLLAMA_DEFAULT)


def from_models(body: Any, model: str) -> int | None:
    """vLLM's /v1/models: `max_model_len` of `model` (or of the only model served)."""
    data = body.get("data") if isinstance(body, Mapping) else None
    if not isinstance(data, list):
        return None
    rows = [d for d in data if isinstance(d, Mapping)]
    chosen = [d for d in rows if d.get("id") == model] or (rows if len(rows) == 1 else [])
    return _positive(chosen[0].get("max_model_len")) if chosen else None


async def probe_window(http: httpx2.AsyncClient, base_url: str, model: str, *, timeout_s: float,
                       headers: Mapping[str, str] | None = None, shown_url: str = "") -> Probed:
    """Ask the endpoint (module docstring); never raises for what the endpoint does."""
    root = endpoint_root(base_url)
    shown = shown_url or root
    asks: list[tuple[str, str, str, dict | None, Callable[[Any], int | None]]] = [
        ("llama.cpp /props", "GET", "/props", None, from_props),
        ("Ollama /api/show", "POST", "/api/show", {"model": model, "name": model}, from_show),
        ("vLLM /v1/models", "GET", "/v1/models", None, lambda body: from_models(body, model)),
    ]
    tried = []
    for name, method, path, body, read in asks:
        try:
            response = await http.request(method, root + path, json=body, headers=dict(headers or {}),
                                          timeout=timeout_s)
            if response.status_code != 200:
                tried.append(f"{name}: HTTP {response.status_code}")
                continue
            tokens = read(response.json())
        except httpx2.TransportError as exc:   # unreachable or silent: the next path would wait as long
            tried.append(f"{name}: {type(exc).__name__}")
            break
        except (httpx2.HTTPError, httpx2.InvalidURL, ValueError) as exc:   # JSON errors are ValueErrors
            tried.append(f"{name}: {type(exc).__name__}")
            continue
        if tokens is not None:
            return Probed(tokens, f"{name} at {shown}")
        tried.append(f"{name}: no window in the answer")
    return Probed(None, "; ".join(tried))


def configured_window(llm: LLMSettings, choice: Choice) -> ContextWindow:
    """`providers.llm.context_window.<role>`, else the provider's known window."""
    configured = getattr(llm.context_window, choice.role)
    if configured is not None:
        return ContextWindow(configured, f"providers.llm.context_window.{choice.role}", llm.token_margin)
    return ContextWindow.known(choice.kind, llm.token_margin)


def window_probe(llm: LLMSettings, choices: Sequence[Choice], models: Mapping[str, object],
                 http: object, api_key: SecretStr | None) -> Callable[[], Awaitable[None]] | None:
    """The start-up probe of the OpenAI-compatible endpoint for the roles it serves whose
    window is not configured (one answer for both: one endpoint, one model); None: nothing
    to ask. A probe that gets no window logs it once and leaves the known default."""
    waiting = [models[c.role] for c in choices if c.role in models and c.kind == "openai_compat"
               and getattr(llm.context_window, c.role) is None]
    if not waiting or not isinstance(http, httpx2.AsyncClient) or not llm.base_url:
        return None
    headers = {"Authorization": f"Bearer {api_key.get_secret_value()}"} if api_key is not None else {}
    base_url, model, shown = llm.base_url, llm.openai_model or "", public_url(endpoint_root(llm.base_url))

    async def probe() -> None:
        probed = await probe_window(http, base_url, model, timeout_s=llm.context_probe_timeout_s,
                                    headers=headers, shown_url=shown)
        if probed.tokens is None:
            known = window_of(waiting[0])
            log.warning("%s did not say its context window (%s); using %s. Set "
                        "providers.llm.context_window to the server's context size", shown,
                        probed.source, known.describe() if known is not None else "the default")
            return
        window = ContextWindow(probed.tokens, probed.source, llm.token_margin)
        for part in waiting:
            part.set_window(window)  # type: ignore[attr-defined]
        log.info("context window of %s: %s", model, window.describe())
    return probe


__all__ = ["OLLAMA_DEFAULT", "Probed", "configured_window", "endpoint_root", "from_models", "from_props",
           "from_show", "probe_window", "window_probe"]
