"""What one scrape costs the engine: prometheus_client rendering vLLM's /metrics, in CPU time.

A real vLLM answers GET /metrics on its API server process by running prometheus_client's
`generate_latest` over its registry: its own Counter, Gauge, Histogram and Summary objects,
labelled per model and engine, plus the default process, platform and GC collectors. prestop's
reads are such scrapes: one a second while the engine is idle, four a second
(`--busy-interval 0.25`) while work is in flight. This measures what that costs the engine.

The registry is rebuilt from the real families: the emulator's /metrics, which is vLLM 0.32.0's
own idle scrape (~47 KB), and the same families once per data-parallel rank (`--dp 16`, ~500 KB).
Every family becomes a real metric object with the scrape's name, type, help, label names, label
values and bucket bounds (the `_created` series come from the objects, as in vLLM; process_* and
python_* from the real collectors), and the render is checked to give back the same series.
Timed: the CPU time of the rendering thread (`time.thread_time`) per `generate_latest`, in rounds.

Not counted: the HTTP exchange around the render (the same for any request to the API server),
and gzip, which prestop does not ask for (Accept-Encoding: identity). A server in prometheus'
multiprocess mode (vLLM with several API server processes) renders from files instead: not this.
"""

from __future__ import annotations

import statistics
import time
from typing import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary, generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from emulation.engine_process import EngineProcess
from modeldrain.hook.constants import BUSY_POLL_INTERVAL_S, POLL_INTERVAL_S
from modeldrain.hook.decision import busy_spacing_s

BODIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("~47 KB: vLLM 0.32.0's families, one engine", ()),
    ("~500 KB: the same families × 16 DP ranks (--dp 16)", ("--dp", "16")),
)

# One timing lasts about this long, so timer grain and scheduling noise stay small against it.
TARGET_TIMING_S = 0.2

# Families the default registry's collectors make; rebuilt from those collectors, not copied.
_COLLECTOR_PREFIXES = ("process_", "python_")
_CREATED = "_created"
# Label names the client library adds itself for these types.
_OWN_LABELS = {"histogram": {"le"}, "summary": {"quantile"}}


def fetch_body(engine_args: tuple[str, ...]) -> str:
    with EngineProcess("--kind", "vllm", "--max-running", "4", *engine_args) as engine:
        return engine.metrics_text()


def _has_created_parent(name: str, typed: dict[str, str]) -> bool:
    """vLLM's `x_created` gauges are rendered by x itself (a counter, histogram or summary)."""
    return name.endswith(_CREATED) and typed.get(name[: -len(_CREATED)]) in ("counter", "histogram", "summary")


# A family with no series yet (nothing observed) is rendered as its HELP and TYPE lines only:
# a labelled metric with no children, whatever its label names.
_NO_SERIES_LABELS = ["label"]


def _label_names(family: Metric) -> list[str]:
    own = _OWN_LABELS.get(family.type, set())
    for sample in family.samples:
        return [k for k in sample.labels if k not in own]
    return _NO_SERIES_LABELS


def _children(family: Metric) -> dict[tuple[str, ...], dict[str, float]]:
    """Per label set (without le/quantile): the family's samples by name suffix."""
    own = _OWN_LABELS.get(family.type, set())
    out: dict[tuple[str, ...], dict[str, float]] = {}
    for sample in family.samples:
        key = tuple(v for k, v in sample.labels.items() if k not in own)
        suffix = sample.name[len(family.name):]
        if family.type == "histogram" and suffix == "_bucket":
            suffix = f"_bucket:{sample.labels['le']}"
        out.setdefault(key, {})[suffix] = sample.value
    return out


def _bucket_bounds(family: Metric) -> tuple[float, ...]:
    """The family's bounds; the library's default for one with no series (none are rendered)."""
    bounds = {float(s.labels["le"]) for s in family.samples if s.name.endswith("_bucket")}
    finite = tuple(sorted(b for b in bounds if b != float("inf")))
    return finite or Histogram.DEFAULT_BUCKETS


