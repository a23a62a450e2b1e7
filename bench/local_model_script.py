"""A fixed conversation with a real local model (issue 38 item 9), repeatable.

    python -m bench.local_model_script --upstream http://127.0.0.1:8080 --store /tmp/lm \
        [--import chat.jsonl] [--base runtime.local.yaml]

Not part of `make bench` (it needs a running OpenAI-compatible server, e.g. llama.cpp's
`llama-server -m model.gguf -c 8192 --parallel 2 --cache-reuse 256 -t 2`, as README says, and
takes tens of minutes; the runs of notes.md name the server's flags they used). It runs
the service the way its user does (`python -m src.main`, the config `--base` with only the
store, the port and the endpoint changed) and sends the script bench/data/local_model_script.json:
ten statements of fact, questions in other words, a changed fact, a procedure taught in three
messages, `/skill save`, `/consolidate`, `/quit`, a restart, the questions again. Messages go
through the HTTP API (each waits for its reply; the turn time is the wait); commands through
the terminal.

Between the mind and the server sits a recording proxy: for every request it keeps the
server's own `timings` (llama.cpp: `cache_n` tokens of the prompt reused from its cache,
`prompt_n` read anew, `prompt_ms`, `predicted_n`, `predicted_ms`), so the cache reuse is the
server's word, not ours.

It prints one line per exchange and a summary (also written to `<store>/report.json`):
statements refused, meta lines delivered, questions answered right and in the right speaker
(before and after the restart), turn time median and max, the cache reuse of the answers'
prompts, model calls per message, and what the deep pass wrote.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import yaml
from aiohttp import web

from src.gates.utterance import classify
from src.metacognition.answer_form import form_defect

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).parent / "data" / "local_model_script.json"
#: How the mind's own reply opens when no model answer is delivered (src/loop/prompts.py reflex_reply).
REFLEX_OPENINGS = ("(I cannot answer in words", "(reflex mode")
#: The start-up line the service prints when it is ready (src/repl.py).
READY = "Type /help"
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|my|me|mine)\b", re.IGNORECASE)
_SECOND_PERSON = re.compile(r"\b(you|your|you're|yours)\b", re.IGNORECASE)


@dataclass
class Call:
    """One request the mind sent the server, with the server's timings."""

    phase: str
    structured: bool
    prompt_n: int
    cache_n: int
    prompt_ms: float
    predicted_n: int
    predicted_ms: float


@dataclass
class Proxy:
    """Forwards every request to `upstream`; records each chat completion's timings."""

    upstream: str
    phase: str = "start"
    calls: list[Call] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=900)) as session, \
                session.request(request.method, self.upstream + request.path_qs, data=body, headers=headers) as up:
            data = await up.read()
            if request.path.endswith("/chat/completions") and up.status == 200:
                self._record(json.loads(body or b"{}"), json.loads(data))
            return web.Response(body=data, status=up.status, content_type=up.content_type)

    def _record(self, sent: dict, got: dict) -> None:
        t = got.get("timings") or {}
        usage = got.get("usage") or {}
        cached = t.get("cache_n", (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0))
        read = t.get("prompt_n", usage.get("prompt_tokens", 0) - cached)
        structured = bool(sent.get("response_format"))
        self.calls.append(Call(self.phase, structured, int(read), int(cached), float(t.get("prompt_ms", 0.0)),
                               int(t.get("predicted_n", usage.get("completion_tokens", 0))),
                               float(t.get("predicted_ms", 0.0))))


@dataclass
class Exchange:
    phase: str
    said: str
    reply: str
    seconds: float
    expect: list[str] = field(default_factory=list)

    @property
    def right(self) -> bool:
        low = self.reply.lower()
        return any(e in low for e in self.expect)

    @property
    def right_speaker(self) -> bool:
        """The user's fact said back as the user's: no sentence with the fact in the first
        person without the second."""
        for sentence in re.split(r"(?<=[.!?])\s+", self.reply):
            low = sentence.lower()
            if any(e in low for e in self.expect) and _FIRST_PERSON.search(sentence) \
                    and not _SECOND_PERSON.search(sentence):
                return False
        return True

    @property
    def defect(self) -> str | None:
        """What is wrong with the model's words delivered (a reply of the mind's own saying it
        has no answer is none: it names the defect it kept back)."""
        if self.reply.startswith(REFLEX_OPENINGS):
            return None
        found = form_defect(self.reply, focus=self.said, earlier=())
        return found.kind if found is not None else None


def _config(base: Path, store: Path, port: int, proxy_url: str) -> Path:
    runtime = yaml.safe_load(base.read_text(encoding="utf-8")) or {}
    runtime.setdefault("database", {}).update({"data_dir": str(store / "pg"), "stop_embedded_on_exit": True})
    runtime.setdefault("logging", {})["file"] = str(store / "moltbot.log")
    runtime.setdefault("web", {}).update({"enabled": True, "host": "127.0.0.1", "port": port})
    runtime.setdefault("recall", {})["layers"] = {"values_path": str(store / "values.json"),
                                                  "goals_path": str(store / "goals.json"),
                                                  "cache_dir": str(store / "layer-cache")}
    runtime.setdefault("providers", {}).setdefault("llm", {})["base_url"] = f"{proxy_url}/v1"
    path = store / "runtime.yaml"
    path.write_text(yaml.safe_dump(runtime, sort_keys=False), encoding="utf-8")
    return path


