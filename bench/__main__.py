"""`make bench`: run every bench/bench_*.py module's `run()` and print one table.

Each module's `run()` returns rows {"name", "value", "unit"} (async or not).
`python -m bench foundation providers` runs only the named modules.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import sys
from pathlib import Path


def _modules(selected: list[str]) -> list[str]:
    names = sorted(p.stem.removeprefix("bench_") for p in Path(__file__).parent.glob("bench_*.py"))
    return [n for n in names if not selected or n in selected]


def main(argv: list[str]) -> int:
    rows: list[tuple[str, str, str, str]] = []
    for name in _modules(argv):
        module = importlib.import_module(f"bench.bench_{name}")
        print(f"running {name} …", file=sys.stderr, flush=True)
        result = module.run()
        if inspect.isawaitable(result):
            result = asyncio.run(result)
        for row in result:
            value = row["value"]
            text = f"{value:,.2f}" if isinstance(value, float) else f"{value:,}"
            rows.append((name, row["name"], text, row["unit"]))
    widths = [max(len(r[i]) for r in rows + [("suite", "measure", "value", "unit")]) for i in range(4)]
    header = ("suite", "measure", "value", "unit")
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join((c.rjust(w) if i == 2 else c.ljust(w)) for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
