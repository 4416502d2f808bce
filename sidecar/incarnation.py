"""Which engine process answered: a counter bumped on evidence that a new process took over.

The controller holds a restarted replica (spec "Drain read refusals": the gauges of a fresh
process cannot speak for the work it set out to account for), so it needs to see a restart
between its two idle reads. Evidence, any of which bumps the counter once:

- `process_start_time_seconds` changed (vLLM with one API server serves it);
- the listener went away (connection refused) after answering, and then answered again;
- a cumulative counter went backwards (a fresh process starts its counters at zero).

Pure: it is fed one observation per read, in read order, and never looks at a clock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Evidence(enum.Enum):
    START_TIME_CHANGED = "start_time_changed"
    LISTENER_RETURNED = "listener_returned"
    COUNTER_WENT_BACKWARDS = "counter_went_backwards"


@dataclass(frozen=True)
class Observation:
    """What one read says about the process behind the listener."""

    answered: bool  # the listener accepted the connection (any outcome but refused)
    process_start_time: float | None = None
    # Cumulative counters (name -> summed value) when the read carries them; None when not.
    counters: dict[str, float] | None = None


@dataclass(frozen=True)
class Incarnation:
    value: int  # 0: the first engine process this sidecar saw answer
    evidence: Evidence | None  # what made the latest bump; None before any
    changed_at_seq: int | None  # the read that saw it


@dataclass
class IncarnationTracker:
    """Folds observations into the incarnation counter."""

    _value: int = 0
    _evidence: Evidence | None = None
    _changed_at_seq: int | None = None
    _seen: bool = False  # some read has been answered
    _away: bool = False  # refused since the last answer
    _start_time: float | None = None
    _counters: dict[str, float] = field(default_factory=dict)

    @property
    def current(self) -> Incarnation:
        return Incarnation(self._value, self._evidence, self._changed_at_seq)

    def observe(self, seq: int, obs: Observation) -> Incarnation:
        if not obs.answered:
            if self._seen:
                self._away = True
            return self.current
        evidence = self._evidence_of(obs)
        if evidence is not None:
            self._value += 1
            self._evidence = evidence
            self._changed_at_seq = seq
            # A new process: what the old one said no longer bounds what the new one may say.
            self._counters = {}
        self._seen = True
        self._away = False
        if obs.process_start_time is not None:
            self._start_time = obs.process_start_time
        if obs.counters:
            self._counters.update(obs.counters)
        return self.current

    def _evidence_of(self, obs: Observation) -> Evidence | None:
        if not self._seen:
            return None
        if (obs.process_start_time is not None and self._start_time is not None
                and obs.process_start_time != self._start_time):
            return Evidence.START_TIME_CHANGED
        if self._away:
            return Evidence.LISTENER_RETURNED
        for name, value in (obs.counters or {}).items():
            if name in self._counters and value < self._counters[name]:
                return Evidence.COUNTER_WENT_BACKWARDS
        return None