def _env(config: Path) -> dict[str, str]:
    import os
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")}
    env["MOLTBOT_CONFIG"] = str(config)
    return env


class Mind:
    """The service as a subprocess: messages over its API, commands at its terminal."""

    def __init__(self, config: Path, port: int):
        self.config, self.port = config, port
        self.proc: asyncio.subprocess.Process | None = None
        self.lines: asyncio.Queue[str] = asyncio.Queue()

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "src.main", "--config", str(self.config), cwd=ROOT, env=_env(self.config),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        asyncio.get_running_loop().create_task(self._pump())
        while True:   # the start-up lines are on stderr when stdout is not a terminal
            line = (await asyncio.wait_for(self.proc.stderr.readline(), 600)).decode()
            if not line:
                raise RuntimeError("the service exited during start-up")
            if READY in line:
                break
        asyncio.get_running_loop().create_task(self._drain_stderr())

    async def _pump(self) -> None:
        while line := await self.proc.stdout.readline():
            await self.lines.put(line.decode().rstrip("\n"))

    async def _drain_stderr(self) -> None:
        while await self.proc.stderr.readline():
            pass

    async def send(self, text: str) -> tuple[str, float]:
        """The reply to one message over the API, and how long it took."""
        started = time.monotonic()
        url = f"http://127.0.0.1:{self.port}/api/v1/messages"
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=900)) as session:
            async with session.post(url, json={"text": text, "wait_s": 120},
                                    headers={"Idempotency-Key": str(uuid.uuid4())}) as r:
                sent = await r.json()
            while sent.get("state") != "answered":
                async with session.get(f"http://127.0.0.1:{self.port}{sent['poll']}?wait_s=120") as r:
                    sent = await r.json()
        return sent.get("reply", ""), time.monotonic() - started

    async def command(self, line: str, done: re.Pattern[str], within: float = 1800) -> list[str]:
        """A terminal command; its output lines up to the first `done` matches (quiet lines
        about API messages skipped). What the terminal printed before (the API's quiet lines) is
        passed over."""
        while not self.lines.empty():
            self.lines.get_nowait()
        self.proc.stdin.write(f"{line}\n".encode())
        await self.proc.stdin.drain()
        out: list[str] = []
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            got = await asyncio.wait_for(self.lines.get(), deadline - time.monotonic())
            if got.startswith(("(from the HTTP API", "(answered on the HTTP API")):
                continue
            out.append(got)
            if done.search(got):
                return out
        raise TimeoutError(f"{line}: no line matching {done.pattern} in {within:.0f} s: {out}")

    async def quit(self) -> int:
        self.proc.stdin.write(b"/quit\n")
        await self.proc.stdin.drain()
        self.proc.stdin.close()
        return await asyncio.wait_for(self.proc.wait(), 600)


async def _consolidated(config: Path, since: datetime) -> list[str]:
    """What consolidation wrote since `since`: the memories whose source tag is consolidation's,
    from `python -m src.memory export` of the run's store."""
    out = config.parent / "export.jsonl"
    done = await asyncio.create_subprocess_exec(sys.executable, "-m", "src.memory", "--config", str(config),
                                                "export", str(out), cwd=ROOT, env=_env(config))
    if await done.wait():
        return ["(the export failed)"]
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [f"[{r['memory_type']}] {r['content']}" for r in rows
            if r["source_tag"].startswith("internal_consolidation")
            and datetime.fromisoformat(r["created_at"]) >= since]


def _summary(exchanges: list[Exchange], calls: list[Call], wrote: list[str], seconds: dict[str, float]) -> dict:
    statements = [e for e in exchanges if classify(e.said).kind == "statement"]
    questions = [e for e in exchanges if e.expect]
    before = [e for e in questions if e.phase != "after_restart"]
    after = [e for e in questions if e.phase == "after_restart"]
    answers = [c for c in calls if not c.structured and c.phase in ("conversation", "after_restart")]
    reuse = [c.cache_n / (c.cache_n + c.prompt_n) for c in answers if c.cache_n + c.prompt_n]
    turns = [e.seconds for e in exchanges]
    talk = [c for c in calls if c.phase in ("conversation", "after_restart")]
    return {
        "messages": len(exchanges),
        "statements refused": sum(e.defect == "refusal" for e in statements),
        "no answer delivered instead (reflex replies)": sum(e.reply.startswith(REFLEX_OPENINGS) for e in exchanges),
        "meta lines delivered": sum(e.defect in ("meta", "protocol") for e in exchanges),
        "right before the restart": f"{sum(e.right for e in before)}/{len(before)}",
        "right and in the user's words before": f"{sum(e.right and e.right_speaker for e in before)}/{len(before)}",
        "right after the restart": f"{sum(e.right for e in after)}/{len(after)}",
        "right and in the user's words after": f"{sum(e.right and e.right_speaker for e in after)}/{len(after)}",
        "turn s median / max": [round(statistics.median(turns), 1), round(max(turns), 1)] if turns else None,
        "answer prompt tokens reused, median": round(statistics.median(reuse), 3) if reuse else None,
        "answer prompt tokens read anew, median": statistics.median([c.prompt_n for c in answers]) if answers else None,
        "answer prompt tokens, median": statistics.median([c.prompt_n + c.cache_n for c in answers]) if answers else None,
        "model calls per message": round(len(talk) / len(exchanges), 2) if exchanges else None,
        "deep pass calls": sum(c.phase == "consolidate" for c in calls),
        "deep pass s": round(seconds.get("consolidate", 0.0), 1),
        "deep pass wrote": wrote,
    }


