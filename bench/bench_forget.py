"""Forgetting (issue 39): is a request recognised, and what does one forget cost?

    python -m bench forget                     # part of `make bench`

1. The request in conversation (src/gates/forget_request.py) on the labelled set
   bench/data/forget_requests.jsonl (written by a helper that saw no code; split dev /
   report; the patterns were tuned on dev only): per split, requests recognised (recall),
   lines recognised that are no request (false alarms, of the other lines), and the words
   it names — the labelled `about` found in them, or "what I just said" told as such.
2. The forget itself (src/erasure/forget.py) on a store of STORE_ROWS memories with as
   many rows in each log (thought_log, gate decisions, the journal, consolidation_log): a
   forget by words of two memories — the listing, the dry run, the forget — each the
   median of RUNS. The scrub reads every text column of every table: its cost grows with
   the logs, which retention bounds (issue 24).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from bench.common import bench_pool
from src.erasure import matches
from src.erasure.forget import forget
from src.gates.forget_request import USER, forget_request
from src.gates.utterance import content_words

DATA = Path(__file__).parent / "data" / "forget_requests.jsonl"
STORE_ROWS = 20_000
RUNS = 3


def _items() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]


def _names(found, item: dict) -> bool:
    """Whether the recognised request names what the label says: the labelled words' content
    words all in the words found, or "the last line" for a request about the last line."""
    if item.get("what") == "last" or not item.get("about"):
        return found.last
    want = content_words(item["about"])
    return bool(want) and want <= content_words(found.about)


def recognition(items: list[dict]) -> list[dict]:
    rows = []
    for split in ("dev", "report"):
        part = [i for i in items if i["split"] == split]
        asks = [i for i in part if i["label"] == "forget"]
        others = [i for i in part if i["label"] != "forget"]
        found = {id(i): forget_request(i["text"], USER) for i in part}
        hit = [i for i in asks if found[id(i)] is not None]
        named = [i for i in hit if _names(found[id(i)], i)]
        alarms = [i for i in others if found[id(i)] is not None]
        rows += [
            {"name": f"{split}: requests recognised ({len(asks)})", "value": 100 * len(hit) / max(1, len(asks)),
             "unit": "%"},
            {"name": f"{split}: ... naming what the label names", "value": 100 * len(named) / max(1, len(asks)),
             "unit": "%"},
            {"name": f"{split}: other lines taken for a request ({len(others)})",
             "value": 100 * len(alarms) / max(1, len(others)), "unit": "%"},
        ]
    return rows


_FILL = """
INSERT INTO memories (content, memory_type, source_tag, conversation_context, compressed, metadata)
SELECT 'Imported turn ' || g || ': we talked about the garden, the weather and plans for ' || (g % 97),
       'episodic', 'external_user', 'the turn before ' || g, 'garden talk ' || g, '{"speaker": "Ann"}'::jsonb
  FROM generate_series(1, $1) AS g;
INSERT INTO thought_log (session_id, cycle, source_tag, attention_focus, candidates, output)
SELECT 's', g, 'external_user', 'What about the garden ' || g || '?',
       jsonb_build_array(jsonb_build_object('id', g, 'text', 'garden ' || g)), 'The garden is fine ' || g
  FROM generate_series(1, $1) AS g;
INSERT INTO gate_decisions (gate, source_tag, content_preview, rule, action, reason)
SELECT 'exit', 'external_user', 'Imported turn ' || g, 'statement', 'persist', 'a fact'
  FROM generate_series(1, $1) AS g;
INSERT INTO input_journal (session_id, kind, line, state)
SELECT 's', 'message', 'line ' || g || ' about the garden', 'done' FROM generate_series(1, $1) AS g;
INSERT INTO consolidation_log (memory_id, operation, actor, reason, requested_delta, applied_delta,
                               alpha_before, beta_before, alpha_after, beta_after, evidence)
SELECT NULL, 'reinforce', 'retrieval', 'recalled', 0.1, 0.1, 1, 4, 1.1, 4,
       jsonb_build_object('query', 'garden question ' || g) FROM generate_series(1, $1) AS g;
"""
SECRETS = ("My gym locker code is zebrafish 7419.", "The zebrafish code opens the blue locker.")


async def cost() -> list[dict]:
    listing, dry, real = [], [], []
    for _ in range(RUNS):
        async with bench_pool("bench_forget") as pool:
            async with pool.acquire() as conn:
                for statement in _FILL.strip().split(";\n"):
                    await conn.execute(statement.replace("$1", str(STORE_ROWS)))
                await conn.execute("INSERT INTO memories (content, memory_type, source_tag) "
                                   "SELECT unnest($1::text[]), 'episodic', 'external_user'", list(SECRETS))
                await conn.execute("ANALYZE")
            t = time.perf_counter()
            found = await matches.by_words(pool, "zebrafish")
            listing.append(time.perf_counter() - t)
            assert len(found) == 2, found
            t = time.perf_counter()
            await forget(pool, None, found, who="cli", words="zebrafish", dry_run=True)
            dry.append(time.perf_counter() - t)
            t = time.perf_counter()
            receipt, _ = await forget(pool, None, found, who="cli", words="zebrafish")
            real.append(time.perf_counter() - t)
            assert receipt.memories == 2
    return [{"name": f"listing by words, {STORE_ROWS:,} memories", "value": 1000 * statistics.median(listing),
             "unit": "ms"},
            {"name": f"dry run, {STORE_ROWS:,} rows in each log", "value": 1000 * statistics.median(dry), "unit": "ms"},
            {"name": "forget (one transaction, every table)", "value": 1000 * statistics.median(real), "unit": "ms"}]


async def run() -> list[dict]:
    rows = recognition(_items()) if DATA.exists() else []
    return rows + await cost()
