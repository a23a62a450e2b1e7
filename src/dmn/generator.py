"""The DMN generator task (plan §4.7): samples memories when the mind is idle and queues
what it finds for the one cognitive loop — never a second pipeline.

Each tick:
    1. suppression: nothing during conversation; an idle mind produces more (§4.7);
       nothing while `max_pending` DMN items already wait for attention, nor while the
       background budget is spent (src/providers/budget.py: its cycle would spend)
    2. a uniform pre-sample of the store (the pool), then a biased draw from it
       (neglected important, in tension, distant, the mind's own about itself); broadened by the
       entropy guard when one topic keeps surfacing. Imported strangers' memories are drawn only
       within their share of the DMN's chances to think (src/dmn/imported_share.py); a pool of
       nothing else leaves the chance quiet
    3. channels: goal link → self-prompt (else a spontaneous one), creative pairs →
       dmn_items for the deep pass, value link → identity signal; every few ticks a
       metacognitive review of the last attention choice instead
    4. the self-prompt goes to `loop.submit("dmn", …)`: entry gate, then attention at
       DMN urgency; the loop recalls with 2-hop spreading for DMN input

Ticks are paced (src/dmn/pacing.py): while nothing new arrives they come ever further apart.

Every item ends somewhere (sql/131): the queued one is consumed by the loop once submitted;
creative associations and identity signals wait for the next deep pass, which asks about
them (src/consolidation/deep/dmn_inputs.py); each tick first marks expired what nothing
consumed within `item_ttl_days` (at most `expire_batch` rows a tick).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from src.db.availability import AwayNotice, tick_until_stopped
from src.dmn import channels as ch
from src.dmn import repository as repo
from src.dmn.entropy_guard import EntropyGuard
from src.dmn.imported_share import ImportedShare
from src.dmn.pacing import Pacing
from src.dmn.sampling import PoolFeatures, about_self, bias_weights, draw, imported_stranger
from src.dmn.settings import DmnSettings
from src.dmn.suppression import activity
from src.providers.budget import BackgroundBudget
from src.recall.speakers import Speaker, speaker_of
from src.vectors import unit_rows
from src.weights.safety import Safety, SafetyEvent, insert_safety_events

log = logging.getLogger(__name__)

Layer = Sequence[tuple[str, np.ndarray]]
Submit = Callable[..., Awaitable[object]]


@dataclass
class TickReport:
    produced: bool
    reason: str
    outputs: list[ch.DmnOutput] = field(default_factory=list)
    sampled: list[int] = field(default_factory=list)
    queued_item_id: int | None = None


@dataclass(frozen=True)
class DmnQueue:
    """The one cognitive loop as the DMN feeds it: its `submit` and its count of queued DMN items."""

    submit: Submit
    pending: Callable[[], int]


@dataclass(frozen=True)
class DmnLimits:
    """What may hold the DMN back: the background budget and the safety circuit breaker (None: none)."""

    budget: BackgroundBudget | None = None
    safety: Safety | None = None


def row_speaker(row: Mapping[str, Any]) -> Speaker | None:
    """Who said a pool row (src/recall/speakers.py): its `metadata.speaker`, else its source tag's."""
    return speaker_of(row["source_tag"], {"speaker": row["speaker"]} if row["speaker"] else None)


