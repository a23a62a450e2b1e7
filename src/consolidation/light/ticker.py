"""Light consolidation (plan §4.1): constant, cheap, rate-limited background metabolism.

One ticker task wakes every `light.tick_s` and runs whichever operations are due;
each has its own minimum interval, so none can thrash:

- decay: memories unused (not retrieved; never-retrieved ones count from creation;
  one a newer statement updated, from the update at the latest: sql/153, issue 37 item 5)
  for `unused_after_days` get contradict(0.01) through the weight choke point, at most
  once per `decay_period_hours` each and at most `decay_batch` per tick (one set-based
  call: one SELECT, one UPDATE, one summary audit row per tick, not one per memory —
  each memory's last nudge is in memory_decay_marks; notes.md says why these defaults);
- co-access upkeep: idle pairs halve their count once per idle period; pairs below
  the threshold are deleted (one statement), so the table does not only grow;
- contradiction scan: a random sample of recently used memories, each against its
  nearest neighbour; contradiction layers 1–2, layer 3 (an isolated LLM call) only
  when a model is configured and only for a few undecided pairs (`contradiction_llm_pairs` a
  scan, `contradiction_llm_per_hour` in any hour: its share of the background budget);
  findings recorded, consumed by the next deep pass's reconsolidation phase;
- pattern detection: the newest memories embedded with CLUSTERING and clustered at
  the model's `theme` threshold; emerging themes recorded for the deep pass;
- near misses: the retrievals' queued near-miss suppression (plan §3.8) applied through
  the weight choke point, summed per memory (src/recall/mutation.py `apply_near_misses`);
- monitors: Phase C (circuit breaker, entropy, coherence) once per consolidation cycle
  (every tick by default, `monitors_interval_s`, and after every deep pass; they read the
  trigger-kept center summary, not memories); Phase B's rate limit rides on each decay
  change (`cycle_baseline_center`);
- retention: the history tables trimmed to their windows, rolled up per day
  (`retention.py`).

The mind does not notice: priorities shift, the next identity render picks it up.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import asyncpg
import numpy as np

from src.consolidation.clustering import fingerprint, leader_clusters, most_central
from src.consolidation.light import decay_marks_repository, findings_repository
from src.consolidation.light.retention import enforce as enforce_retention
from src.consolidation.monitors import run_monitors
from src.consolidation.settings import ConsolidationSettings
from src.db.availability import AwayNotice, tick_until_stopped
from src.errors import ProviderError
from src.gates.contradiction import NegationDirection, load_or_learn, screen
from src.gates.prompts import ContradictionAnswer, contradiction_question
from src.providers.protocols import Embedder, LanguageModel
from src.recall import co_access, kind_counts
from src.recall.mutation import apply_near_misses
from src.text import excerpt
from src.weights.apply import WeightChange, apply_weight_changes
from src.weights.center_summary import fold_summary
from src.weights.safety import Safety

log = logging.getLogger(__name__)

ACTOR = "light_consolidation"
RECENT_POOL = 500
EMBED_BATCH = 100
LABEL_CHARS = 80
# The decay walk reads at most this many decay batches of the idle index per tick
# (most rows it meets were nudged within the period and are skipped).
DECAY_PAGE_FACTOR = 10


class LightTicker:
    """The background ticker. `run(burst=True, max_ticks=n)` makes it testable."""

    def __init__(self, pool: asyncpg.Pool, *, embedder: Embedder, llm: LanguageModel | None, safety: Safety,
                 settings: ConsolidationSettings, rng: random.Random | None = None,
                 clock: Callable[[], datetime] | None = None):
        self.pool = pool
        self.embedder = embedder
        self.llm = llm if llm is not None and getattr(llm, "configured", False) else None
        self.safety = safety
        self.settings = settings
        self.rng = rng or random.Random()
        self.clock = clock or (lambda: datetime.now(UTC))
        self.last_run: dict[str, datetime] = {}
        self.ticks = 0
        self.last_tick_ms = 0.0
        self._away = AwayNotice(log, "light consolidation")
        self._direction: NegationDirection | None = None
        self._decay_walk = decay_marks_repository.DecayWalk()
        self._co_access_page = 0                 # where the next co-access upkeep looks from
        self._llm_calls: deque[datetime] = deque()   # when the scan's LLM calls of the last hour were made
        self._ops = {
            "decay": (self.decay, lambda s: s.decay_interval_s),
            "co_access": (self.co_access, lambda s: s.co_access_interval_s),
            "near_misses": (self.near_misses, lambda s: s.near_miss_interval_s),
            "contradiction": (self.contradiction_scan, lambda s: s.contradiction_interval_s),
            "pattern": (self.pattern_detection, lambda s: s.pattern_interval_s),
            "monitors": (self.monitors, lambda s: s.monitors_interval_s),
            "retention": (self.retention, lambda s: s.retention.interval_s),
        }

    async def run(self, *, stop: asyncio.Event | None = None, max_ticks: int | None = None,
                  burst: bool = False) -> int:
        """Tick until `stop` or `max_ticks`; `burst` ticks back to back without sleeping.

        It sleeps first: start-up is busy enough without a tick."""
        return await tick_until_stopped(self.tick, every_s=self.settings.light.tick_s, notice=self._away,
                                        stop=stop, max_ticks=max_ticks, burst=burst)

    async def tick(self, now: datetime | None = None) -> dict[str, int]:
        """Run every operation whose interval has passed; what each did."""
        started = time.perf_counter()
        now = now or self.clock()
        light = self.settings.light
        did: dict[str, int] = {}
        for name, (op, interval) in self._ops.items():
            last = self.last_run.get(name)
            if last is not None and (now - last).total_seconds() < interval(light):
                continue
            self.last_run[name] = now
            did[name] = await op(now)
        self.ticks += 1
        self.last_tick_ms = (time.perf_counter() - started) * 1000
        if any(did.values()):
            log.debug("light consolidation tick %d: %s (%.0f ms)", self.ticks, did, self.last_tick_ms)
        return did

    async def monitors(self, now: datetime) -> int:
        """Phase C monitors for this consolidation cycle (1 when they ran).

        The kind counts are folded here too (src/recall/kind_counts.py); with the monitors
        off the center summary is still folded: its rows would only grow."""
        await kind_counts.fold(self.pool)
        if not self.settings.light.monitors:
            await fold_summary(self.pool)
            return 0
        await run_monitors(self.pool, self.safety, ACTOR)
        return 1

    async def retention(self, now: datetime) -> int:
        """Trim the history tables to their windows, rolled up per day; rows removed."""
        if not self.settings.light.retention.enabled:
            return 0
        return sum((await enforce_retention(self.pool, self.settings.light.retention, now)).values())

    async def decay(self, now: datetime) -> int:
        """contradict(decay_amount) for unused memories due for their nudge; how many. A memory
        a newer statement updated counts unused since the update (decay_marks_repository.py),
        in the room the walk's batch leaves."""
        light = self.settings.light
        unused_before = now - timedelta(days=light.unused_after_days)
        decayed_before = now - timedelta(hours=light.decay_period_hours)
        async with self.pool.acquire() as conn, conn.transaction():
            ids, self._decay_walk = await decay_marks_repository.decay_candidates(
                conn, unused_before, decayed_before, light.decay_batch, self._decay_walk,
                DECAY_PAGE_FACTOR * light.decay_batch)
            earlier = await decay_marks_repository.superseded_due(conn, unused_before, decayed_before,
                                                                  light.decay_batch - len(ids))
            if not ids and not earlier:
                return 0
            baseline = await decay_marks_repository.centers(conn, ids + earlier)
            reasons = {False: f"decay: not retrieved for {light.unused_after_days:g}+ days",
                       True: f"decay: updated by a newer statement {light.unused_after_days:g}+ days ago"}
            outcomes = await apply_weight_changes(conn, [
                WeightChange(mid, "contradict", light.decay_amount, ACTOR, reasons[superseded],
                             cycle_baseline_center=baseline.get(mid), forgetting="decay",
                             audit="summary")
                for superseded, group in ((False, ids), (True, earlier)) for mid in group],
                safety=self.safety)
            await decay_marks_repository.mark_decayed(conn, ids + earlier, now)
        return sum(1 for o in outcomes if o.applied > 0)

    async def co_access(self, now: datetime) -> int:
        """Halve idle pairs, prune those below the threshold, in the next window of the
        table's pages (a sweep of the whole table takes several ticks); pairs touched."""
        light = self.settings.light
        done = await co_access.co_access_upkeep(
            self.pool, now - timedelta(days=light.co_access_idle_days), light.co_access_prune_below,
            light.co_access_batch, now, start_page=self._co_access_page, pages=light.co_access_pages)
        self._co_access_page = done.next_page
        return done.halved + done.pruned

    async def near_misses(self, now: datetime) -> int:
        """The retrievals' queued near-miss suppression, oldest first; memories suppressed."""
        return await apply_near_misses(self.pool, self.safety, limit=self.settings.light.near_miss_batch)

    async def contradiction_scan(self, now: datetime) -> int:
        """Sample recent pairs, run the contradiction layers; new findings recorded."""
        light = self.settings.light
        model = self.embedder.model_name
        recent = await findings_repository.recently_used(self.pool, now - timedelta(hours=light.contradiction_recent_hours),
                                                model, RECENT_POOL)
        if not recent or light.contradiction_samples == 0:
            return 0
        sample = sorted(self.rng.sample(recent, min(light.contradiction_samples, len(recent))))
        pairs = await findings_repository.nearest_pairs(self.pool, sample, model,
                                               self.settings.thresholds_for(model).contradiction_pair)
        if not pairs:
            return 0
        if self._direction is None:
            self._direction = await load_or_learn(self.pool, self.embedder)
        found, asked = 0, 0
        for p in pairs:
            a_vec, b_vec = p["a_vec"].to_numpy(), p["b_vec"].to_numpy()
            verdict = screen(p["a_content"], a_vec, p["b_content"], b_vec, self._direction)
            contradicts, layer = verdict.contradicts, verdict.layer
            if contradicts is None and self.llm is not None and asked < light.contradiction_llm_pairs \
                    and self._llm_hour_left(now) > 0:
                asked += 1
                self._llm_calls.append(now)
                try:
                    answer = await self.llm.meta_call_structured(
                        contradiction_question(p["a_content"], p["b_content"]), ContradictionAnswer,
                        purpose="consolidation:contradiction_scan", max_tokens=120)
                    contradicts, layer = answer.value.contradicts, "llm"
                except ProviderError as exc:
                    log.info("contradiction scan: LLM layer unavailable, pair stays undecided: %s", exc)
            if contradicts:
                found += await findings_repository.insert_finding(
                    self.pool, "contradiction", fingerprint([p["a_id"], p["b_id"]]), sorted([p["a_id"], p["b_id"]]),
                    {"layer": layer, "similarity": round(float(p["sim"]), 4),
                     "opposition": None if verdict.opposition is None else round(verdict.opposition, 4)})
        return found

    def _llm_hour_left(self, now: datetime) -> int:
        """Calls the scan may still make in the hour before `now` (`contradiction_llm_per_hour`)."""
        while self._llm_calls and (now - self._llm_calls[0]).total_seconds() >= 3600:
            self._llm_calls.popleft()
        return self.settings.light.contradiction_llm_per_hour - len(self._llm_calls)

    async def pattern_detection(self, now: datetime) -> int:
        """Cluster the newest memories (CLUSTERING embeddings); new themes recorded."""
        light = self.settings.light
        model = self.embedder.model_name
        rows = await findings_repository.recent_memories(self.pool, light.pattern_recent, embed_model=model)
        if len(rows) < light.pattern_min_size:
            return 0
        texts = [r["content"] for r in rows]
        try:
            parts = [await self.embedder.embed(texts[i:i + EMBED_BATCH], "CLUSTERING")
                     for i in range(0, len(texts), EMBED_BATCH)]
        except ProviderError as exc:
            log.info("pattern detection skipped this tick: CLUSTERING embeddings unavailable: %s", exc)
            return 0
        vecs = np.vstack(parts)
        th = self.settings.thresholds_for(model).theme
        groups = await asyncio.to_thread(leader_clusters, vecs, th, light.pattern_min_size)
        new = 0
        for group in groups:
            ids = sorted(rows[i]["id"] for i in group)
            central = rows[group[most_central(vecs[group])]]
            label = excerpt(central["content"], LABEL_CHARS)
            new += await findings_repository.insert_finding(self.pool, "theme", fingerprint(ids), ids,
                                                   {"label": label, "size": len(ids), "central_id": central["id"]})
        return new
