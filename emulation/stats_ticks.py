"""When SGLang's scheduler republishes: its gauges and its heartbeat counter, from its own loop.

The real scheduler publishes its work gauges and adds to `scheduler_process_cpu_seconds_total`
between forward passes, the counter at most once a second (SGLang 0.5.23,
scheduler_components/metrics_reporter.py); a long pass holds both (measured: 16 long prompts
read 0 for 2.33 s while out, the counter still: docs/engines.md). The emulator's scheduler has no
passes, so by default it publishes live gauges and a counter that moves once a second; the
`stale` misbehaviour makes it run passes of `interval_s` each from when it is set, publishing
(gauges and counter together) only as each pass ends, so a read in between sees the last pass's
values: the stale zero, at a size a test chooses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from emulation import constants
from emulation.misbehaviour import Misbehaviour, MisbehaviourSetting
from emulation.scheduler import RankSnapshot


@dataclass(frozen=True)
class Published:
    ranks: tuple[RankSnapshot, ...]
    heartbeat_s: float  # the counter's value: what the scheduler has added so far


class StatsTicks:
    """One scheduler's publishing, read at render time (pure but for what it holds)."""

    def __init__(self, started_at: float):
        self._started_at = started_at
        self._stale_since: float | None = None  # when the current `stale` setting began
        self._held: Published | None = None
        self._held_pass = -1

    def view(self, live: tuple[RankSnapshot, ...], setting: MisbehaviourSetting, now: float) -> Published:
        """What a scrape at `now` reads, given the scheduler's live state."""
        if setting.mode is not Misbehaviour.STALE:
            self._stale_since, self._held, self._held_pass = None, None, -1
            return Published(live, self._ticks(now))
        if self._stale_since is None:
            self._stale_since = now
        pass_s = max(setting.interval_s, constants.STALE_PASS_MIN_S)
        current_pass = math.floor((now - self._stale_since) / pass_s)
        if self._held is None or current_pass > self._held_pass:
            # A pass ended since the last scrape: it published what is there now.
            self._held = Published(live, self._ticks(self._stale_since + current_pass * pass_s))
            self._held_pass = current_pass
        return self._held

    def _ticks(self, at: float) -> float:
        """The counter at `at`: one step per elapsed second, as the real loop records at most once a second."""
        return float(math.floor(max(0.0, at - self._started_at) / constants.SCHEDULER_HEARTBEAT_INTERVAL_S))
