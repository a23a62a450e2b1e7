"""The web view cannot slow the mind (issue 24): the loop's cycle under 20 polling clients.

    python -m bench web_polling

A mind of 10k memories (instant language model) with the web view started the way the
service starts it (`src/web/serve.start_beside_mind`: in the mind's process and event
loop). 20 clients in another process (loopback) poll the pages, each requesting one page
after another: a second apart, then back to back. The loop's cycle time is measured in
windows taken in turn with the pollers stopped (SIGSTOP) and running (SIGCONT), six of each,
≥ 30 s of polling in all: a machine shared with other work then loads both alike. Target
(issue 24): cycle p50 under polling ≤ 1.5× idle. Rows: cycle p50 / p95 idle and polled,
their ratio, requests served and errors, each page's p50 (a request the pollers' stop
caught counts its stop too).

`python -m bench.bench_web_polling shared` measures the wiring before issue 24 instead: the
pages on the mind's own pool and unpaced (the same View and server otherwise).
"""

from __future__ import annotations

import asyncio
import json
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from bench.bench_loop import InstantLLM, _mind, _p
from bench.bench_memory_store import TextMaker, WordVectorEmbedder, _load
from bench.common import ROOT, bench_pool, build_hnsw, dsn_for
from src.config import load_settings
from src.db.embedded import start_embedded
from src.recall.store import MemoryStore
from src.web.app import WebServer
from src.web.serve import start_beside_mind
from src.web.view import View

N_MEMORIES = 10_000
CLIENTS = 20
ROUNDS = 6                 # idle window, loaded window, six times: ≥ 30 s of polling in all
WINDOW_CYCLES = 10
WINDOW_S = 5.0
SETTLE_S = 5.0             # after stopping the pollers, before an idle window
WARM = 10
PAGES = ["/", "/memories", "/memories?q=what+about+the+zor", "/memories/1", "/thoughts", "/gates",
         "/consolidation", "/gut"]
#: (name, pause between one client's requests in seconds)
SCENARIOS = [("20 clients, a page a second each", 1.0), ("20 clients back to back", 0.0)]


async def _cycles(mind, maker: TextMaker, min_cycles: int, min_seconds: float) -> list[float]:
    """Cycle durations (ms) of user turns, at least `min_cycles` and `min_seconds` of them."""
    times: list[float] = []
    started_all = time.perf_counter()
    while len(times) < min_cycles or time.perf_counter() - started_all < min_seconds:
        await mind.loop.submit("user", maker.question(0, 3_000))
        started = time.perf_counter()
        await mind.loop.cycle()
        times.append((time.perf_counter() - started) * 1000)
    return times


async def _scenario(mind, maker: TextMaker, url: str, pause_s: float) -> tuple[list[float], list[float], dict]:
    """Idle and loaded windows in turn (the pollers stopped with SIGSTOP, then let go with SIGCONT),
    so both see the same background load of a shared machine; (idle, loaded, the pollers' report)."""
    poller = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.bench_web_polling", "poll", url, str(CLIENTS), str(pause_s),
        stdout=asyncio.subprocess.PIPE, cwd=ROOT)
    await asyncio.sleep(3.0)          # every client is polling before we measure
    idle: list[float] = []
    loaded: list[float] = []
    for _ in range(ROUNDS):
        poller.send_signal(signal.SIGSTOP)
        await asyncio.sleep(SETTLE_S)     # requests already queued in the view are served first
        idle += await _cycles(mind, maker, WINDOW_CYCLES, WINDOW_S)
        poller.send_signal(signal.SIGCONT)
        await asyncio.sleep(1.0)
        loaded += await _cycles(mind, maker, WINDOW_CYCLES, WINDOW_S)
    poller.send_signal(signal.SIGTERM)
    out, _ = await poller.communicate()
    return idle, loaded, json.loads(out.decode())


async def _serve(settings, mind, dsn: str, shared: bool):
    """The view as the service starts it, or (`shared`) on the mind's own pool as before issue 24."""
    if not shared:
        server, line = await start_beside_mind(settings, mind, "bench-web-polling", dsn=dsn)
        assert server is not None, line
        return server
    unpaced = settings.web.model_copy(update={"max_requests_per_s": 1e6, "burst": 1_000_000})
    server = WebServer(View(pool=mind.pool, settings=unpaced, mode="bench (shared pool, unpaced)",
                            session_id="bench-web-polling", retriever=mind.retriever,
                            cycles=lambda: mind.loop.cycles))
    await server.start()
    return server


