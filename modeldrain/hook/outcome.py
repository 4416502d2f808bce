"""What one read of the engine's /metrics means: an outcome class and the value of the read.

Three outcomes end the drain at once because there is nothing to measure (spec: "A listener
that refuses the read, answers an HTTP error or fails the TLS handshake ends the hook at
once"). Every other failure counts as busy: waiting costs accelerator time up to the
deadline, ending early cuts requests.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TypedDict

from modeldrain.hook.gauges import EngineKind, Role

__all__ = ["LabelSet", "LabelledSeries", "Read", "ReadFields", "ReadOutcome", "read_fields"]

# One series' labels, sorted: how a series is told from its siblings between two reads.
LabelSet = tuple[tuple[str, str], ...]
# A counter's series as (labels, value) pairs, in body order.
LabelledSeries = tuple[tuple[LabelSet, float], ...]


class ReadOutcome(enum.Enum):
    IDLE = "idle"  # the whole gauge set, every gauge sums to zero
    BUSY = "busy"  # the whole gauge set, work in flight
    INCOMPLETE = "incomplete"  # a gauge of the set is missing, or the engine is unknown
    STALE = "stale"  # complete and zero, but the scheduler has not republished since the previous read
    TIMEOUT = "timeout"  # the read did not finish within its time
    RESET = "reset"  # the listener accepted, then closed without a whole response
    UNPARSEABLE = "unparseable"  # not an exposition (or not HTTP) we can parse
    INVALID_VALUE = "invalid_value"  # a work gauge is negative, NaN or infinite
    TOO_LARGE = "too_large"  # the body is over the size cap
    UNAVAILABLE = "unavailable"  # a leader's drain-sidecar answered but could not say (an HTTP error status, a token)
    CONNECT_ERROR = "connect_error"  # a local failure to connect (ports, descriptors, memory): not "nothing listens"
    READER_ERROR = "reader_error"  # something the reader did not foresee: logged, and never taken for idle
    REFUSED = "refused"  # nothing listens: connection refused
    HTTP_ERROR = "http_error"  # any status >= 300, redirects included (never followed)
    TLS_ERROR = "tls_error"  # the TLS handshake failed

    @property
    def ends_drain(self) -> bool:
        """Nothing to measure: the hook ends at once (the replica reads 'unmeasurable')."""
        return self in _UNMEASURABLE

    @property
    def is_idle(self) -> bool:
        return self is ReadOutcome.IDLE

    @property
    def verdict(self) -> str:
        """The three-way answer people and the controller act on."""
        if self is ReadOutcome.IDLE:
            return "idle"
        if self in _UNMEASURABLE:
            return "unmeasurable"
        return "busy"


_UNMEASURABLE = frozenset({ReadOutcome.REFUSED, ReadOutcome.HTTP_ERROR, ReadOutcome.TLS_ERROR})


@dataclass(frozen=True)
class Read:
    """One read of the engine, whatever happened. Times are monotonic seconds."""

    outcome: ReadOutcome
    started_at: float
    duration_s: float
    detail: str = ""
    # Summed value per work gauge (keyed by the gauge's canonical name), for present gauges.
    gauges: dict[str, float] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    # Sum of the present gauges when their values are valid; None when nothing was measured.
    in_flight: float | None = None
    kind: EngineKind | None = None
    role: Role | None = None
    process_start_time: float | None = None
    # Counters that only grow within one engine process (gauges.RESTART_COUNTERS), summed.
    restart_counters: dict[str, float] = field(default_factory=dict)
    # The scheduler heartbeat counter's series (gauges.SCHEDULER_HEARTBEATS) with their labels, in
    # body order; None when the body carries none (or was not read).
    heartbeat: LabelledSeries | None = None
    http_status: int | None = None
    body_bytes: int = 0
    # A worker's read of its leader made from a well-formed /v1/work answer (hook.leader): the
    # leader has answered, so a later refusal means it is gone, not that it was never there.
    leader_answered: bool = False
    # A read whose count includes GET /load's from vLLM's only API server, which counts every
    # request from its arrival: idle, its confirming read may come sooner; busy from /load alone,
    # the next read too (hook.decision).
    counted_from_arrival: bool = False

    @property
    def complete(self) -> bool:
        return self.outcome in (ReadOutcome.IDLE, ReadOutcome.BUSY)


class ReadFields(TypedDict):
    """A read as JSON: the one rendering `prestop check`, the drain's log and the sidecar share."""

    outcome: str
    verdict: str
    complete: bool
    idle: bool
    in_flight: float | None
    gauges: dict[str, float]
    missing: list[str]
    engine: str | None
    role: str | None
    detail: str
    http_status: int | None
    body_bytes: int
    duration_ms: float


def read_fields(read: Read) -> ReadFields:
    return {
        "outcome": read.outcome.value,
        "verdict": read.outcome.verdict,
        "complete": read.complete,
        "idle": read.outcome.is_idle,
        "in_flight": read.in_flight,
        "gauges": dict(read.gauges),
        "missing": list(read.missing),
        "engine": read.kind.value if read.kind else None,
        "role": read.role.value if read.role else None,
        "detail": read.detail,
        "http_status": read.http_status,
        "body_bytes": read.body_bytes,
        "duration_ms": round(read.duration_s * 1000, 3),
    }
