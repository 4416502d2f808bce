"""The one reader: a read of the engine's /metrics becomes a `Read` value, never an exception.

The hook calls it once a second; the sidecar calls it for the controller. Both get the same
classification of the same gauges.
"""

from __future__ import annotations

import time

from hook import exposition
from hook.engine import EngineHint
from hook.fetch import FetchError, fetch
from hook.gauges import Role, gauge_set
from hook.outcome import Read, ReadOutcome
from hook.target import Target


def read_work(target: Target, hint: EngineHint, timeout_s: float, max_body_bytes: int) -> Read:
    """Read the engine once, bounded by timeout_s, and classify what came back."""
    started_at = time.monotonic()

    def done(outcome: ReadOutcome, detail: str, **fields) -> Read:
        return Read(outcome, started_at, time.monotonic() - started_at, detail, **fields)

    try:
        response = fetch(target, timeout_s, max_body_bytes)
    except FetchError as exc:
        return done(exc.outcome, exc.detail, http_status=exc.status, kind=hint.kind, role=hint.role)
    size = len(response.body)
    try:
        parsed = exposition.parse(response.body, response.content_type)
    except exposition.ExpositionError as exc:
        return done(ReadOutcome.UNPARSEABLE, str(exc), http_status=response.status, body_bytes=size,
                    kind=hint.kind, role=hint.role)

    kind = hint.kind or parsed.kind
    role = hint.role or parsed.sglang_role or Role.NULL
    common = dict(http_status=response.status, body_bytes=size, kind=kind,
                  process_start_time=parsed.process_start_time, restart_counters=parsed.restart_counters)
    if kind is None:
        return done(ReadOutcome.INCOMPLETE, "no vllm: or sglang: metrics: engine unknown", **common)
    envelope = gauge_set(kind, role)
    measured = exposition.measure(parsed, envelope)
    common.update(role=envelope.role, gauges=measured.gauges, missing=measured.missing)
    if measured.invalid:
        return done(ReadOutcome.INVALID_VALUE,
                    "negative, NaN or infinite value in " + ", ".join(measured.invalid), **common)
    in_flight = measured.in_flight
    if measured.missing:
        return done(ReadOutcome.INCOMPLETE, "missing " + ", ".join(measured.missing),
                    in_flight=in_flight, **common)
    if in_flight == 0:
        return done(ReadOutcome.IDLE, "every work gauge reads zero", in_flight=in_flight, **common)
    return done(ReadOutcome.BUSY, f"{in_flight:g} in flight", in_flight=in_flight, **common)