def pool_strangers(rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Which pool rows are imported strangers' memories (src/dmn/sampling.imported_stranger)."""
    return np.array([imported_stranger(row_speaker(r), bool(r["imported"]), r["kind"], r["content"])
                     for r in rows], bool)


def pool_features(rows: Sequence[Mapping[str, Any]]) -> PoolFeatures:
    """The sampling features of the pool rows (src/dmn/repository.py `pool_rows`)."""
    return PoolFeatures(
        center=np.array([r["center"] for r in rows], float),
        hours_unseen=np.array([max(0.0, float(r["hours_unseen"])) for r in rows]),
        age_days=np.array([max(0.0, float(r["age_days"])) for r in rows]),
        tension=np.array([r["tension"] for r in rows], bool),
        about_self=np.array([about_self(r["source_tag"], r["speaker"], r["memory_type"], r["kind"], r["content"])
                             for r in rows], bool))


class DmnGenerator:
    """One per mind. `queue` is the loop's way in and its count of queued DMN items."""

    def __init__(self, pool, *, embed_model: str, queue: DmnQueue,
                 rng: np.random.Generator, settings: DmnSettings | None = None,
                 layers: Callable[[], Awaitable[tuple[Layer, Layer]]] | None = None,
                 on_creative: Callable[[int, ch.DmnOutput, datetime], Awaitable[None]] | None = None,
                 limits: DmnLimits | None = None):
        limits = limits or DmnLimits()
        self.pool = pool
        self.embed_model = embed_model
        self.submit = queue.submit
        self.pending = queue.pending
        self.rng = rng
        self.settings = settings or DmnSettings()
        self.layers = layers
        self.on_creative = on_creative
        self.guard = EntropyGuard(self.settings.entropy)
        self.budget = limits.budget                # issue 24: a spent budget stops production
        self.safety = limits.safety                # Phase C: the DMN's surfacing loops feed the breaker
        self.pacing = Pacing.of(self.settings)     # issue 24: slower while nothing new arrives
        # issue 38: imported strangers seed at most their share of the chances to think
        self.share = ImportedShare(self.settings.imported_share, self.settings.imported_window)
        self.ticks = 0
        self.produced = 0
        self.items_queued = 0
        self.expired = 0
        self._reviewed_upto = 0
        self._last_user: datetime | None = None
        self._events: list[SafetyEvent] = []

    async def run(self, stop: asyncio.Event, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        """Wake every `interval_s` until `stop`; tick when the pacing says so (src/dmn/pacing.py:
        slower while nothing new arrives); a failing tick is logged, the task goes on.

        The first tick comes one interval after start: a mind that just woke up attends to
        what arrives (piped input, a person typing) before it starts to wander."""
        await tick_until_stopped(lambda: self.pacing.step(self.pool, clock(), self.tick),
                                 every_s=self.settings.interval_s, notice=AwayNotice(log, "DMN"), stop=stop)

    async def tick(self, now: datetime) -> TickReport:
        """One DMN step at `now` (see the module docstring)."""
        cfg = self.settings
        self.ticks += 1
        self.expired += await repo.expire_items(self.pool, now, cfg.item_ttl_days, cfg.expire_batch)
        since = self._last_user or now - timedelta(days=3650)
        self._last_user = await repo.last_user_at(self.pool, since) or self._last_user
        p = activity(now, self._last_user, quiet_after_user_s=cfg.quiet_after_user_s, idle_tau_s=cfg.idle_tau_s)
        if self.pending() >= cfg.max_pending:
            return TickReport(False, f"{self.pending()} DMN items already wait for attention")
        if p <= 0.0 or self.rng.random() >= p:
            return TickReport(False, f"suppressed (activity {p:.2f}: recent conversation)")
        if self.budget is not None and not self.budget.allows("dmn", now):   # its cycle would spend
            return TickReport(False, f"background budget spent ({self.budget.left(now).spent_reason('dmn')})")
        self.produced += 1
        if self.produced % cfg.review_every == 0:
            review = await self._review()
            if review is not None:
                self.share.record(False)
                return await self._deliver(now, [review], review, [])
        rows = await repo.pool_rows(self.pool, self.rng, cfg.pool_size, now, self.embed_model)
        if not rows:
            return TickReport(False, "no memories to wander through yet")
        strangers = pool_strangers(rows)
        only = None if self.share.allows() else ~strangers
        if only is not None and not only.any():
            why = f"imported strangers' share of idle thought taken ({self.share.describe()})"
            self.share.record(False)
            return TickReport(False, f"{why}; nothing of the user's or my own in the pool")
        samples = self._draw(rows, strangers, only)
        if not samples:
            self.share.record(False)
            if self._events:
                events, self._events = self._events, []
                await insert_safety_events(self.pool, events)
            return TickReport(False, "every sampled memory's pattern is paused by the circuit breaker")
        goals, values = await self.layers() if self.layers is not None else ((), ())
        chars = cfg.text_chars
        outputs = ch.goal_prompts(samples, goals, cfg.goal_link, chars)
        prompt = outputs[0] if outputs else ch.spontaneous_prompt(samples[0], now, chars)
        if not outputs:
            outputs.append(prompt)
        self.share.record(prompt.detail["imported_stranger"])
        outputs += ch.creative_pairs(samples, cfg.creative_low, cfg.creative_high, cfg.creative_min_days, chars)
        outputs += ch.identity_signals(samples, values, cfg.identity_link, chars)
        return await self._deliver(now, outputs, prompt, samples)

    def _draw(self, rows, strangers: np.ndarray, only: np.ndarray | None) -> list[ch.Sampled]:
        """The tick's samples: a biased draw from the pool, of the rows in `only` (None: any)."""
        cfg = self.settings
        vecs = np.stack([r["embedding"].to_numpy().astype(np.float64) for r in rows])
        units = unit_rows(vecs)
        weights = bias_weights(pool_features(rows), cfg.bias)
        broadened = self.guard.broadened or (self.safety is not None and self.safety.sampling_broadened)
        picked = draw(weights, cfg.samples_per_tick, self.rng, exclude=self.guard.exclusion(units),
                      broadened=broadened, only=only)
        samples = [ch.Sampled(rows[i]["id"], rows[i]["content"], units[i], rows[i]["at"], float(rows[i]["center"]),
                              row_speaker(rows[i]), bool(strangers[i]))
                   for i in picked]
        samples = self._unpaused(samples)
        self.guard.observe([s.unit for s in samples])
        return samples

    def _unpaused(self, samples: list[ch.Sampled]) -> list[ch.Sampled]:
        """Phase C's breaker (src/weights/patterns.py) on the pattern ("dmn", memory): a memory the
        DMN surfaces tick after tick in the same company brings no new evidence; once its
        pattern trips (enforced), it is left out. The breaker's events are kept for `_deliver`."""
        if self.safety is None:
            return samples
        kept = []
        for s in samples:
            others = frozenset(o.id for o in samples if o.id != s.id)
            allowed, _ = self.safety.check_pattern("dmn", s.id, others, events=self._events)
            if allowed:
                kept.append(s)
        return kept

    async def _review(self) -> ch.DmnOutput | None:
        row = await repo.last_choice(self.pool, self._reviewed_upto)
        if row is None:
            return None
        self._reviewed_upto = row["id"]
        return ch.review_prompt(row["attention_focus"] or "", json.loads(row["candidates"]), self.settings.text_chars)

    async def _deliver(self, now: datetime, outputs: list[ch.DmnOutput], prompt: ch.DmnOutput,
                       samples: Sequence[ch.Sampled]) -> TickReport:
        report = TickReport(True, "produced", outputs, [s.id for s in samples])
        if self._events:
            events, self._events = self._events, []
            await insert_safety_events(self.pool, events)
        for out in outputs:
            queued = out is prompt
            item_id = await repo.record_item(self.pool, at=now, channel=out.channel, memory_ids=out.memory_ids,
                                             text=out.text, detail=out.detail, queued=queued)
            if queued:
                report.queued_item_id = item_id
                if await self.submit("dmn", out.text, now=now) is not None:
                    self.items_queued += 1
                    await repo.mark_queued(self.pool, item_id, now)
            if out.channel == "creative" and self.on_creative is not None:
                await self.on_creative(item_id, out, now)
        return report