async def run(shared: bool = False) -> list[dict]:
    scenarios: dict[str, tuple[list[float], list[float], dict]] = {}
    async with bench_pool("bench_web_polling", max_size=8) as pool:
        uri, _ = start_embedded(ROOT / "data" / "test-pg")
        dsn = dsn_for(uri, await pool.fetchval("SELECT current_database()"))
        maker = TextMaker()
        embedder = WordVectorEmbedder(maker.words)
        await _load(MemoryStore(pool, embedder), maker, N_MEMORIES)
        await build_hnsw(pool)
        with tempfile.TemporaryDirectory() as tmp:
            mind = await _mind(pool, embedder, InstantLLM(), tmp, "bench-web-polling")
            mind.providers.report = ["bench: instant model, word-vector embedder"]
            settings = load_settings(Path(tmp) / "none.yaml", env={"DATABASE_URL": dsn},
                                     overrides={"web": {"port": 0}})
            server = await _serve(settings, mind, dsn, shared)
            try:
                await _cycles(mind, maker, WARM, 0.0)
                for name, pause in SCENARIOS:
                    scenarios[name] = idle, loaded, _ = await _scenario(mind, maker, server.url, pause)
                    print(f"  {name}: cycle p50 idle {_p(idle)[0]:.1f} ms, polled {_p(loaded)[0]:.1f} ms",
                          file=sys.stderr, flush=True)
            finally:
                await server.stop()
                try:
                    await mind.close()
                except Exception as exc:  # noqa: BLE001 - the rows are measured; a bench stand-in may lack a part
                    print(f"  closing the mind: {type(exc).__name__}: {exc}", file=sys.stderr)
    return _rows(scenarios)


def _rows(scenarios: dict[str, tuple[list[float], list[float], dict]]) -> list[dict]:
    rows: list[dict] = []
    for name, (idle, loaded, polled) in scenarios.items():
        (i50, i95), (l50, l95) = _p(idle), _p(loaded)
        rows += [{"name": f"10k: cycle p50, idle windows of '{name}'", "value": i50, "unit": f"ms (p95 {i95:.1f})"},
                 {"name": f"10k: cycle p50, {name}", "value": l50, "unit": f"ms (p95 {l95:.1f})"},
                 {"name": f"10k: polled / idle cycle p50, {name}", "value": l50 / i50, "unit": "× (target ≤ 1.5)"},
                 {"name": f"requests served, {name}", "value": polled["requests"],
                  "unit": f"requests, {polled['errors']} errors"}]
        rows += [{"name": f"page {page} p50, {name}", "value": p50_page, "unit": f"ms (p95 {p95_page:.1f})"}
                 for page, (p50_page, p95_page) in polled["latency"].items()]
    return rows


async def _client(session: aiohttp.ClientSession, base: str, offset: int, pause_s: float,
                  stop: asyncio.Event, latency: dict[str, list[float]], errors: list[str]) -> None:
    """One guardian's browser: the pages in turn (each client starts at another page)."""
    i = offset
    while not stop.is_set():
        page = PAGES[i % len(PAGES)]
        i += 1
        started = time.perf_counter()
        try:
            async with session.get(base + page) as resp:
                await resp.read()
                if resp.status != 200:
                    errors.append(f"{page}: HTTP {resp.status}")
        except aiohttp.ClientError as exc:
            errors.append(f"{page}: {type(exc).__name__}")
        latency[page].append((time.perf_counter() - started) * 1000)
        if pause_s:
            try:
                await asyncio.wait_for(stop.wait(), pause_s)
            except TimeoutError:
                pass


async def poll(url: str, clients: int, pause_s: float) -> None:
    """`clients` pollers until SIGTERM; print requests, errors and page latencies as JSON."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    latency: dict[str, list[float]] = {p: [] for p in PAGES}
    errors: list[str] = []
    base = url.rstrip("/")
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients)) as session:
        await asyncio.gather(*(_client(session, base, k, pause_s, stop, latency, errors) for k in range(clients)))
    print(json.dumps({"requests": sum(len(v) for v in latency.values()), "errors": len(errors),
                      "first_errors": errors[:5],
                      "latency": {p: [statistics.median(v), sorted(v)[int(0.95 * (len(v) - 1))]]
                                  for p, v in latency.items() if v}}))


if __name__ == "__main__" and sys.argv[1:2] == ["poll"]:
    asyncio.run(poll(sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
elif __name__ == "__main__" and sys.argv[1:2] == ["shared"]:
    for row in asyncio.run(run(shared=True)):
        print(f"{row['name']}: {row['value']:,.2f} {row['unit']}")
