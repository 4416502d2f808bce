"""The oracle for the reader: prometheus-client's own parse of the whole body, then the samples named
as the gauges are, measured with the same gauge set. None when prometheus-client (or UTF-8)
rejects the body, or when the body hides a work gauge from that parse (issue 15): a metric whose
name is a work gauge's once invisible characters (and quotes) are set aside, or a TYPE line for a
work gauge that is not its one `gauge` line. Written apart from modeldrain/hook/work_names.py, with the
parser's own tokenizer for TYPE lines."""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass

from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import _split_quoted, _unquote_unescape
from prometheus_client.parser import text_string_to_metric_families as parse_text

from modeldrain.hook.exposition import CANONICAL, OPENMETRICS_CONTENT_TYPE
from modeldrain.hook.gauges import ALL_WORK_METRIC_NAMES, GAUGE_SETS, EngineKind, Role, gauge_set, gauge_sets_of

WORK = {name for name, canonical in CANONICAL.items() if canonical in ALL_WORK_METRIC_NAMES}
# Each work gauge by every name it has: its series that hold no work are read as 0 here (the
# definition's deny-list, applied to the labels prometheus-client's parse gives).
GAUGE_BY_NAME = {n: g for key in GAUGE_SETS for g in GAUGE_SETS[key].gauges for n in g.names}


def _not_work(name: str, labels: dict[str, str], value: float) -> bool:
    """A series its gauge denies, with a value a gauge may have (a broken one stays broken)."""
    gauge = GAUGE_BY_NAME.get(name)
    return (gauge is not None and gauge.not_work_label in labels
            and labels[gauge.not_work_label] in gauge.not_work_values and math.isfinite(value) and value >= 0)


def _seen(name: str) -> str:
    """The name as a reader sees it: no control, format, unassigned, private, separator or mark characters."""
    kept = "".join(c for c in name if unicodedata.category(c)[0] not in "CZ"
                   and unicodedata.category(c) not in ("Mn", "Me"))
    return kept[1:-1] if len(kept) >= 2 and kept[0] == kept[-1] == '"' else kept


def hides_a_work_gauge(name: str) -> bool:
    return name not in WORK and _seen(name) in WORK


def _type_lines(text: str, openmetrics: bool) -> list[tuple[str, str]]:
    """(name, type) of every TYPE line, tokenized as the installed parser tokenizes it."""
    found = []
    for line in text.split("\n"):
        line = line if openmetrics else line.strip()
        if not line.startswith("#"):
            continue
        parts = _split_quoted(line, " " if openmetrics else None, 3)
        if len(parts) >= 4 and parts[1] == "TYPE":
            found.append((_unquote_unescape(parts[2])[0], parts[3]))
    return found


def _hidden(text: str, openmetrics: bool, families: list) -> bool:
    names = {f.name for f in families} | {s.name for f in families for s in f.samples}
    if any(hides_a_work_gauge(n) for n in names):
        return True
    typed = [(CANONICAL.get(name, name), type_) for name, type_ in _type_lines(text, openmetrics)]
    work_types = [(name, type_) for name, type_ in typed if name in ALL_WORK_METRIC_NAMES or hides_a_work_gauge(name)]
    return any(type_ != "gauge" or hides_a_work_gauge(name) for name, type_ in work_types) or \
        len({name for name, _ in work_types}) != len(work_types)


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
    if _hidden(text, openmetrics, families):
        return None
    series: dict[str, list[float]] = {}
    for family in families:
        for sample in family.samples:
            name = CANONICAL.get(sample.name)
            if name is not None:
                value = as_float(sample.value)
                series.setdefault(name, []).append(0.0 if _not_work(name, sample.labels, value) else value)
    for name in _never_served_multiprocess(families, series):
        series[name] = [0.0]
    return {k: tuple(v) for k, v in series.items()}


def _never_served_multiprocess(families: list, series: dict[str, list[float]]) -> list[str]:
    """vLLM's required work gauges that a never-served multiprocess body declares with no sample
    (issue 26): each a gauge family without samples that is not the body's last family, in a body
    without process_start_time_seconds whose vllm:request_success_total is there and sums to 0."""
    required = [g.name for g in gauge_set(EngineKind.VLLM, Role.UNIFIED).required]
    empty = {CANONICAL.get(f.name, f.name) for f in families[:-1] if f.type == "gauge" and not f.samples}
    unset = [n for n in required if n not in series and n in empty]
    if not unset or any(n not in series and n not in empty for n in required):
        return []
    starts = [s for f in families for s in f.samples if s.name == "process_start_time_seconds"]
    finished = series.get("vllm:request_success_total")
    if starts or not finished or sum(finished) != 0:
        return []
    return unset


@dataclass(frozen=True)
class Verdict:
    status: str  # idle, busy, incomplete, invalid
    in_flight: float | None


def oracle_verdict(series: dict[str, tuple[float, ...]], kind: EngineKind, role: Role) -> Verdict:
    """The role's gauges must all be present; every other gauge of the engine counts when present.
    In flight: the sum of the gauges, or a larger overlapping one's (an HTTP layer's count)."""
    total = 0.0
    floor = 0.0
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
            if gauge.overlaps:
                floor = max(floor, sum(values))
            else:
                total += sum(values)
    total = max(total, floor)
    if status:
        return Verdict(status, total)
    return Verdict("idle" if total == 0 else "busy", total)
