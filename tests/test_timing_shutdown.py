"""/quit while a call of the mind's own hangs on a slow local model (issue 27): the real
process against a local OpenAI-compatible server that stops answering once the user has
been answered. Before, shutdown ran past its 10 s, the pool was closed hard, and the
session's uptime and the scratch flush were lost."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import asyncpg
import yaml

from tests.proc import agent_env, noiseless_config, read_until, set_key, spawn_agent, wait_ready

REPLY = "Nice to meet you, Priya. Confidence: 0.95"
# every structured answer the mind may ask for here: feeling of knowing, contradiction
META = {"judgement": "KNOWN", "confidence": 0.9, "contradicts": False, "summary_a": "a statement"}


class LocalModel:
    """A one-model chat server in a thread. Answers until `hang` is set; from then on every
    request is read and never answered (until `close`), as is each request for which
    `hangs_on(body)` holds. Checks the requests' shape."""

    def __init__(self, hangs_on: Callable[[dict], bool] | None = None) -> None:
        self.hang = threading.Event()
        self.released = threading.Event()
        self.answered = 0
        self.hanging = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:   # quiet: the test's output is the agent's
                return

            def do_GET(self) -> None:              # no /props: the mind keeps its configured window
                self.send_error(404)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path != "/v1/chat/completions":   # Ollama's /api/show: not Ollama
                    self.send_error(404)
                    return
                assert body["model"] == "fake-local"
                assert body["messages"][-1]["role"] == "user"
                if owner.hang.is_set() or (hangs_on is not None and hangs_on(body)):
                    owner.hanging += 1
                    owner.released.wait(120)
                    return
                text = json.dumps(META) if "response_format" in body else REPLY
                owner.answered += 1
                data = json.dumps({"choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": text}}],
                                   "usage": {"prompt_tokens": 50, "completion_tokens": 9}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def _config(tmp_path, port: int):
    runtime = yaml.safe_load(noiseless_config(tmp_path).read_text(encoding="utf-8"))
    runtime["providers"]["llm"] |= {"provider": "openai_compat", "base_url": f"http://127.0.0.1:{port}/v1",
                                    "openai_model": "fake-local", "request_logprobs": False}
    set_key(runtime, "loop.cycle_deadline_s", 600)          # a hung call would hold the cycle for minutes
    set_key(runtime, "gates.scratch.flush_every", 1)        # the message becomes a memory the DMN can wander to
    runtime["dmn"] = {"interval_s": 0.2, "rest_factor": 1.0, "quiet_after_user_s": 0, "idle_tau_s": 0.001}
    set_key(runtime, "consolidation.deep.enabled", False)
    runtime["web"] = {"enabled": False}
    set_key(runtime, "recall.layers", {"values_path": str(tmp_path / "v.json"),
                                       "goals_path": str(tmp_path / "g.json"), "cache_dir": str(tmp_path / "cache")})
    path = tmp_path / "runtime.yaml"
    path.write_text(yaml.safe_dump(runtime), encoding="utf-8")
    return path


async def test_quit_during_a_hung_internal_call_flushes_and_records_uptime(db_dsn, tmp_path):
    model = LocalModel()
    proc = spawn_agent(agent_env(DATABASE_URL=db_dsn), ("--config", str(_config(tmp_path, model.port))))
    try:
        wait_ready(proc)
        proc.stdin.write(b"Hi, my name is Priya Raman and I am a marine biologist in Lisbon.\n")
        proc.stdin.flush()
        read_until(proc, lambda line: "Nice to meet you, Priya." in line)
        model.hang.set()               # from now on the model takes forever: the DMN's thought hangs
        for _ in range(600):
            if model.hanging:
                break
            await asyncio.sleep(0.1)
        assert model.hanging, "no call of the mind's own reached the model"
        out, err = proc.communicate(b"/quit\n", timeout=60)
    finally:
        proc.kill()
        model.close()
    out, err = out.decode(), err.decode()
    assert proc.returncode == 0, err
    assert out.rstrip().endswith("shutting down")
    assert "shutdown took longer" not in err and "Traceback" not in err
    conn = await asyncpg.connect(db_dsn)
    try:
        manifest = await conn.fetchrow("SELECT last_shutdown_at, uptime_total_hours FROM agent_manifest")
        statuses = [r["status"] for r in await conn.fetch("SELECT status FROM llm_calls ORDER BY id")]
        kept = await conn.fetchval("SELECT count(*) FROM memories WHERE source_tag = 'external_user' "
                                   "AND content LIKE '%marine biologist%'")
    finally:
        await conn.close()
    assert manifest["last_shutdown_at"] is not None and manifest["uptime_total_hours"] > 0
    # the flush at shutdown judged everything buffered (what the exit gate keeps buffered stays)
    assert re.search(r"scratch flush at shutdown: [1-9]\d* evaluated", err) and kept == 1
    assert statuses[:2] == ["ok", "ok"] and "cancelled" in statuses   # the hung call kept its row
