"""The DMN entropy guard (plan §4.7, §3.9): if the DMN keeps surfacing one topic, broaden.

Surfaced memories are grouped into topics (a memory joins the topic of an earlier one
within `topic_similarity` cosine). The Shannon entropy of the recent topic counts feeds the
safety layer's `EntropyMonitor` (a drop against the rolling baseline alarms); a single
topic holding more than `max_topic_share` of the window alarms too, since a DMN that is
stuck from the start never shows a drop. While the guard is up, sampling ignores the bias
and excludes memories of the stuck topic, for `broaden_ticks` ticks.
"""

from __future__ import annotations

import logging
from collections import Counter, deque

import numpy as np

from src.dmn.settings import EntropyGuardSettings as GuardSettings
from src.vectors import has_direction, unit
from src.weights.safety_rules import EntropyMonitor, shannon_entropy

log = logging.getLogger(__name__)


class EntropyGuard:
    def __init__(self, settings: GuardSettings | None = None):
        self.settings = settings or GuardSettings()
        self.monitor = EntropyMonitor(window=50, drop_fraction=self.settings.drop_fraction, min_samples=5)
        self._recent: deque[tuple[int, np.ndarray]] = deque(maxlen=self.settings.window)   # (topic, unit vec)
        self._topics: list[np.ndarray] = []     # topic seed vectors
        self.broaden_left = 0
        self.stuck_topic: np.ndarray | None = None
        self.alarms = 0

    @property
    def broadened(self) -> bool:
        return self.broaden_left > 0

    def _topic_of(self, vec: np.ndarray) -> int:
        for i, seed in enumerate(self._topics):
            if float(seed @ vec) >= self.settings.topic_similarity:
                return i
        self._topics.append(vec)
        return len(self._topics) - 1

    def observe(self, vectors: list[np.ndarray]) -> str | None:
        """Record one tick's surfaced memories; returns the alarm reason when it broadens."""
        if self.broaden_left:
            self.broaden_left -= 1
        for v in vectors:
            if has_direction(v):
                u = unit(v)
                self._recent.append((self._topic_of(u), u))
        if len(self._recent) < self.settings.window // 2:
            return None
        counts = Counter(t for t, _ in self._recent)
        entropy = shannon_entropy(counts.values())
        dropped = not self.monitor.observe(entropy).passed
        topic, top = counts.most_common(1)[0]
        share = top / len(self._recent)
        if not (dropped or share > self.settings.max_topic_share):
            return None
        self.alarms += 1
        self.broaden_left = self.settings.broaden_ticks
        self.stuck_topic = self._topics[topic]
        self._recent.clear()     # a fresh window judges the broadened sampling
        why = (f"DMN topic entropy {entropy:.2f} bits; one topic holds {share:.0%} of the last "
               f"{sum(counts.values())} surfaced memories: broadening sampling for "
               f"{self.settings.broaden_ticks} ticks")
        log.info(why)
        return why

    def exclusion(self, unit_vecs: np.ndarray) -> np.ndarray | None:
        """Bool mask of pooled memories on the stuck topic (None when not broadened)."""
        if not self.broadened or self.stuck_topic is None or not len(unit_vecs):
            return None
        return (unit_vecs @ self.stuck_topic) >= self.settings.topic_similarity