def _add_family(registry: CollectorRegistry, family: Metric) -> None:
    names = _label_names(family)
    kwargs = dict(name=family.name, documentation=family.documentation, labelnames=names, registry=registry)
    children = _children(family)
    if family.type == "counter":
        counter = Counter(**kwargs)  # type: ignore[arg-type]
        for key, values in children.items():
            (counter.labels(*key) if names else counter).inc(values.get("_total", 0.0))
    elif family.type == "gauge":
        gauge = Gauge(**kwargs)  # type: ignore[arg-type]
        for key, values in children.items():
            (gauge.labels(*key) if names else gauge).set(values.get("", 0.0))
    elif family.type == "histogram":
        histogram = Histogram(buckets=_bucket_bounds(family), **kwargs)  # type: ignore[arg-type]
        for key, values in children.items():
            if names:
                histogram.labels(*key)  # the child, so its (zero) series are rendered
            if values.get("_count", 0.0):
                raise ValueError(f"{family.name}: a histogram with observations (only fresh ones are rebuilt)")
    elif family.type == "summary":
        summary = Summary(**kwargs)  # type: ignore[arg-type]
        for key, values in children.items():
            if names:
                summary.labels(*key)  # the child, so its (zero) series are rendered
            if values.get("_count", 0.0):
                raise ValueError(f"{family.name}: a summary with observations (only fresh ones are rebuilt)")
    else:
        raise ValueError(f"{family.name}: type {family.type} is not rebuilt")


def registry_from(body: str) -> CollectorRegistry:
    """A registry of real metric objects that renders the families of `body` (see the module doc)."""
    families = list(text_string_to_metric_families(body))
    typed = {f.name: f.type for f in families}
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    for family in families:
        if family.name.startswith(_COLLECTOR_PREFIXES) or _has_created_parent(family.name, typed):
            continue
        _add_family(registry, family)
    return registry


def series(text: str) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    """Every series of an exposition but the collectors' (their values and some names are the host's)."""
    out = set()
    for family in text_string_to_metric_families(text):
        if family.name.startswith(_COLLECTOR_PREFIXES):
            continue
        out |= {(s.name, tuple(sorted(s.labels.items()))) for s in family.samples}
    return out


def _cpu_per_render_s(registry: CollectorRegistry, number: int) -> tuple[float, float]:
    """(CPU, wall) seconds per render, over `number` renders."""
    cpu, wall = time.thread_time(), time.perf_counter()
    for _ in range(number):
        generate_latest(registry)
    return (time.thread_time() - cpu) / number, (time.perf_counter() - wall) / number


def time_renders(registry: CollectorRegistry, rounds: int) -> tuple[list[float], list[float], int]:
    one_cpu, _ = _cpu_per_render_s(registry, 1)
    number = max(1, round(TARGET_TIMING_S / max(one_cpu, 1e-6)))
    cpu, wall = [], []
    for _ in range(rounds):
        c, w = _cpu_per_render_s(registry, number)
        cpu.append(c)
        wall.append(w)
    return cpu, wall, number


def measure_body(body: str, rounds: int) -> dict:
    registry = registry_from(body)
    rendered = generate_latest(registry).decode()
    if series(rendered) != series(body):
        missing, extra = series(body) - series(rendered), series(rendered) - series(body)
        raise AssertionError(f"the rebuilt registry renders other series: {len(missing)} missing "
                             f"(e.g. {sorted(missing)[:2]}), {len(extra)} extra (e.g. {sorted(extra)[:2]})")
    cpu, wall, number = time_renders(registry, rounds)
    per_render = statistics.median(cpu)
    # While busy prestop spaces its reads by their duration (mostly this render), as it would here.
    busy_spacing = busy_spacing_s(statistics.median(wall), busy_interval_s=BUSY_POLL_INTERVAL_S,
                                  interval_s=POLL_INTERVAL_S)
    return {
        "bytes": len(body.encode()), "rendered_bytes": len(rendered.encode()), "series": len(series(body)),
        "families": sum(1 for _ in text_string_to_metric_families(body)),
        "cpu_s": cpu, "wall_s": wall, "renders_per_timing": number,
        "busy_reads_per_s": 1 / busy_spacing, "busy_cores": per_render / busy_spacing,
        "idle_cores": per_render / POLL_INTERVAL_S,
    }


def measure_all(rounds: int, bodies: Iterable[tuple[str, tuple[str, ...]]] = BODIES) -> dict:
    results = [{"body": label, "engine_args": list(args), **measure_body(fetch_body(args), rounds)}
               for label, args in bodies]
    return {"rounds": rounds, "busy_interval_s": BUSY_POLL_INTERVAL_S, "interval_s": POLL_INTERVAL_S,
            "bodies": results}
