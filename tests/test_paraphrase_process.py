"""Facts asked for in other words (issue 35), tried as a user does: the real service as a
subprocess, 1,500 memories of other people's chat imported, ten facts typed one at a time,
a restart, then the operator's `search` with questions that share no content word with the
facts. The facts and questions are the first ten of the report half of
bench/data/paraphrase_facts.jsonl (written apart from the retrieval code; nothing is tuned
on that half)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.proc import ROOT, agent_env, noiseless_config
from tests.test_fidelity_process import _memory_cli, _say_one_at_a_time

PARAPHRASES = ROOT / "bench" / "data" / "paraphrase_facts.jsonl"
CHAT = ROOT / "bench" / "data" / "recall_memories.jsonl"
#: The synthetic set's two speakers, as other people: this store is not the user's.
RENAMED = {"user": "Sam", "agent": "Alex"}


def _report_items(n: int) -> list[dict]:
    items = [json.loads(line) for line in PARAPHRASES.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [i for i in items if i["split"] == "report"][:n]


def _other_peoples_chat(path: Path, n: int) -> Path:
    lines = []
    for line in CHAT.read_text(encoding="utf-8").splitlines()[:n]:
        row = json.loads(line)
        row["source_tag"] = "external_user"
        row["metadata"]["speaker"] = RENAMED.get(row["metadata"].get("speaker"), "Sam")
        row["conversation"] = f"session {row['metadata']['session']}"
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


async def test_ten_facts_are_found_by_questions_in_other_words_after_a_restart(db_dsn, tmp_path: Path):
    config = noiseless_config(tmp_path)     # the shipped settings: the offline embedder MiniLM
    env = agent_env(DATABASE_URL=db_dsn, MOLTBOT_CONFIG=str(config))
    imported = _memory_cli(env, "import", str(_other_peoples_chat(tmp_path / "chat.jsonl", 1500)))
    assert imported.returncode == 0, imported.stderr.decode()[-2000:]
    items = _report_items(10)
    _say_one_at_a_time(env, [i["fact"] for i in items], config)
    _say_one_at_a_time(env, [], config)               # a restart: nothing said, nothing lost

    questions = tmp_path / "questions.txt"
    questions.write_text("".join(f"{i['question']}\n" for i in items), encoding="utf-8")
    searched = _memory_cli(env, "search", "--batch", str(questions), "--k", "5", "--seed", "1")
    assert searched.returncode == 0, searched.stderr.decode()[-2000:]
    answers = [json.loads(line) for line in searched.stdout.decode().splitlines()]
    found = [i["fact"] for i, a in zip(items, answers, strict=True)
             if i["fact"] in [r["content"] for r in a["results"][:5]]]
    missed = {i["question"]: [r["content"] for r in a["results"][:5]]
              for i, a in zip(items, answers, strict=True) if i["fact"] not in found}
    assert len(found) >= 8, f"found {len(found)} of 10; missed: {missed}"
