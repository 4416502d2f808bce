"""Series into work: what the gauges of gauges.py count in a read's series.

exposition.py turns a body into series (metric name -> values); this module applies a gauge set
to them: which gauges are present, missing, invalid or declared with no series, and how many
requests they hold in flight. It reads only the definitions (gauges.py), never a body.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Protocol

from modeldrain.hook.gauges import SERIES_FILTERED, GaugeSet, WorkGauge, gauge_sets_of

__all__ = ["Measure", "measure", "work_value"]


class Series(Protocol):
    """What a parsed body gives to measure (exposition.Exposition)."""

    @property
    def series(self) -> Mapping[str, tuple[float, ...]]:
        """Metric name -> the values of its series."""

    @property
    def declared_unset(self) -> frozenset[str]:
        """Work gauges declared with no series."""


@dataclass(frozen=True)
class Measure:
    """A gauge set applied to a read's series."""

    gauges: dict[str, float]
    missing: tuple[str, ...]
    invalid: tuple[str, ...]  # gauges with a negative, NaN or infinite series
    overlapping: frozenset[str] = frozenset()  # gauges that count requests the others count too
    unset: tuple[str, ...] = ()  # required gauges declared with no series (Exposition.declared_unset)

    @property
    def in_flight(self) -> float | None:
        """The sum of the gauges, but a gauge that overlaps the others (WorkGauge.overlaps) is a
        floor under that sum, not a term of it. Zero exactly when every gauge reads zero."""
        if self.invalid:
            return None
        own = sum(v for n, v in self.gauges.items() if n not in self.overlapping)
        return max([own, *(v for n, v in self.gauges.items() if n in self.overlapping)])


def measure(parsed: Series, gauges: GaugeSet) -> Measure:
    """Sum every series of every gauge of the set; note what is missing or invalid.

    The set's gauges must all be present; the engine's other work gauges (an SGLang role's queues
    on a server whose role is not known) are summed when present, so that no queue holding work
    is left out by a role read wrong.
    """
    sums: dict[str, float] = {}
    missing: list[str] = []
    invalid: list[str] = []
    overlapping: set[str] = set()
    unset: list[str] = []
    required = {gauge.name for gauge in gauges.required}
    for gauge in _gauges_of_kind(gauges):
        values = [v for n in gauge.names for v in parsed.series.get(n, ())]
        if not values:
            if gauge.name in required:
                declared = any(n in parsed.declared_unset for n in gauge.names)
                (unset if declared else missing).append(gauge.name)
            continue
        if any(not math.isfinite(v) or v < 0 for v in values):
            invalid.append(gauge.name)
        sums[gauge.name] = sum(values)
        if gauge.overlaps:
            overlapping.add(gauge.name)
    return Measure(gauges=sums, missing=tuple(missing), invalid=tuple(invalid), overlapping=frozenset(overlapping),
                   unset=tuple(unset))


def _gauges_of_kind(gauges: GaugeSet) -> list[WorkGauge]:
    """The set's gauges first, then every other work gauge of the same engine, each once."""
    seen: dict[str, WorkGauge] = {g.name: g for g in gauges.gauges}
    for other in gauge_sets_of(gauges.kind):
        for gauge in other.gauges:
            seen.setdefault(gauge.name, gauge)
    return list(seen.values())


def work_value(name: str, labels: Mapping[str, str], value: float) -> float:
    """A series its gauge names as holding no work (gauges.WorkGauge.holds_work) reads 0; a value
    no gauge may have (negative, NaN, infinite) is kept, for the read to be invalid."""
    gauge = SERIES_FILTERED.get(name)
    if gauge is None or gauge.holds_work(labels) or not math.isfinite(value) or value < 0:
        return value
    return 0.0
