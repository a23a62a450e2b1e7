"""The entry gate (plan §2.9): what counts as mechanical, the stochastic rules and their
rates, and what is written before anything else happens to an input."""

from __future__ import annotations

import json
import random
from datetime import timedelta

import pytest

from src.errors import InputRejected
from src.gates.entry import EntryGate, decide_entry, mechanical_reason, preliminary_tags
from src.gates.settings import EntryGateSettings

MECHANICAL = [
    ("Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\n    main()\n"
     "ValueError: bad input", "stack_trace"),
    ("Exception in thread \"main\" java.lang.NullPointerException\n"
     "    at com.example.App.run(App.java:42)\n    at com.example.App.main(App.java:10)", "stack_trace"),
    ("panic: runtime error: index out of range\n\ngoroutine 1 [running]:\nmain.main()", "stack_trace"),
    ("KeyError: 'user_id'", "stack_trace"),
    ('{"status": "ok", "items": [1, 2, 3], "next": null}', "structured_dump"),
    ('[{"id": 1}, {"id": 2}]', "structured_dump"),
    ("<html><body><div class=\"x\"></div></body></html>", "structured_dump"),
    ("$ git status --short", "command_echo"),
    (">>> import numpy as np\n>>> np.zeros(3)", "command_echo"),
    ("ada@box:~/src$ make test", "command_echo"),
    ("PS C:\\Users\\ada> Get-ChildItem", "command_echo"),
    ("Downloading: 45%|████▌     | 450/1000 [00:03<00:04, 130.2it/s]", "progress_bar"),
    ("[=========>          ] 47%", "progress_bar"),
    ("2024-05-01 12:00:01 INFO server started\n2024-05-01 12:00:02 WARN slow disk", "log_lines"),
    ("[ERROR] connection refused\n[INFO] retrying in 5 s", "log_lines"),
    ("INFO:root:loaded model\nINFO:root:ready", "log_lines"),
    ("ERROR   disk full\nWARNING  retrying", "log_lines"),
    ("diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py", "diff"),
    ("@@ -1,3 +1,4 @@\n-old line\n+new line", "diff"),
    ("12 34 56 78\n90 12 34 56\n78 90 12 34", "non_letters"),
    ("+----+----+\n| 1  | 2  |\n+----+----+", "non_letters"),
    ("d41d8cd98f00b204e9800998ecf8427e3b5c1f0a6d2e7b8c9f0a1b2c3d4e5f60", "opaque_tokens"),
    ("token: eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9eyJzdWIiOiIxMjM0NTY3ODkwIn0", "opaque_tokens"),
]

HUMAN = [
    "I got a TypeError when I ran it, any idea why?",
    "The meeting moved to 3:30 PM on Tuesday, room 204.",
    "My favourite numbers are 7 and 42",
    "Can you look at https://example.com/some/very/long/path/that/goes/on/and/on/forever ?",
    "😀😀😀😀😀😀😀😀😀😀😀😀",
    "I was at 45% battery when the call dropped",
    "Error messages always make me anxious",
    "$5 for a coffee is too much",
    "INFO sessions are on Mondays, my boss said",
    "我今天很高兴，因为天气很好",
    "{I think} this is [mostly] fine",
]


@pytest.mark.parametrize(("text", "reason"), MECHANICAL)
def test_mechanical_output_is_recognised(text, reason):
    assert mechanical_reason(text) == reason


@pytest.mark.parametrize("text", HUMAN)
def test_human_text_is_not_mechanical(text):
    assert mechanical_reason(text) is None


def test_preliminary_tags():
    assert preliminary_tags("Do I really not like coffee?") == ["question", "first_person", "negated"]
    assert preliminary_tags("She doesn't swim") == ["negated"]
    assert preliminary_tags("see https://x.org\n```print(1)```") == ["url", "code", "multiline"]
    assert preliminary_tags("The sky is blue") == []


def test_decisions_name_their_rule_draw_and_rate():
    settings = EntryGateSettings()
    short = decide_entry("hi there", random.Random(0), settings)
    assert (short.rule, short.action, short.skip_rate, short.tags) == ("short", "skip", 0.95, ("short",))
    assert short.draw == random.Random(0).random()
    assert short.reason == f"8 characters; skipped (draw {short.draw:.4f} vs skip rate 0.95)"
    dump = decide_entry('{"a": 1, "b": [true, false]}', random.Random(0), settings)
    assert (dump.rule, dump.mechanical, dump.tags) == ("mechanical", "structured_dump",
                                                      ("mechanical", "mechanical:structured_dump"))
    content = decide_entry("I moved to Lisbon in March", random.Random(0), settings)
    assert (content.rule, content.action, content.draw, content.tags) == (
        "content", "buffer", None, ("first_person",))


