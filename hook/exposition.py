"""Turn a /metrics body into the few samples the drain needs, fast.

vLLM serves ~50 KB idle and 500 KB or more with many LoRA adapters or DP ranks, almost all
of it histograms we never read. prometheus-client's parser is pure Python, so we first keep
only the lines of the families we need (one C-speed regex pass), then let the library parse
those lines: its grammar, escaping and OpenMetrics handling, on a few hundred bytes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from hook.gauges import (
    ALL_WORK_METRIC_NAMES,
    ENGINE_PREFIXES,
    PROCESS_START_METRIC,
    RESTART_COUNTERS,
    SGLANG_ROLE_LABEL,
    EngineKind,
    GaugeSet,
    Role,
)
from prometheus_client.openmetrics.parser import text_string_to_metric_families as _parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as _parse_text

OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text"

# prometheus-client's OpenMetrics output escapes ':' to '_' in sample names (but not in TYPE
# lines): such a sample is read as the gauge it stands for.
_READ_NAMES = ALL_WORK_METRIC_NAMES | set(RESTART_COUNTERS.values()) | {PROCESS_START_METRIC}
_ESCAPED_NAMES = {n.replace(":", "_"): n for n in _READ_NAMES if ":" in n}
_WANTED = sorted(_READ_NAMES | set(_ESCAPED_NAMES), key=len, reverse=True)
# A sample line, or a HELP/TYPE/UNIT line, of a wanted family; nothing else.
_WANTED_LINE = re.compile(
    r"^(?:# (?:HELP|TYPE|UNIT) )?(?:%s)(?:[ \t{].*)?$" % "|".join(map(re.escape, _WANTED)),
    re.MULTILINE,
)
# Engine prefixes as they start sample lines, escaped (vllm_) or not (vllm:).
_KIND_BY_PREFIX = {p.rstrip(":"): k for k, p in ENGINE_PREFIXES.items()}
_ENGINE_PREFIX = re.compile(r"^(%s)[:_]" % "|".join(map(re.escape, _KIND_BY_PREFIX)), re.MULTILINE)
_SGLANG_ROLE = re.compile(r'^sglang[:_][^\s{]*\{[^}\n]*\b%s="([a-z]+)"' % SGLANG_ROLE_LABEL, re.MULTILINE)
_ROLE_BY_LABEL = {"unified": Role.UNIFIED, "null": Role.UNIFIED, "prefill": Role.PREFILL, "decode": Role.DECODE}


class ExpositionError(ValueError):
    """The body is not an exposition we can parse."""


@dataclass(frozen=True)
class Exposition:
    """The wanted samples of one body: metric name -> values of its series, in body order."""

    series: dict[str, tuple[float, ...]]
    kind: EngineKind | None  # from the metric prefixes, when the body names one engine
    sglang_role: Role | None  # from SGLang's engine_type label, when present

    @property
    def process_start_time(self) -> float | None:
        values = self.series.get(PROCESS_START_METRIC)
        return values[0] if values else None

    @property
    def restart_counters(self) -> dict[str, float]:
        """Each present restart counter, summed over its series."""
        names = RESTART_COUNTERS.values()
        return {n: sum(self.series[n]) for n in names if n in self.series}


@dataclass(frozen=True)
class Measure:
    """A gauge set applied to an exposition."""

    gauges: dict[str, float]
    missing: tuple[str, ...]
    invalid: tuple[str, ...]  # gauges with a negative, NaN or infinite series

    @property
    def in_flight(self) -> float | None:
        return None if self.invalid else sum(self.gauges.values())


def parse(body: bytes, content_type: str = "") -> Exposition:
    """Parse the wanted families out of a body; raises ExpositionError on what cannot be parsed."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExpositionError(f"body is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    openmetrics = content_type.split(";", 1)[0].strip().lower() == OPENMETRICS_CONTENT_TYPE
    kept = "\n".join(_unescaped(m.group(0)) for m in _WANTED_LINE.finditer(text))
    series: dict[str, list[float]] = {}
    try:
        if openmetrics:
            families = _parse_openmetrics(kept + "\n# EOF\n")
        else:
            families = _parse_text(kept + "\n")
        for family in families:
            for sample in family.samples:
                if sample.name in _READ_NAMES:
                    series.setdefault(sample.name, []).append(float(sample.value))
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise ExpositionError(f"cannot parse exposition: {exc}") from None
    return Exposition(
        series={k: tuple(v) for k, v in series.items()},
        kind=_kind(text),
        sglang_role=_sglang_role(text),
    )


def measure(exposition: Exposition, gauges: GaugeSet) -> Measure:
    """Sum every series of every gauge of the set; note what is missing or invalid."""
    sums: dict[str, float] = {}
    missing: list[str] = []
    invalid: list[str] = []
    for gauge in gauges.gauges:
        values = [v for n in gauge.names for v in exposition.series.get(n, ())]
        if not values:
            missing.append(gauge.name)
            continue
        if any(not math.isfinite(v) or v < 0 for v in values):
            invalid.append(gauge.name)
        sums[gauge.name] = sum(values)
    return Measure(gauges=sums, missing=tuple(missing), invalid=tuple(invalid))


def _unescaped(line: str) -> str:
    if line.startswith("#"):
        return line
    name_end = min((i for i in (line.find("{"), line.find(" ")) if i >= 0), default=len(line))
    canonical = _ESCAPED_NAMES.get(line[:name_end])
    return canonical + line[name_end:] if canonical else line


def _kind(text: str) -> EngineKind | None:
    kinds = {_KIND_BY_PREFIX[m.group(1)] for m in _ENGINE_PREFIX.finditer(text)}
    return kinds.pop() if len(kinds) == 1 else None


def _sglang_role(text: str) -> Role | None:
    roles = {_ROLE_BY_LABEL.get(m.group(1)) for m in _SGLANG_ROLE.finditer(text)}
    roles.discard(None)
    return roles.pop() if len(roles) == 1 else None
