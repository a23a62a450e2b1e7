"""One JSON POST to a model server's non-chat endpoints (embeddings, rerank), errors mapped.

Shared by src/providers/embed_endpoint.py and src/providers/rerank_endpoint.py. A base URL
may be written as the server's root or as its OpenAI `/v1` URL (the form
`providers.llm.base_url` takes, so it can be reused as is): `server_root` drops the `/v1`,
and each caller names its full path (`v1/embeddings`, `v1/rerank`, TEI's `rerank`). The
key, when set, goes in the Authorization header only: it is never part of a message, and
a server that echoes it is scrubbed by the factory's Redactor.
"""

from __future__ import annotations

import httpx2
from pydantic import SecretStr

from src.errors import ProviderError
from src.providers.http_errors import HTTPX2_ERRORS, from_status, map_with, parse_retry_after
from src.providers.llm_openai_compat import KEY_HINT
from src.providers.llm_openai_compat import _error_detail as error_detail


def server_root(url: str) -> str:
    """`url` without a trailing `/v1`, ending in one slash: the root the paths hang from."""
    root = url.rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return root + "/"


async def post_json(http: httpx2.AsyncClient, path: str, body: dict, *, provider: str,
                    api_key: SecretStr | None) -> object:
    """POST `body` to `path` and return the decoded JSON reply; every failure a ProviderError
    (HTTP status by `from_status`: 429 RateLimited, 5xx ProviderUnavailable, other 4xx
    ProviderRejected; an unreadable body MalformedOutput; a dead socket ProviderUnavailable)."""
    headers = {}
    if api_key is not None and api_key.get_secret_value():
        headers["Authorization"] = f"Bearer {api_key.get_secret_value()}"
    try:
        response = await http.post(path, json=body, headers=headers)
        if response.status_code >= 400:
            raise from_status(response.status_code, error_detail(response), provider=provider,
                              key_hint=KEY_HINT,
                              retry_after=parse_retry_after(response.headers.get("retry-after")))
        return response.json()
    except ProviderError:
        raise
    except Exception as exc:  # noqa: BLE001 - mapped in one place, raised typed
        raise map_with((HTTPX2_ERRORS,), exc, provider) from exc
