"""A model that hangs on one turn holds that turn no longer than the cycle deadline, and
never holds the message queued behind it (issue 41 item 8): the real process against a
local OpenAI-compatible server that never answers a request about the tide and answers
every other one at once. Before, the deadline an openai_compat model got by default was
its two timeouts (300 + 300 s): a healthy message behind a hung one waited 67 s."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import yaml

from src.config import load_settings
from src.loop.thinking import cycle_deadline
from src.providers.settings import DEFAULT_LLM_TIMEOUT_S
from tests.proc import agent_env, noiseless_config, read_until, set_key, spawn_agent, wait_ready
from tests.test_timing_shutdown import LocalModel

HUNG = "tide"


def _about_the_tide(body: dict) -> bool:
    """A chat request whose last user message names the tide (structured checks are answered)."""
    return HUNG in str(body["messages"][-1]["content"]).lower() and "response_format" not in body


def test_by_default_a_local_model_holds_a_turn_for_tens_of_seconds_not_minutes(tmp_path):
    """The shipped settings with an openai_compat model (timeout 300 s an attempt)."""
    runtime = set_key(yaml.safe_load(noiseless_config(tmp_path).read_text()), "providers.llm.provider", "openai_compat")
    path = tmp_path / "runtime.yaml"
    path.write_text(yaml.safe_dump(runtime))
    settings = load_settings(path, env={})
    local = SimpleNamespace(timeout_s=settings.providers.llm.timeout_for("openai_compat"))
    assert local.timeout_s == DEFAULT_LLM_TIMEOUT_S["openai_compat"] == 300.0
    assert cycle_deadline(settings.loop.cycle_deadline_s, local, local) <= 60.0
    assert cycle_deadline(None, local, local) == 600.0       # what it was: the two timeouts


async def test_a_hung_turn_ends_at_the_deadline_and_the_next_message_is_answered_at_once(db_dsn, tmp_path):
    model = LocalModel(hangs_on=_about_the_tide)
    runtime = yaml.safe_load(noiseless_config(tmp_path).read_text())
    runtime["providers"]["llm"] |= {"provider": "openai_compat", "base_url": f"http://127.0.0.1:{model.port}/v1",
                                    "openai_model": "fake-local", "request_logprobs": False,
                                    "context_window": {"system1": 4096, "system2": 4096}}
    set_key(runtime, "loop.cycle_deadline_s", 4)
    set_key(runtime, "consolidation.deep.enabled", False)
    set_key(runtime, "recall.layers", {"values_path": str(tmp_path / "v.json"), "goals_path": str(tmp_path / "g.json"),
                                       "cache_dir": str(tmp_path / "cache")})
    runtime["web"] = {"enabled": False}
    config = tmp_path / "runtime.yaml"
    config.write_text(yaml.safe_dump(runtime))
    proc = spawn_agent(agent_env(DATABASE_URL=db_dsn), ("--config", str(config)))
    try:
        wait_ready(proc)
        proc.stdin.write(b"What is the tide like at Matosinhos today?\n")
        proc.stdin.flush()
        for _ in range(300):
            if model.hanging:
                break
            await asyncio.sleep(0.1)
        assert model.hanging, "the hung turn never reached the model"
        proc.stdin.write(b"Hi, my name is Priya.\n")      # queued behind the hung turn
        proc.stdin.flush()
        # answered while the hung call is still open (the server releases it only at close)
        lines = read_until(proc, lambda line: "Nice to meet you, Priya." in line, timeout=60)
        assert not model.released.is_set() and model.hanging >= 1
        out, err = proc.communicate(b"/quit\n", timeout=60)
    finally:
        proc.kill()
        model.close()
    hung = [i for i, line in enumerate(lines) if "did not answer within 4 s" in line]
    assert hung and hung[0] < len(lines) - 1, lines          # the hung turn was answered first, in words
    assert proc.returncode == 0 and "Traceback" not in err.decode()