def test_short_is_measured_after_trimming():
    settings = EntryGateSettings()
    assert decide_entry("   ok      ", random.Random(0), settings).rule == "short"
    assert decide_entry("ten chars!", random.Random(0), settings).rule == "content"


@pytest.mark.parametrize(("text", "skip_rate"), [("ok", 0.95), ("$ ls -la /var/log", 0.90)])
def test_skip_rates_over_ten_thousand_draws(text, skip_rate):
    rng = random.Random(20261122)
    settings = EntryGateSettings()
    skipped = sum(decide_entry(text, rng, settings).action == "skip" for _ in range(10_000))
    # binomial sd is 22 (95/5) and 30 (90/10) at n = 10,000; 100 is over 3 sd
    assert abs(skipped - 10_000 * skip_rate) <= 100, skipped


def test_the_same_seed_gives_the_same_decisions():
    texts = ["ok", "$ ls", "hello there, friend", "yo"] * 25
    settings = EntryGateSettings()
    run = [[decide_entry(t, rng, settings).action for t in texts]
           for rng in (random.Random(9), random.Random(9))]
    assert run[0] == run[1]


async def test_a_kept_item_is_a_scratch_row_with_its_decision(pool):
    gate = EntryGate(pool, EntryGateSettings(), random.Random(0), timedelta(hours=24))
    admitted = await gate.admit("Do I still like sailing?", source_tag="external_user",
                                source_confidence=0.9, metadata={"session": "s1"})
    row = await pool.fetchrow("SELECT id, content, source_tag, source_confidence, tags, metadata, "
                              "expires_at - created_at AS ttl, flushed_at FROM scratch_buffer")
    assert admitted.scratch_id == row["id"]
    assert (row["content"], row["source_tag"], row["source_confidence"], row["tags"],
            json.loads(row["metadata"]), row["ttl"], row["flushed_at"]) == (
        "Do I still like sailing?", "external_user", 0.9, ["question", "first_person"],
        {"session": "s1"}, timedelta(hours=24), None)
    decision = await pool.fetchrow("SELECT gate, scratch_id, source_tag, content_preview, rule, action, "
                                   "random_draw, noise_rate, reason, details FROM gate_decisions")
    assert dict(decision) | {"details": json.loads(decision["details"])} == {
        "gate": "entry", "scratch_id": row["id"], "source_tag": "external_user",
        "content_preview": "Do I still like sailing?", "rule": "content", "action": "buffer",
        "random_draw": None, "noise_rate": None, "reason": "content is buffered",
        "details": {"tags": ["question", "first_person"], "mechanical": None}}


async def test_a_skipped_item_leaves_only_its_decision(pool):
    settings = EntryGateSettings(short_skip_rate=1.0)
    gate = EntryGate(pool, settings, random.Random(0), timedelta(hours=24))
    admitted = await gate.admit("ok")
    assert (admitted.scratch_id, admitted.decision.action) == (None, "skip")
    assert await pool.fetchval("SELECT count(*) FROM scratch_buffer") == 0
    row = await pool.fetchrow("SELECT scratch_id, rule, action, random_draw, noise_rate, content_preview "
                              "FROM gate_decisions")
    assert dict(row) == {"scratch_id": None, "rule": "short", "action": "skip",
                         "random_draw": admitted.decision.draw, "noise_rate": 1.0, "content_preview": "ok"}


async def test_a_mechanical_item_that_is_kept_is_tagged(pool):
    gate = EntryGate(pool, EntryGateSettings(mechanical_skip_rate=0.0), random.Random(0),
                     timedelta(hours=1))
    admitted = await gate.admit("KeyError: 'user_id'", source_tag="tool")
    assert admitted.decision.action == "buffer"
    tags = await pool.fetchval("SELECT tags FROM scratch_buffer WHERE id = $1", admitted.scratch_id)
    assert tags == ["mechanical", "mechanical:stack_trace"]


async def test_content_is_cleaned_and_empty_content_refused(pool):
    gate = EntryGate(pool, EntryGateSettings(), random.Random(0), timedelta(hours=1))
    admitted = await gate.admit("nul\x00 bytes are removed here")
    assert await pool.fetchval("SELECT content FROM scratch_buffer WHERE id = $1",
                               admitted.scratch_id) == "nul bytes are removed here"
    with pytest.raises(InputRejected) as err:
        await gate.admit(" \x00 \n")
    assert str(err.value) == ("the entry gate got empty content (after removing NUL bytes and "
                              "whitespace); nothing was buffered")
    assert await pool.fetchval("SELECT count(*) FROM gate_decisions") == 1
