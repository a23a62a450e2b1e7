"""The guardian's window under load (issue 16's benchmark).

    python -m bench web

The cognitive loop's cycle time (instant language model, 10k memories) with the web
view served in the same process and event loop: idle, while a client in another
process requests one page a second (a guardian's browser), idle again, and while it
requests every page (overview, memories, a search, one memory, thoughts, gates,
consolidation, gut) back to back. A 5 ms heartbeat on the loop measures how long the
loop is held up (lag). Also each page's latency under back-to-back load, and the
overview's histogram and shape counts from the center summary against the pre-080 scans
(bench/center_summary_costs.py).
"""

from __future__ import annotations

import asyncio
import json
import signal
import statistics
import sys
import tempfile
import time

import aiohttp

from bench import center_summary_costs
from bench.bench_loop import InstantLLM, _mind, _p
from bench.bench_memory_store import TextMaker, WordVectorEmbedder, _load
from bench.common import bench_pool, build_hnsw
from src.recall.store import MemoryStore
from src.web.app import WebServer
from src.web.settings import WebSettings
from src.web.view import View

N_MEMORIES = 10_000
CYCLES = 60
WARM = 10
PAGES = ["/", "/memories", "/memories?q=what+about+the+zor", "/memories/1", "/thoughts", "/gates",
         "/consolidation", "/gut"]


async def _cycles(mind, maker: TextMaker, n: int) -> tuple[list[float], list[float]]:
    """n cycles: their durations, and how late a 5 ms heartbeat woke meanwhile (loop lag)."""
    times: list[float] = []
    lags: list[float] = []
    done = asyncio.Event()

    async def heartbeat() -> None:
        while not done.is_set():
            started = time.perf_counter()
            await asyncio.sleep(0.005)
            lags.append((time.perf_counter() - started) * 1000 - 5.0)

    beat = asyncio.create_task(heartbeat())
    for _ in range(n):
        await mind.loop.submit("user", maker.question(0, 3_000))
        started = time.perf_counter()
        await mind.loop.cycle()
        times.append((time.perf_counter() - started) * 1000)
    done.set()
    await beat
    return times, lags


async def _polled(mind, maker: TextMaker, url: str, pause_s: float) -> tuple[list[float], list[float], dict]:
    poller = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.bench_web", "poll", url, str(pause_s), stdout=asyncio.subprocess.PIPE)
    await asyncio.sleep(2.0)          # the poller is running before we measure
    times, lags = await _cycles(mind, maker, CYCLES)
    poller.send_signal(signal.SIGTERM)
    out, _ = await poller.communicate()
    return times, lags, json.loads(out.decode())


async def run() -> list[dict]:
    rows: list[dict] = []
    async with bench_pool("bench_web", max_size=8) as pool:
        maker = TextMaker()
        embedder = WordVectorEmbedder(maker.words)
        await _load(MemoryStore(pool, embedder), maker, N_MEMORIES)
        await build_hnsw(pool)
        summary_rows = await center_summary_costs.measure(pool, "10k")
        with tempfile.TemporaryDirectory() as tmp:
            mind = await _mind(pool, embedder, InstantLLM(), tmp, "bench-web")
            server = WebServer(View(pool=pool, settings=WebSettings(port=0), mode="bench",
                                    session_id="bench-web", retriever=mind.retriever))
            url = await server.start()
            try:
                await _cycles(mind, maker, WARM)
                phases = {"idle": (*await _cycles(mind, maker, CYCLES), None)}
                phases["a page every second"] = await _polled(mind, maker, url, 1.0)
                phases["idle again"] = (*await _cycles(mind, maker, CYCLES), None)
                phases["pages back to back"] = await _polled(mind, maker, url, 0.0)
                pages = phases["pages back to back"][2]
            finally:
                await server.stop()
                await mind.close()
    for name, (times, lags, polled) in phases.items():
        p50, p95 = _p(times)
        rows += [{"name": f"10k: cycle, {name}, p50", "value": p50, "unit": "ms"},
                 {"name": f"10k: cycle, {name}, p95", "value": p95, "unit": "ms"},
                 {"name": f"10k: loop lag, {name}, p99", "value": sorted(lags)[int(0.99 * (len(lags) - 1))],
                  "unit": "ms"},
                 {"name": f"10k: loop lag, {name}, max", "value": max(lags), "unit": "ms"}]
        if polled is not None:
            rows.append({"name": f"requests served, {name}", "value": polled["requests"], "unit": "requests"})
    rows += summary_rows
    for page, (p50, p95) in pages["latency"].items():
        rows.append({"name": f"10k: page {page} p50 / p95", "value": p50, "unit": f"ms (p95 {p95:.1f})"})
    return rows


async def poll(url: str, pause_s: float) -> None:
    """Request every page in turn, `pause_s` apart, until SIGTERM; print latencies as JSON."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    latency: dict[str, list[float]] = {p: [] for p in PAGES}
    async with aiohttp.ClientSession() as session:
        while not stop.is_set():
            for page in PAGES:
                started = time.perf_counter()
                async with session.get(url.rstrip("/") + page) as resp:
                    await resp.read()
                    if resp.status != 200:
                        raise SystemExit(f"{page}: HTTP {resp.status}")
                latency[page].append((time.perf_counter() - started) * 1000)
                if pause_s:
                    await asyncio.sleep(pause_s)
    print(json.dumps({"requests": sum(len(v) for v in latency.values()),
                      "latency": {p: [statistics.median(v), sorted(v)[int(0.95 * (len(v) - 1))]]
                                  for p, v in latency.items() if v}}))


if __name__ == "__main__" and sys.argv[1:2] == ["poll"]:
    asyncio.run(poll(sys.argv[2], float(sys.argv[3])))