async def run(args: argparse.Namespace) -> dict:
    script, store = args.script, args.store
    proxy = Proxy(args.upstream.rstrip("/"))
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", proxy.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.proxy_port)
    await site.start()
    config = _config(Path(args.base), store, args.port, f"http://127.0.0.1:{args.proxy_port}")
    if args.import_file:
        started = time.monotonic()
        done = await asyncio.create_subprocess_exec(sys.executable, "-m", "src.memory", "--config", str(config),
                                                    "import", args.import_file, cwd=ROOT, env=_env(config))
        if await done.wait():
            raise RuntimeError("the import failed")
        print(f"imported {args.import_file} in {time.monotonic() - started:.0f} s", flush=True)

    exchanges: list[Exchange] = []
    seconds: dict[str, float] = {}
    since = datetime.now(UTC)
    mind = Mind(config, args.port)

    async def say(phase: str, text: str, expect: list[str] | None = None) -> None:
        proxy.phase = "after_restart" if phase == "after_restart" else "conversation"
        reply, took = await mind.send(text)
        e = Exchange(phase, text, reply, took, expect or [])
        exchanges.append(e)
        mark = "" if not e.expect else (" RIGHT" if e.right else " WRONG") + ("" if e.right_speaker else " (speaker)")
        print(f"[{took:5.1f} s]{mark} > {text}\n          < {reply!r}", flush=True)

    await mind.start()
    for fact in script["facts"]:
        await say("facts", fact)
    for q in script["questions"]:
        await say("questions", q["ask"], q["expect"])
    await say("change", script["change"]["say"])
    await say("change", script["change"]["ask"], script["change"]["expect"])
    for line in script["procedure"]:
        await say("procedure", line)
    proxy.phase = "skill"
    out = await mind.command(f"/skill save {script['skill_hint']}", re.compile(r"saved skill|skill|error", re.I), 900)
    print("/skill save:", *out, sep="\n  ", flush=True)
    for q in script["after_skill"]:
        await say("after_skill", q["ask"], q["expect"])
    summary: list[str] = []
    if not args.no_consolidate:
        proxy.phase = "consolidate"
        started = time.monotonic()
        await mind.command("/consolidate", re.compile(r"deep pass started|already running"), 60)
        # its summary is said when it ends (src/consolidation/deep/deep_pass.py `summary`)
        summary = await mind.command("", re.compile(r"^deep pass #\d+|already running elsewhere"), 3600)
        seconds["consolidate"] = time.monotonic() - started
        print("/consolidate:", *summary, sep="\n  ", flush=True)
    proxy.phase = "restart"
    print(f"/quit: exit {await mind.quit()}", flush=True)
    mind = Mind(config, args.port)
    await mind.start()
    for q in script["after_restart"]:
        await say("after_restart", q["ask"], q["expect"])
    proxy.phase = "end"
    await mind.quit()
    await runner.cleanup()

    wrote = [summary[-1]] if summary else []
    wrote += await _consolidated(config, since)
    report = _summary(exchanges, proxy.calls, wrote, seconds)
    report["calls"] = [c.__dict__ for c in proxy.calls]
    report["exchanges"] = [{"phase": e.phase, "said": e.said, "reply": e.reply, "seconds": round(e.seconds, 1),
                            "right": e.right if e.expect else None, "speaker": e.right_speaker,
                            "defect": e.defect} for e in exchanges]
    (store / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", default="http://127.0.0.1:8080", help="the OpenAI-compatible server")
    parser.add_argument("--store", required=True, help="a directory for this run's database, config and report")
    parser.add_argument("--base", default=str(ROOT / "runtime.local.yaml"), help="the config to start from")
    parser.add_argument("--import", dest="import_file", help="a JSONL file of conversation turns to import first")
    parser.add_argument("--port", type=int, default=8798, help="the mind's web/API port")
    parser.add_argument("--proxy-port", type=int, default=8797, help="the recording proxy's port")
    parser.add_argument("--no-consolidate", action="store_true",
                        help="skip /consolidate (a deep pass takes ~10 minutes with a 1.5B model on 2 cores)")
    args = parser.parse_args(argv)
    args.script = json.loads(SCRIPT.read_text(encoding="utf-8"))
    args.store = Path(args.store).resolve()
    args.store.mkdir(parents=True, exist_ok=True)
    report = asyncio.run(run(args))
    for key, value in report.items():
        if key not in ("calls", "exchanges"):
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
