"""Merge (plan §4.2): clusters of near-duplicate memories become one insight.

Candidates are the newest memories not yet merged and one window of a walk down the older
ones (`deep.merge_walk` a pass, resumed where the last pass stopped, sql/157: issue 40 item 6,
duplicates older than the newest were never reached), paired with their nearest stored
neighbours (a loose pre-filter on the stored vectors); questions, boundaries and seeds
are never merged (integrity.py), and a merged text that is a question is rejected. Their texts are embedded with
task type CLUSTERING and grouped by leader clustering at the embed model's `merge`
threshold, where a member must also share `merge_overlap` of its content words with
its leader (clustering.py: cosine alone calls distinct facts in one frame the same).
Each cluster becomes one `reflection` memory (metadata kind 'insight', via 'merge')
with supersedes links to every member; the members get contradict(0.3) so the insight
surfaces first; nothing is deleted.

Idempotent across passes, crashes and restarts: a cluster is identified by the hash
of its sorted member ids, written in the same transaction as its insight; a memory
that is already the source of a merge is not a candidate again (a new memory close
to a merged cluster merges with the cluster's insight instead). Nor is one a newer statement
updated, or anything derived from it (clusters_repository.py): a merge is one present-tense
memory, and "the appointment is on Tuesday" merged with "…on Thursday" would state both as
current. A model's validated
answer is saved (`answer:<fingerprint>`, the phase's unit payload) as soon as its
batch is paid for, before any insight is written, as insights.py saves a question's:
a pass killed between batches resumes with the answers it bought, not asking again.

A merged memory states every source's distinct facts, since its sources give way to it.
Without a language model it is extractive (`extractive_merge`): the most central
member's text, then the clauses of the other members that hold content words not yet
stated. With one it is one generalising sentence citing its members (the question:
src/consolidation/deep/prompts.py), and `validate_merge` rejects a sentence that drops a
name or number any source states: like a bad citation, its cluster gets a
`consolidation_failures` row naming what was dropped and is asked again next pass (not
again in this pass, resumed or not: the rejection is saved as the cluster's unit). A batch's
other answers are kept when one cluster's is rejected (structured.PartlyRejected): one call
for a batch of four with one bad answer, not five.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from src.consolidation.clustering import (
    STOP_WORDS,
    content_words,
    fingerprint,
    leader_clusters,
    most_central,
    words,
)
from src.consolidation.deep import clusters_repository, memories_repository
from src.consolidation.deep.derived import DerivedMemory, write_derived
from src.consolidation.deep.evidence import speaks_of_user
from src.consolidation.deep.integrity import is_question, is_seed, states_something
from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.deep.prompts import MERGE_ITEM_CHARS, MergeAnswer, merge_question
from src.consolidation.deep.prompts import MergedInsight as MergedInsight
from src.consolidation.deep.structured import (
    BatchQuestion,
    PartlyRejected,
    Rejected,
    ask_batched,
    check_citations,
    run_guarded,
)
from src.errors import ProviderError
from src.recall.speakers import Speaker, claims_as_own, common_speaker, speaker_of
from src.text import excerpt

log = logging.getLogger(__name__)

#: The stored-vector pre-filter sits this far below the CLUSTERING threshold (stored
#: vectors carry the type prefix and another task type).
PREFILTER_MARGIN = 0.1
EMBED_BATCH = 100
#: What the extractive merge may add to the central member's text. A member whose new
#: clauses do not fit is left out of its cluster (not superseded; a candidate again next
#: pass), so every source of a merged memory has all its content words in it.
#: Near-duplicates add a few words each.
MERGE_ADDED_CHARS = 500
ADDED_JOIN = "; "
ADDED_LEAD = " Also: "
#: A clause ends at sentence or clause punctuation followed by a space, or at a line break
#: ("3.5" and "1,000" stay whole).
_CLAUSE_END = re.compile(r"(?<=[.!?;:,])\s+|\n+")
_SENTENCE_END = re.compile(r"[.!?]\s+|\n+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CAPITALISED = re.compile(r"[^\W\d_][^\W_]*")


@dataclass(frozen=True)
class Cluster:
    index: int
    ids: list[int]
    texts: list[str]
    fingerprint: str
    extractive: str            # the merged text without a model (extractive_merge)
    cited: list[int]           # ids: the most central member, then those whose clauses it adds
    speakers: list[Speaker | None] = field(default_factory=list)   # one per text (src/recall/speakers.py)


def clauses(text: str) -> list[str]:
    """`text` cut at its sentence and clause boundaries, each piece without its end punctuation."""
    return [c.strip().rstrip(".,;:!?") for c in _CLAUSE_END.split(text) if c.strip().rstrip(".,;:!?")]


@dataclass(frozen=True)
class Extract:
    """A cluster merged without a model (`extractive_merge`); indices into its members."""

    text: str
    held: list[int]            # the members whose content words it states (the rest are left out)
    cited: list[int]           # the central member, then the members that added a clause


def extractive_merge(texts: Sequence[str], central: int) -> Extract:
    """The merged text of a cluster without a model.

    The central member's text, then, member by member, the clauses of each that hold a
    content word not stated yet, joined after "Also:". A member with nothing new adds
    nothing; one whose new clauses would take the added text past MERGE_ADDED_CHARS is
    left out. Every content word of every member held is in the text.
    """
    covered = set(content_words(texts[central]))
    added: list[str] = []
    used = 0
    held, cited = [central], [central]
    for i, text in enumerate(texts):
        if i == central:
            continue
        new = content_words(text) - covered
        if not new:
            held.append(i)
            continue
        pieces = [c for c in clauses(text) if new & set(words(c))]
        cost = sum(len(c) + len(ADDED_JOIN) for c in pieces)
        if used + cost > MERGE_ADDED_CHARS:
            continue
        added += pieces
        used += cost
        covered |= new
        held.append(i)
        cited.append(i)
    head = texts[central].strip()
    if not added:
        return Extract(head, sorted(held), cited)
    end = "" if head.endswith((".", "!", "?")) else "."
    return Extract(f"{head}{end}{ADDED_LEAD}{ADDED_JOIN.join(added)}.", sorted(held), cited)


def names_and_numbers(texts: Sequence[str]) -> set[str]:
    """The names and numbers `texts` state, lower-cased: what a merged insight must keep.

    A number is a run of digits ("1,000" and "1000" are one). A name is a capitalised word
    that is not a stop word and stands inside a sentence: a sentence's first word is
    capitalised whatever it is (a name that only ever opens sentences is not caught).
    """
    found = {n.replace(",", "") for t in texts for n in _NUMBER.findall(t)}
    for text in texts:
        for sentence in _SENTENCE_END.split(text):
            for token in [m.group() for m in _CAPITALISED.finditer(sentence)][1:]:
                if token[0].isupper() and token.lower() not in STOP_WORDS:
                    found.add(token.lower())
    return found


def stated_in(insight: str) -> set[str]:
    """The words and numbers of `insight`, comparable with `names_and_numbers`."""
    return set(words(insight)) | {n.replace(",", "") for n in _NUMBER.findall(insight)}


def _problem(cluster: Cluster, item) -> str | None:
    """Why one cluster's insight cannot be used; None when it can."""
    if not item.insight.strip():
        return f"empty insight for cluster {item.cluster}"
    if is_question(item.insight):
        return f"cluster {item.cluster}'s insight is a question, not a statement"
    try:
        check_citations(item.cited_ids, set(cluster.ids), f"cluster {item.cluster}'s insight")
    except Rejected as exc:
        return str(exc)
    if speaks_of_user(item.insight) and not any(
            s is not None and (s.kind == "user" or (s.kind == "conclusion" and speaks_of_user(t)))
            for s, t in zip(cluster.speakers or [None] * len(cluster.texts), cluster.texts, strict=True)):
        return f"cluster {item.cluster}'s insight speaks of the user, and none of its memories is the user's"
    if claims_as_own(item.insight, cluster.speakers):
        return (f"cluster {item.cluster}'s insight states in the first person what only the user "
                "(or another person) said")
    shown = [excerpt(t, MERGE_ITEM_CHARS) for t in cluster.texts]       # what the model was given
    dropped = names_and_numbers(shown) - stated_in(item.insight)
    if dropped:
        return (f"cluster {item.cluster}'s insight drops names or numbers its memories state: "
                f"{', '.join(sorted(dropped))}")
    return None


