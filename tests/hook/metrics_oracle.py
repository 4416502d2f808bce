"""The oracle for the reader: prometheus-client's own parse of the whole body, then the samples named
as the gauges are, measured with the same gauge set. None when prometheus-client (or UTF-8)
rejects the body."""

from __future__ import annotations

import math
from dataclasses import dataclass

from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from modeldrain.hook.exposition import CANONICAL, OPENMETRICS_CONTENT_TYPE
from modeldrain.hook.gauges import EngineKind, Role, gauge_set, gauge_sets_of


def as_float(value) -> float:
    try:
        return float(value)
    except OverflowError:  # a 310..4300-digit integer: the parser gives a Python int
        return math.inf if value > 0 else -math.inf


def oracle_series(body: bytes, content_type: str) -> dict[str, tuple[float, ...]] | None:
    try:
        text = body.decode("utf-8")
        openmetrics = content_type.split(";", 1)[0].strip().lower() == OPENMETRICS_CONTENT_TYPE
        families = list((parse_openmetrics if openmetrics else parse_text)(text))
    except Exception:  # noqa: BLE001 - the oracle's answer to any failure: rejected
        return None
    series: dict[str, list[float]] = {}
    for family in families:
        for sample in family.samples:
            name = CANONICAL.get(sample.name)
            if name is not None:
                series.setdefault(name, []).append(as_float(sample.value))
    return {k: tuple(v) for k, v in series.items()}


@dataclass(frozen=True)
class Verdict:
    status: str  # idle, busy, incomplete, invalid
    in_flight: float | None


def oracle_verdict(series: dict[str, tuple[float, ...]], kind: EngineKind, role: Role) -> Verdict:
    """The role's gauges must all be present; every other gauge of the engine counts when present."""
    total = 0.0
    required = {g.name for g in gauge_set(kind, role).required}
    seen = set()
    status = None
    for gauges in [gauge_set(kind, role), *gauge_sets_of(kind)]:
        for gauge in gauges.gauges:
            if gauge.name in seen:
                continue
            seen.add(gauge.name)
            values = [v for n in gauge.names for v in series.get(n, ())]
            if not values:
                if gauge.name in required:
                    status = status or "incomplete"
                continue
            if any(not math.isfinite(v) or v < 0 for v in values):
                return Verdict("invalid", None)
            total += sum(values)
    if status:
        return Verdict(status, total)
    return Verdict("idle" if total == 0 else "busy", total)
