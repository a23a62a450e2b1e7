"""Convert REALTALK into bench/data/realconv_turns.jsonl and realconv_questions.jsonl.

    python -m bench.realconv_dataset /work/.mirror/danny911kr+REALTALK/repo

The argument is a git mirror of https://github.com/danny911kr/REALTALK (the converter
reads `data/Chat_*.json` at the mirror's HEAD with `git show`, so a bare mirror works)
or a checkout of it. REALTALK (Lee et al. 2025, arXiv:2502.13270) is ten pairs of real
people messaging for 21 days, with memory-probing questions whose answers cite the turns
(`dia_id`s) that hold them. Only the ten `data/Chat_*.json` files are read: the mirror's
`data/locomo/` is LoCoMo, this project's hold-out, and must never be tuned on.

Why these choices:
- Every turn is kept (8,944): the split is by conversation, and cutting a conversation
  short would drop evidence and the distractors that make recall hard.
- `time` is the message's own timestamp. The source gives no time zone; it is written as
  UTC so the field is valid ISO 8601 — only differences within a conversation matter.
- The annotators' evidence lists are messy ("D5:3.", "D12:3-D12:5", "D11:17; D16:1",
  "D 2:18"); each is parsed into ids, ranges expanded within their session. Ids that name
  no turn in the file (REALTALK dropped some messages, e.g. some photos, after
  annotation) are left out; a question left with no evidence is left out (counts printed).
- Questions stay verbatim, typos and all ("Akim" for Akib; conversation 1 asks about
  "Kate", whom the messages call Kate while the speaker label is "Emi"): real questions.
- Split by conversation: odd chat numbers tune, even ones report (5 and 5, similar sizes).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
TURNS = DATA / "realconv_turns.jsonl"
QUESTIONS = DATA / "realconv_questions.jsonl"
SOURCE_FILE = re.compile(r"data/Chat_(\d+)_[^/]+\.json")
SESSION_KEY = re.compile(r"session_(\d+)")
EVIDENCE_ID = re.compile(r"D\s*(\d+)\s*:\s*(\d+)")
EVIDENCE_RANGE = re.compile(r"D\s*(\d+)\s*:\s*(\d+)\s*-\s*(?:D\s*(\d+)\s*:\s*)?(\d+)")


def _read_source(mirror: Path) -> dict[str, dict[str, Any]]:
    """{conversation id: parsed JSON} for the REALTALK chats at the mirror's HEAD."""
    names = subprocess.run(["git", "-C", str(mirror), "ls-tree", "--name-only", "HEAD", "data/"],
                           check=True, capture_output=True, text=True).stdout.split()
    chats: dict[str, dict[str, Any]] = {}
    for name in names:
        if SOURCE_FILE.fullmatch(name):
            text = subprocess.run(["git", "-C", str(mirror), "show", f"HEAD:{name}"],
                                  check=True, capture_output=True, text=True).stdout
            chats[Path(name).stem] = json.loads(text)
    if len(chats) != 10:
        raise SystemExit(f"expected REALTALK's 10 data/Chat_*.json files, found {len(chats)}")
    return chats


def _iso(stamp: str) -> str:
    """'29.12.2023, 22:42:04' → '2023-12-29T22:42:04+00:00' (zone unknown: see module doc)."""
    return datetime.strptime(stamp, "%d.%m.%Y, %H:%M:%S").replace(tzinfo=UTC).isoformat()


def parse_evidence(raw: str) -> list[str]:
    """The dia_ids one annotator's evidence string names, ranges expanded, in order."""
    ids: list[str] = []
    for match in EVIDENCE_RANGE.finditer(raw):
        session, first, end_session, last = match.groups()
        if end_session in (None, session):
            ids += [f"D{session}:{n}" for n in range(int(first), int(last) + 1)]
        else:   # a range across sessions cannot be expanded: keep its two ends
            ids += [f"D{session}:{first}", f"D{end_session}:{last}"]
    rest = EVIDENCE_RANGE.sub(" ", raw)
    ids += [f"D{s}:{n}" for s, n in EVIDENCE_ID.findall(rest)]
    return list(dict.fromkeys(ids))


def convert(chats: dict[str, dict[str, Any]]) -> tuple[list[dict], list[dict], dict[str, int]]:
    """Turn rows, question rows and the counts of what was left out."""
    turns: list[dict] = []
    questions: list[dict] = []
    dropped = {"evidence ids naming no turn": 0, "questions without evidence": 0}
    order = sorted(chats, key=lambda conv: int(SOURCE_FILE.fullmatch(f"data/{conv}.json")[1]))
    for conv in order:
        chat = chats[conv]
        number = int(SOURCE_FILE.fullmatch(f"data/{conv}.json")[1])
        sessions = sorted((int(m[1]), key) for key in chat if (m := SESSION_KEY.fullmatch(key)))
        known: set[str] = set()
        for session, key in sessions:
            for turn in chat[key]:
                known.add(turn["dia_id"])
                turns.append({"conv": conv, "session": session, "turn": f"{conv}/{turn['dia_id']}",
                              "speaker": turn["speaker"], "text": turn["clean_text"],
                              "time": _iso(turn["date_time"])})
        for qa in chat["qa"]:
            cited = [i for raw in qa.get("evidence", []) for i in parse_evidence(raw)]
            found = [i for i in dict.fromkeys(cited) if i in known]
            dropped["evidence ids naming no turn"] += len(set(cited)) - len(found)
            if not found:
                dropped["questions without evidence"] += 1
                continue
            questions.append({"conv": conv, "question": qa["question"],
                              "evidence": [f"{conv}/{i}" for i in found],
                              "split": "tune" if number % 2 else "report",
                              "answer": str(qa.get("answer", "")), "category": qa.get("category")})
    return turns, questions, dropped


def write_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    turns, questions, dropped = convert(_read_source(Path(argv[0])))
    write_jsonl(TURNS, turns)
    write_jsonl(QUESTIONS, questions)
    for split in ("tune", "report"):
        convs = {q["conv"] for q in questions if q["split"] == split}
        print(f"{split}: {len(convs)} conversations, {sum(t['conv'] in convs for t in turns):,} turns, "
              f"{sum(q['split'] == split for q in questions)} questions")
    print(", ".join(f"{what}: {n}" for what, n in dropped.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
