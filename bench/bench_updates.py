"""What is current (issue 37 items 3-4): a fact stated, later changed — which comes back first?

    python -m bench updates                    # part of `make bench`

The labelled sets bench/data/updates.jsonl (A, 147 pairs) and updates_b.jsonl (B, 170 pairs;
bench/data/README.md): first-person statements typed at two times (older, newer, days
between), labelled update / distinct / contradiction / unrelated, with a question for the
current value and one for the earlier (each written by a helper that saw no code; split dev /
report; the detector's cues and recall's `current_*` settings were tuned on A's dev half
only). Each set has a store of its own: 1,500 turns of other people's chat imported as the
CLI imports them (bench_paraphrase.other_peoples_chat), then every pair's older statement as
the user's own memory, then each newer one in turn, judged against the user's statements
stored before it as the exit gate judges a new line (src/gates/updates.py) and linked when it
updates one; each statement then dated at its time (the newer `days_between` days after the
older; the newest an hour before the questions). Each set is judged in three modes, four with
a model: `offline` (the cues alone: reflex mode), `oracle` (and layer 3's relation questions
asked as the gate asks them, src/gates/model_questions.py: the relation answered by the
labels, what the newer is about by bench/data/updates_about.jsonl; what the gate's asking
reaches with a model that answers right), `recorded` (answered by a capable model's answers
to the gate's questions, recorded: bench/data/updates_recorded.jsonl), `model` (answered by
the model of the configuration `BENCH_UPDATES_LLM` names, e.g. runtime.local.yaml).

Measured:
- links: an update pair recognised (its newer linked to its older); a distinct, contradicting
  or unrelated pair's older never marked superseded by its newer; links to statements of
  other pairs (the 147 pairs are one user's life: "Swimming lessons moved to Sunday" may
  well update "I go swimming on Mondays" of another pair);
- recall, through the read-only pipeline (`search`'s path, no reranker, 3 seeds): for an
  update pair the newer in the top 5 for the question about now, ranked above the older, and
  the older in the top 5 for the question about before; for a distinct pair each statement
  in the top 5 for its own question (neither may crowd the other out).
Issue 37's targets (report half): updates recognised >= 90%, distinct never superseded
>= 98%, newer above older >= 95%.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from time import perf_counter

import numpy as np

from bench.bench_paraphrase import SEEDS, SPLITS, import_lines, other_peoples_chat
from bench.common import bench_pool
from src.config import load_settings
from src.gates.contradiction import ask_relations
from src.gates.evaluation import Neighbour
from src.gates.model_questions import by_about, linked, second_look, to_ask
from src.gates.updates import Earlier, UpdateThresholds, earlier_statements, link, pick
from src.providers.embedding import embed_memories
from src.providers.factory import build_providers
from src.recall.retrieval import Cue, Retriever
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety

DATA = Path(__file__).parent / "data"
#: The labelled sets, each measured in a store of its own: A (the detector was tuned on its dev
#: half) and B (written later by another helper that saw no code or data; measured whole
#: before anything was tuned on it, notes.md).
SETS = {"A": DATA / "updates.jsonl", "B": DATA / "updates_b.jsonl"}
TOP = 5


def _pairs(name: str) -> list[dict]:
    """Set `name`'s pairs, each with what its newer statement is about as a helper answered
    (bench/data/updates_about.jsonl: the oracle's `about`)."""
    pairs = [json.loads(line) for line in SETS[name].read_text(encoding="utf-8").splitlines() if line.strip()]
    about = {a["i"]: a["about"] for a in map(json.loads, (DATA / "updates_about.jsonl").read_text(
        encoding="utf-8").splitlines()) if a["set"] == name}
    return [{**p, "about": about[i]} for i, p in enumerate(pairs)]


#: How the newer statements are judged: "offline" (the cues alone, reflex mode), "oracle" (and
#: layer 3's relation question asked as the gate asks it, answered by the labels: a model that
#: answers right, so what the gate's asking can reach), "model" (answered by the model of the
#: configuration `BENCH_UPDATES_LLM` names, e.g. runtime.local.yaml).
Relation = Callable[[dict, list[Earlier], int], Awaitable[tuple[list[str | None], str | None]]]


async def _oracle(pair: dict, asked: list[Earlier], own_older: int) -> tuple[list[str | None], str | None]:
    """The labels' answer: "update" for an update pair's own older statement, else "neither";
    and what the newer is about as a helper answered it (bench/data/updates_about.jsonl)."""
    return (["update" if pair["label"] == "update" and e.memory_id == own_older else "neither" for e in asked],
            pair["about"])


def _model(meta) -> Relation:
    async def answer(pair: dict, asked: list[Earlier], own_older: int) -> tuple[list[str | None], str | None]:
        said = await ask_relations(meta, pair["newer"], [e.content for e in asked])
        return list(said.relations), said.about if said.layer == "llm" else None
    return answer


def _recorded(name: str) -> Relation:
    """A capable model's answers, recorded (bench/data/updates_recorded.jsonl: helpers stood in
    for the model, shown only the gate's question): by the question's round, the newer
    statement and each earlier one. An earlier statement the recording never asked about (one
    that slid into the closest after a link made since, or any, once the gate asks about
    others than `relation_pairs` 5 and `relation_about` 3 did) is answered "neither", and
    counted (`unrecorded`): the recording then measures low."""
    answers: dict[tuple[int, str, str], str] = {}
    about: dict[str, str | None] = {}
    for rec in map(json.loads, (DATA / "updates_recorded.jsonl").read_text(encoding="utf-8").splitlines()):
        if rec["set"] != name:
            continue
        for k, text in enumerate(rec["earlier"], 1):
            answers[(rec["round"], rec["newer"], text)] = (
                "update" if rec["updates"] == k else "contradiction" if k in rec["contradicts"] else "neither")
        if rec["round"] == 1:
            about[rec["newer"]] = rec["about"] or None
    rounds: dict[str, int] = {}

    async def answer(pair: dict, asked: list[Earlier], own_older: int) -> tuple[list[str | None], str | None]:
        r = rounds[pair["newer"]] = rounds.get(pair["newer"], 0) + 1
        said = [answers.get((r, pair["newer"], e.content)) for e in asked]
        answer.unrecorded += sum(s is None for s in said)
        return [s or "neither" for s in said], about.get(pair["newer"]) if r == 1 else None
    answer.unrecorded = 0
    return answer


async def _store_pairs(pool, embedder, pairs: list[dict], th: UpdateThresholds, relation: Relation | None,
                       asking: tuple[int, float, int, float]) -> tuple[list[tuple[int, int]], list[int], list[int], list[int]]:
    """Both statements of every pair as the user's memories, each at its own time, and the
    update links the exit gate would write (src/gates/updates.py): every older statement is
    stored first; then each newer one, in turn, is judged against the user's statements
    stored before it, exactly as the gate judges a new line: the offline judge, then (with
    `relation`) one relation question about the earlier statements `to_ask` names (the
    judge's pick first, then closest first), decided as the gate decides
    (src/gates/model_questions.py `linked`). (The gate also asks it of an undecided pair above the
    contradiction screen's similarity; those are among the closest, so `to_ask` stands for
    both.) The (newer, older) links made, the ids, and the questions asked per newer."""
    store = MemoryStore(pool, embedder)
    older_ids = await store.store_many([NewMemory(p["older"], "episodic", source_tag="external_user")
                                        for p in pairs])
    newer_vecs = await embed_memories(embedder, [p["newer"] for p in pairs], ["episodic"] * len(pairs))
    links: list[tuple[int, int]] = []
    newer_ids: list[int] = []
    asked: list[int] = []
    wide = replace(th, candidates=max(th.candidates, asking[0]), floor=min(th.floor, asking[1]))
    find = by_about(pool, embedder, asking[0] + asking[2] + 2, asking[3])
    for i, (p, vec) in enumerate(zip(pairs, newer_vecs, strict=True)):
        earlier = (await earlier_statements(pool, [vec], embedder.model_name, wide))[0]
        (newer_id,) = await store.store_many([NewMemory(p["newer"], "episodic", source_tag="external_user")])
        newer_ids.append(newer_id)
        picked = pick(p["newer"], [e for e in earlier[: th.candidates] if e.similarity >= th.floor], th)
        older = picked[0] if picked is not None else None
        asked.append(0)
        if relation is not None:     # asked as the gate asks; decided as it decides (`linked`)
            by_id = {e.memory_id: e for e in earlier}
            offline = Neighbour(older.similarity, older.content, memory_id=older.memory_id) if older else None
            first = to_ask([Neighbour(e.similarity, e.content, memory_id=e.memory_id) for e in earlier],
                           asking[0], asking[1], offline)
            chosen = offline
            if first:
                said, phrase = await relation(p, [by_id[n.memory_id] for n in first], older_ids[i])
                asked[i] = 1
                answers = list(zip(first, said, strict=True))
                if phrase and "update" not in said and asking[2] > 0:     # the second look, as the gate's
                    # (the newer is stored already here, unlike at the gate: one more, and not itself)
                    near = [n for n in (await find([(None, phrase)]))[0] if n.memory_id != newer_id]
                    if second := second_look(first, near, asking[2]):
                        by_id |= {n.memory_id: Earlier(n.memory_id, n.content, n.similarity) for n in second}
                        more, _ = await relation(p, [by_id[n.memory_id] for n in second], older_ids[i])
                        asked[i] += 1
                        answers += list(zip(second, more, strict=True))
                chosen = linked(offline, answers)
            older = by_id[chosen.memory_id] if chosen is not None else None
        if older is not None:
            async with pool.acquire() as conn:
                await link(conn, [(newer_id, older.memory_id)])
            links.append((newer_id, older.memory_id))
    newest = await pool.fetchval("SELECT now()") - timedelta(hours=1)
    ids, times = [], []
    for p, o, n in zip(pairs, older_ids, newer_ids, strict=True):
        ids += [o, n]
        times += [newest - timedelta(days=int(p["days_between"])), newest]
    await pool.execute("UPDATE memories m SET created_at = t.at, event_time = t.at "
                       "FROM unnest($1::bigint[], $2::timestamptz[]) "
                       "AS t(id, at) WHERE m.id = t.id", ids, times)
    return links, older_ids, newer_ids, asked


async def _ranked(retriever: Retriever, embedder, questions: list[str], now, seed: int) -> list[list[str]]:
    """Each question's recalled texts, best first ([] for a pair that asks none)."""
    asked = [q for q in questions if q.strip()]
    vecs = iter(await embedder.embed(asked, "RETRIEVAL_QUERY"))
    rng = np.random.default_rng(seed)
    out = []
    for q in questions:
        if not q.strip():
            out.append([])
            continue
        v = next(vecs)
        r = await retriever.retrieve(Cue(q, vec=v), rng=rng, now=now, mutate=False)
        out.append([m.hit.content for m in r.memories])
    return out


def _rank(ranked: list[str], text: str) -> int:
    return ranked.index(text) + 1 if text in ranked else 10_000


async def run(config: str | None = None) -> list[dict]:
    modes = ["offline", "oracle", "recorded"] + (["model"] if os.environ.get("BENCH_UPDATES_LLM") else [])
    rows: list[dict] = []
    for name in SETS:
        for mode in modes:
            rows += [{**row, "name": f"{name} {mode} {row['name']}"}
                     for row in await _run_set(config, name, mode)]
    return rows


async def _run_set(config: str | None, name: str, mode: str) -> list[dict]:
    pairs = _pairs(name)
    settings = load_settings(config, env={})
    providers = build_providers(settings.providers, settings.secrets, None, None)
    embedder = providers.embedder
    what, lines = other_peoples_chat()
    cfg = settings.recall.retrieval.model_copy(update={"keep": 20, "limit": max(settings.recall.retrieval.limit, 20)})
    rows: list[dict] = []
    model = None
    try:
        async with bench_pool("bench_updates") as pool:
            await import_lines(pool, embedder, lines)
            relation: Relation | None = None
            exit_settings = settings.gates.exit
            if mode == "oracle":
                relation = _oracle
            elif mode == "recorded":
                relation = _recorded(name)
            elif mode == "model":
                model_settings = load_settings(os.environ["BENCH_UPDATES_LLM"], env={})
                model = build_providers(model_settings.providers, model_settings.secrets, pool, "bench-updates")
                relation = _model(model.meta)      # asked as the bench's configuration asks
            t = perf_counter()
            links, older_ids, newer_ids, asked = await _store_pairs(
                pool, embedder, pairs, UpdateThresholds(), relation,
                (exit_settings.relation_pairs, exit_settings.relation_floor, exit_settings.relation_about,
                 exit_settings.relation_about_floor))
            if relation is not None:
                rows += [{"name": "relation questions per newer statement", "value": float(np.mean(asked)),
                          "unit": "calls"},
                         {"name": f"storing the {len(pairs)} newer statements", "value": perf_counter() - t,
                          "unit": "s"}]
            if mode == "recorded":
                rows.append({"name": "earlier statements asked about with no recorded answer (taken as neither)",
                             "value": relation.unrecorded, "unit": "statements"})
            now = await pool.fetchval("SELECT max(created_at) FROM memories") + timedelta(hours=1)
            retriever = Retriever(pool, embedder, None, Safety(), cfg)
            rows.append({"name": f"store: {len(lines)} turns of {what} + {len(pairs)} pairs ({embedder.model_name})",
                         "value": await pool.fetchval("SELECT count(*) FROM memories"), "unit": "memories"})
            now_q = [await _ranked(retriever, embedder, [p["question_now"] for p in pairs], now, s) for s in SEEDS]
            before_q = [await _ranked(retriever, embedder, [p["question_before"] for p in pairs], now, s)
                        for s in SEEDS]
            linked = set(links)
            made = {n for n, _ in links}
            superseded = {o for _, o in links}
            for split in SPLITS:
                for label in ("update", "distinct", "contradiction", "unrelated"):
                    picked = [i for i, p in enumerate(pairs) if p["split"] == split and p["label"] == label]
                    own = sum((newer_ids[i], older_ids[i]) in linked for i in picked)
                    wrong = sum(newer_ids[i] in made and (newer_ids[i], older_ids[i]) not in linked
                                for i in picked)
                    if label == "update":
                        rows += [{"name": f"{split}: update ({len(picked)}): recognised (the newer linked to its older)",
                                  "value": 100.0 * own / len(picked), "unit": "%"},
                                 {"name": f"{split}: update ({len(picked)}): the newer linked to another statement",
                                  "value": wrong, "unit": "pairs"}]
                    else:
                        rows += [{"name": f"{split}: {label} ({len(picked)}): correct (the older not marked "
                                          f"superseded by the newer)",
                                  "value": 100.0 * (len(picked) - own) / len(picked), "unit": "%"},
                                 {"name": f"{split}: {label} ({len(picked)}): the newer linked to another statement",
                                  "value": wrong, "unit": "pairs"},
                                 {"name": f"{split}: {label} ({len(picked)}): the older superseded by another statement",
                                  "value": sum(older_ids[i] in superseded and (newer_ids[i], older_ids[i]) not in linked
                                               for i in picked), "unit": "pairs"}]
                for label in ("update", "distinct"):
                    picked = [i for i, p in enumerate(pairs) if p["split"] == split and p["label"] == label]
                    if not picked:
                        continue

                    def share(test, picked=picked) -> float:
                        return 100.0 * float(np.mean([test(i, s) for s in range(len(SEEDS)) for i in picked]))

                    newer_top = share(lambda i, s: _rank(now_q[s][i], pairs[i]["newer"]) <= TOP)
                    older_top = share(lambda i, s: _rank(before_q[s][i], pairs[i]["older"]) <= TOP)
                    rows += [{"name": f"{split}: {label} ({len(picked)}): newer in the top {TOP} asked about now",
                              "value": newer_top, "unit": "%"},
                             {"name": f"{split}: {label} ({len(picked)}): older in the top {TOP} asked about before",
                              "value": older_top, "unit": "%"}]
                    if label == "update":
                        above = share(lambda i, s: _rank(now_q[s][i], pairs[i]["newer"])
                                      < _rank(now_q[s][i], pairs[i]["older"]))
                        rows.append({"name": f"{split}: update ({len(picked)}): newer ranked above older asked about now",
                                     "value": above, "unit": "%"})
    finally:
        await providers.aclose()
        if model is not None:
            await model.aclose()
    return rows


if __name__ == "__main__":
    import asyncio

    for row in asyncio.run(run()):
        print(f"{row['name']}: {row['value']:.1f} {row['unit']}")