def validate_merge(clusters: Sequence[Cluster], answer: MergeAnswer) -> None:
    """Raise Rejected when no cluster's insight can be used (or the reply names a cluster it was
    not given); PartlyRejected when some can (issue 40 item 6: those are kept, the rejected
    recorded, a missing one asked again alone)."""
    by_index = {c.index: c for c in clusters}
    for item in answer.insights:
        if item.cluster not in by_index:
            raise Rejected(f"insight names cluster {item.cluster}, which was not given")
    answered = {i.cluster for i in answer.insights}
    missing = [c for c in clusters if c.index not in answered]
    problems: dict[int, str] = {}
    for item in answer.insights:
        why = _problem(by_index[item.cluster], item)
        if why is not None:
            problems.setdefault(item.cluster, why)
    if not missing and not problems:
        return
    why = "; ".join(([f"no insight for cluster(s) {sorted(c.index for c in missing)}"] if missing else [])
                    + list(problems.values()))
    if len(missing) + len(problems) >= len(clusters):
        raise Rejected(why)
    raise PartlyRejected(why, rejected=[by_index[i] for i in problems], missing=missing)


@dataclass(frozen=True)
class MergeGroup:
    """One cluster of a list of texts: `members` index that list, `cited` indexes `members`."""

    members: list[int]
    text: str                  # the extractive merge
    cited: list[int]


