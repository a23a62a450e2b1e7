"""Settings of the DMN generator (plan §4.7): the `dmn:` section of runtime.yaml. Pure."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SamplingBias(BaseModel):
    """weight_i = base + neglect·center·neglected + tension·in_tension + distant·age
    + self_ref·center·about_self  (each feature in [0, 1])."""

    model_config = ConfigDict(extra="forbid")

    base: float = Field(1.0, gt=0)        # every memory can be drawn
    neglect: float = Field(4.0, ge=0)     # high weight + low recent access
    tension: float = Field(2.0, ge=0)     # in tension with what the mind holds
    distant: float = Field(1.0, ge=0)     # temporally distant (creative association)
    self_ref: float = Field(2.0, ge=0)    # high weight and about the self (introspection)
    neglect_tau_hours: float = Field(24.0, gt=0)   # neglected = 1 − exp(−hours unseen / tau)
    distant_days: float = Field(30.0, gt=0)        # distant = min(1, age / distant_days)


class EntropyGuardSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    window: int = Field(12, ge=4)                   # recent surfaced memories considered
    topic_similarity: float = Field(0.8, gt=0, le=1)   # same topic at cosine >= this
    max_topic_share: float = Field(0.5, gt=0, le=1)    # one topic above this share: broaden
    broaden_ticks: int = Field(5, ge=1)             # how long sampling stays broadened
    drop_fraction: float = Field(0.25, gt=0, lt=1)  # EntropyMonitor: a drop this large alarms


class DmnSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    interval_s: float = Field(30.0, gt=0)          # one tick per interval
    # pacing (src/dmn/pacing.py, issue 24): while nothing new arrives (no user input, no memory
    # but the mind's own idle ones) the interval grows by `rest_factor` per tick up to
    # `rest_max_s`; anything new resets it to `interval_s`
    rest_factor: float = Field(2.0, ge=1)
    # each tick waits this factor longer, up to rest_max_s; news resets it
    rest_max_s: float = Field(960.0, gt=0)
    pool_size: int = Field(400, ge=2)              # memories pre-sampled uniformly per tick
    samples_per_tick: int = Field(3, ge=1)
    bias: SamplingBias = SamplingBias()
    # activity suppression: quiet for `quiet_after_user_s` after the last user message,
    # then the chance of a tick producing anything rises as 1 − exp(−idle / idle_tau_s)
    quiet_after_user_s: float = Field(60.0, ge=0)
    idle_tau_s: float = Field(120.0, gt=0)
    max_pending: int = Field(2, ge=1)              # DMN items waiting in attention, at most
    # channels (cosines; the embed model decides the scale)
    goal_link: float = Field(0.5, ge=-1, le=1)     # memory + goal → self-prompt
    identity_link: float = Field(0.5, ge=-1, le=1)  # memory + value → identity signal
    creative_low: float = Field(0.2, ge=-1, le=1)  # disparate but connected: cosine in
    creative_high: float = Field(0.8, ge=-1, le=1)  # [low, high) ...
    creative_min_days: float = Field(7.0, ge=0)    # ... between memories this far apart in time
    review_every: int = Field(3, ge=1)             # a metacognitive review every N producing ticks
    # imported strangers (src/dmn/imported_share.py): a store of other people's imported chats
    # drew every idle thought to them, spending the idle budget on people the mind never met
    # while the user's words and its own waited. Their memories seed at most this share of the
    # DMN's chances to think over the last `imported_window` chances; the rest go to the user's
    # and the mind's own memories, or stay quiet (1: no limit; 0: never)
    imported_share: float = Field(0.25, ge=0, le=1)
    # chances to think over which `imported_share` holds
    imported_window: int = Field(20, ge=2)
    text_chars: int = Field(160, ge=20)            # memory excerpt in a self-prompt
    # every item ends somewhere: one nothing consumed within this many days is marked expired
    # by the tick, at most `expire_batch` a tick (channels 2 and 3 wait for a deep pass)
    item_ttl_days: float = Field(7.0, gt=0)
    # what nothing consumed in item_ttl_days is marked expired, this many a tick
    expire_batch: int = Field(500, ge=1)
    entropy: EntropyGuardSettings = EntropyGuardSettings()
