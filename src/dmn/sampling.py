"""The DMN's stochastic sampling pool (plan §4.7). Pure: arrays in, indices out.

All memories can be drawn, but the draw is biased toward
    - high weight + low recent access (neglected important memories),
    - memories in tension with what the mind holds,
    - temporally distant memories (creative association),
    - high-weight memories about the self (spontaneous introspection): the mind's own
      (`about_self`), never a user's line for being in the first person,
with the biases from settings and the draw from an injected numpy Generator.
Broadening (the entropy guard) flattens the bias and excludes the stuck topic. Imported
strangers' memories (`imported_stranger`) are drawn only within their share of the DMN's
chances to think (src/dmn/imported_share.py); outside it the draw leaves them out (`only`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from src.dmn.prompts import SOMEONE_ELSES
from src.dmn.settings import SamplingBias
from src.recall.speakers import Speaker, first_person, speaker_of

#: Memories that are the mind's by what they are: its values and goals (metadata kind).
SELF_KINDS = frozenset({"value", "goal"})


@dataclass(frozen=True)
class PoolFeatures:
    """One row per pooled memory, every feature in [0, 1] (bool for flags)."""

    center: np.ndarray            # depth-weight center
    hours_unseen: np.ndarray      # hours since last access (or creation)
    age_days: np.ndarray          # days since the event (or creation)
    tension: np.ndarray           # bool
    about_self: np.ndarray        # bool


def about_self(source_tag: str | None, speaker: str | None, memory_type: str, kind: str | None,
               content: str) -> bool:
    """Whether a memory is about the self (plan §4.7's introspection bias): a value or goal the
    mind holds, or the mind's own words (said, thought, concluded or corrected: its source tag
    or `metadata.speaker`, src/recall/speakers.py) that are a self-reflection or speak in the
    first person outside what they quote. The user's "I have a cat" is about the user, and an
    imported speaker's "I …" about that speaker: neither is the mind's."""
    if kind in SELF_KINDS:
        return True
    who = speaker_of(source_tag, {"speaker": speaker} if speaker else None)
    return who is not None and who.mind and (memory_type == "reflection" or first_person(content))


def imported_stranger(speaker: Speaker | None, imported: bool, kind: str | None, content: str) -> bool:
    """Whether a memory is an imported stranger's words: said by a person other than the user and
    the mind (only an imported conversation names one: src/memory/importer.py, and a merge of one
    speaker's words keeps the name), or imported without a speaker, so nothing says it is the
    user's or the mind's. A value or goal is the mind's, however it came in.

    A DMN thought about a stranger's line, once kept, is the mind's by its tag; it counts as the
    stranger's (its text says whose it was: `SOMEONE_ELSES`), or it would seed thoughts about
    the same stranger outside their share."""
    if kind in SELF_KINDS:
        return False
    if speaker is None:
        return imported
    return speaker.kind == "person" or (speaker.mind and SOMEONE_ELSES in content)


def bias_weights(f: PoolFeatures, bias: SamplingBias) -> np.ndarray:
    """Unnormalised sampling weight of each pooled memory."""
    neglected = 1.0 - np.exp(-np.asarray(f.hours_unseen, float) / bias.neglect_tau_hours)
    distant = np.clip(np.asarray(f.age_days, float) / bias.distant_days, 0.0, 1.0)
    center = np.clip(np.asarray(f.center, float), 0.0, 1.0)
    return (bias.base + bias.neglect * center * neglected
            + bias.tension * np.asarray(f.tension, float)
            + bias.distant * distant
            + bias.self_ref * center * np.asarray(f.about_self, float))


def draw(weights: np.ndarray, k: int, rng: np.random.Generator, *,
         exclude: np.ndarray | None = None, broadened: bool = False,
         only: np.ndarray | None = None) -> np.ndarray:
    """Indices of k pooled memories drawn without replacement.

    `broadened`: the bias is dropped (uniform draw); `exclude` (bool mask) removes
    the stuck topic. If the exclusion would leave nothing, it is ignored. `only` (bool
    mask) is what may be drawn at all (the imported share): never ignored, so it can
    leave nothing to draw.
    """
    w = np.ones(len(weights)) if broadened else np.asarray(weights, float).copy()
    if only is not None:
        w[~np.asarray(only, bool)] = 0.0
    if exclude is not None:
        drawable = w > 0
        exclude = np.asarray(exclude, bool) & drawable
        if exclude.any() and exclude.sum() < drawable.sum():
            w[exclude] = 0.0
    nonzero = int((w > 0).sum())
    if nonzero == 0:
        return np.zeros(0, dtype=int)
    k = min(k, nonzero)
    return rng.choice(len(w), size=k, replace=False, p=w / w.sum())