def merge_groups(vectors: np.ndarray, texts: Sequence[str], threshold: float, min_overlap: float,
                 min_size: int) -> list[MergeGroup]:
    """The merge's clusters of `texts` (CLUSTERING `vectors`), largest first: leader clusters at
    cosine `threshold` whose members share `min_overlap` of their content words with the leader,
    each cut to the members its extractive merge holds (one left with fewer than `min_size`
    is dropped)."""
    content = [content_words(t) for t in texts]
    found = []
    for group in leader_clusters(vectors, threshold, min_size, content=content, min_overlap=min_overlap):
        central = most_central(vectors[group])
        extract = extractive_merge([texts[i] for i in group], central)
        if len(extract.held) < min_size:
            continue
        at = {g: k for k, g in enumerate(extract.held)}
        found.append(MergeGroup([group[i] for i in extract.held], extract.text, [at[i] for i in extract.cited]))
    return found


async def clustering_vectors(ctx: DeepPassContext, texts: Sequence[str]) -> np.ndarray:
    """CLUSTERING embeddings (plan §2.1), in batches the providers accept."""
    out = [await ctx.embedder.embed(list(texts[i:i + EMBED_BATCH]), "CLUSTERING")
           for i in range(0, len(texts), EMBED_BATCH)]
    return np.vstack(out) if out else np.zeros((0, ctx.embedder.dimensions), dtype=np.float32)


async def find_clusters(ctx: DeepPassContext) -> list[Cluster]:
    deep = ctx.settings.deep
    model = ctx.embedder.model_name
    th = ctx.settings.thresholds_for(model)
    async with ctx.pool.acquire() as conn:
        walk = await clusters_repository.walk_window(conn, model, ctx.pass_id, deep.merge_walk)
    pairs = await clusters_repository.merge_candidates(ctx.pool, model, deep.merge_candidates, deep.merge_neighbours,
                                                       th.merge - PREFILTER_MARGIN, walk)
    ids = sorted({r["a"] for r in pairs} | {r["b"] for r in pairs})
    if len(ids) < deep.merge_min_size:
        return []
    # only statements are facts to merge (a question is not; nor is chatter: "That is amazing!"
    # said twice made "Emi said that is amazing!"), and a boundary or seed is merged with nothing
    rows = [r for r in await memories_repository.memories_by_id(ctx.pool, ids)
            if not is_seed(r) and states_something(r["content"])]
    texts = [r["content"] for r in rows]
    speakers = [speaker_of(r["source_tag"], r["metadata"]) for r in rows]
    vecs = await clustering_vectors(ctx, texts)
    groups: list[MergeGroup] = []
    for who in dict.fromkeys(speakers):      # one speaker's words merge only with that speaker's (issue 27)
        idx = [i for i, s in enumerate(speakers) if s == who]
        found = await asyncio.to_thread(merge_groups, vecs[idx], [texts[i] for i in idx], th.merge,
                                        th.merge_overlap, deep.merge_min_size)
        groups += [MergeGroup([idx[m] for m in g.members], g.text, g.cited) for g in found]
    clusters = []
    for n, g in enumerate(groups, 1):
        member_ids = [rows[i]["id"] for i in g.members]
        clusters.append(Cluster(n, member_ids, [texts[i] for i in g.members], fingerprint(member_ids), g.text,
                                [member_ids[i] for i in g.cited], [speakers[i] for i in g.members]))
    known = await clusters_repository.known_clusters(ctx.pool, [c.fingerprint for c in clusters])
    return [c for c in clusters if c.fingerprint not in known]


#: (merged text, cited ids, extractive) by cluster fingerprint
Merged = dict[str, tuple[str, list[int], bool]]


def answer_key(c: Cluster) -> str:
    """The unit key under which a cluster's validated model answer is saved in the pass."""
    return f"answer:{c.fingerprint}"


