"""Bootstrap seeding (plan §2.3, §3.2): the immutable safety boundaries.

The text comes from a file in the repository (`src/bootstrap/safety_boundaries.txt` by
default; `bootstrap.boundaries_path` in runtime.yaml), one boundary per paragraph, so
the operator can edit it before the first start. They are written once — when the store
has no seeded boundary yet — as semantic memories at Beta(50, 1) with `immutable =
true`. The weight choke point never changes an immutable memory and context assembly
always injects them.
"""

from __future__ import annotations

import logging
from pathlib import Path

from src.errors import ConfigError
from src.recall.store import MemoryStore, NewMemory

log = logging.getLogger(__name__)

from src.bootstrap.settings import DEFAULT_BOUNDARIES as DEFAULT_PATH  # noqa: E402

SEED_KIND = "safety_boundary"
ALPHA, BETA = 50.0, 1.0

_SEEDED = "SELECT count(*) FROM memories WHERE immutable AND metadata->>'kind' = $1"


def read_boundaries(path: Path | str) -> list[str]:
    """The boundaries in `path`: paragraphs, '#' comment lines dropped, whitespace collapsed."""
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: safety boundaries file not found; restore it from the repository "
                          "or set bootstrap.boundaries_path in runtime.yaml") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read the safety boundaries: {exc}") from exc
    lines = [line for line in raw.splitlines() if not line.lstrip().startswith("#")]
    paragraphs = [" ".join(chunk.split()) for chunk in "\n".join(lines).split("\n\n")]
    found = [p_ for p_ in paragraphs if p_]
    if not found:
        raise ConfigError(f"{p}: no safety boundary found (write one paragraph per boundary)")
    return found


async def seed_boundaries(store: MemoryStore, path: Path | str = DEFAULT_PATH) -> list[int]:
    """Write the boundaries once; returns the new ids ([] when they already exist)."""
    if await store.pool.fetchval(_SEEDED, SEED_KIND):
        return []
    texts = read_boundaries(path)
    ids = await store.store_many([
        NewMemory(text, "semantic", source_tag="bootstrap_seed", immutable=True, alpha=ALPHA, beta=BETA,
                  metadata={"kind": SEED_KIND, "seed_file": Path(path).name})
        for text in texts])
    log.info("seeded %d immutable safety boundaries from %s", len(ids), path)
    return ids