async def _ask(ctx: DeepPassContext, clusters: Sequence[Cluster], result: PhaseResult) -> Merged:
    """The model's merged sentences, each batch's saved the moment it is validated."""
    merged: Merged = {}

    async def keep(batch: list[Cluster], answer: MergeAnswer) -> None:
        by_index = {c.index: c for c in batch}
        for item in answer.insights:
            c = by_index.get(item.cluster)
            if c is None or c.fingerprint in merged:
                continue                   # a rejected answer of the batch (PartlyRejected)
            text, cited = " ".join(item.insight.split()), sorted(set(item.cited_ids))
            await ctx.mark_done(ctx.pool, answer_key(c), {"insight": text, "cited": cited})
            merged[c.fingerprint] = (text, cited, False)

    async def rejected(batch: list[Cluster], why: str) -> None:
        # recorded in the pass: a resumed pass does not ask it again (a new pass may)
        for c in batch:
            await ctx.mark_done(ctx.pool, answer_key(c), {"rejected": why})

    before = ctx.budget.used
    await ask_batched(ctx, clusters, BatchQuestion(question=merge_question, schema=MergeAnswer,
                                                   validate=validate_merge),
                      batch_size=ctx.settings.deep.merge_batch,
                      describe=lambda c: {"cluster": c.ids},
                      on_answer=keep, on_rejected=rejected)
    result.calls = ctx.budget.used - before
    return merged


async def merged_texts(ctx: DeepPassContext, clusters: Sequence[Cluster], result: PhaseResult) -> Merged:
    """Each cluster's merged text: an answer this pass already paid for, else the model's, else
    (offline) the extractive merge. A cluster missing from the result waits for the next pass."""
    merged: Merged = {}
    for c in clusters:
        saved = ctx.done.get(answer_key(c))
        if saved is not None and "rejected" not in saved:
            merged[c.fingerprint] = (saved["insight"], list(saved["cited"]), False)
    # a cluster whose answer this pass rejected waits for the next pass, not asked again
    pending = [c for c in clusters if c.fingerprint not in merged and answer_key(c) not in ctx.done]
    if not pending:
        return merged
    if ctx.llm is not None and not ctx.budget.can_spend(1):
        # a model is there but this pass's calls are spent: the clusters wait for the next
        # pass rather than being merged extractively for good
        ctx.skip("merge:llm_insight", f"the pass's {ctx.budget.limit} LLM calls are spent; "
                 f"{len(pending)} cluster(s) wait for the next pass")
    elif run_guarded(ctx, "merge:llm_insight"):
        merged.update(await _ask(ctx, pending, result))
    else:
        # offline: the extractive merge, every member's content words
        merged.update({c.fingerprint: (c.extractive, c.cited, True) for c in pending})
    return merged


def _offline_speaker(c: Cluster, extractive: bool) -> dict[str, str]:
    """The extractive merge restates its members' words: they stay their speaker's ("The user
    said: …", src/recall/speakers.py), never the mind's own "I am …"."""
    who = common_speaker(c.speakers) if extractive else None
    return {"speaker": who.label} if who is not None else {}


async def run(ctx: DeepPassContext) -> PhaseResult:
    """The merge phase: find new clusters, write one insight per cluster."""
    result = PhaseResult()
    try:
        clusters = await find_clusters(ctx)
    except ProviderError as exc:
        ctx.skip("merge", f"CLUSTERING embeddings unavailable: {exc}")
        result.skipped = str(exc)
        return result
    result.add("clusters", len(clusters))
    if not clusters:
        return result
    written = await merged_texts(ctx, clusters, result)
    for c in clusters:
        if c.fingerprint not in written:
            continue                       # its batch failed or the budget is spent: retried next pass
        text, cited, extractive = written[c.fingerprint]

        async def remember(conn, new_id: int, c: Cluster = c) -> None:
            await clusters_repository.insert_cluster(conn, c.fingerprint, new_id, ctx.pass_id, c.ids)

        new_id = await write_derived(
            ctx, DerivedMemory(text, "reflection", sources=c.ids, via="merge",
                               metadata={"kind": "insight", "via": "merge", "cluster_fingerprint": c.fingerprint,
                                         "extractive": extractive, "cited": cited, "cluster_size": len(c.ids),
                                         **_offline_speaker(c, extractive)}),
            key=f"cluster:{c.fingerprint}", extra=remember)
        if new_id is not None:
            result.add("insights")
            result.add("superseded", len(c.ids))
            if not extractive:
                ctx.announce.append(text)
    return result
