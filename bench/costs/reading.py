"""What a read costs in CPU: turning an exposition into the work-gauge sum.

Two ways over the same body, timed in one process, alternating (A, B then B, A) round by round:
- A, the hook: `hook.exposition.parse` (a regex keeps the lines of the few wanted families, the
  library parses those) then `measure` with vLLM's gauge set;
- B, the library alone: prometheus-client's `text_string_to_metric_families` consumed in full,
  then the work gauges' samples summed.

Bodies come from the engine emulator's /metrics: vLLM's real families (its 47 KB idle scrape)
padded to ~50 KB, the same padded to ~500 KB with one extra histogram family (the emulator's
--body-kb), and ~500 KB the way a real server gets there: every family once per data-parallel
rank (--dp 16).
"""

from __future__ import annotations

import statistics
import time
import timeit
from typing import Callable

from prometheus_client.parser import text_string_to_metric_families

from emulation.engine_process import EngineProcess
from modeldrain.hook.exposition import parse
from modeldrain.hook.gauges import EngineKind, gauge_set
from modeldrain.hook.work import measure

BODIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("~50 KB: vLLM's families, padded (--body-kb 50)", ("--body-kb", "50")),
    ("~500 KB: vLLM's families, padded (--body-kb 500)", ("--body-kb", "500")),
    ("~500 KB: vLLM's families × 16 DP ranks (--dp 16)", ("--dp", "16")),
)

# Each timing runs the function enough times to last about this long, so timer resolution and
# scheduling noise stay small against it.
TARGET_TIMING_S = 0.1

GAUGES = gauge_set(EngineKind.VLLM)
WORK_NAMES = GAUGES.metric_names


def fetch_body(engine_args: tuple[str, ...]) -> tuple[bytes, str]:
    with EngineProcess("--kind", "vllm", "--max-running", "4", *engine_args) as engine:
        status, body, headers = engine.request("GET", "/metrics")
        if status != 200:
            raise RuntimeError(f"/metrics answered {status}")
        return body, headers.get("Content-Type", "")


def hook_sum(body: bytes, content_type: str) -> float:
    in_flight = measure(parse(body, content_type, deadline_at=time.monotonic() + 60), GAUGES).in_flight
    assert in_flight is not None
    return in_flight


def full_parse_sum(body: bytes) -> float:
    total = 0.0
    for family in text_string_to_metric_families(body.decode("utf-8")):
        for sample in family.samples:
            if sample.name in WORK_NAMES:
                total += sample.value
    return total


def _per_call_s(fn: Callable[[], object], number: int) -> float:
    return timeit.Timer(fn).timeit(number=number) / number


def _number_for(fn: Callable[[], object]) -> int:
    one_s = max(1e-6, timeit.Timer(fn).timeit(number=1))
    return max(1, round(TARGET_TIMING_S / one_s))


def time_body(body: bytes, content_type: str, rounds: int) -> dict:
    a = lambda: hook_sum(body, content_type)  # noqa: E731
    b = lambda: full_parse_sum(body)  # noqa: E731
    if a() != b():
        raise AssertionError(f"the two ways disagree: hook {a()} vs full parse {b()}")
    a_number, b_number = _number_for(a), _number_for(b)
    a_s, b_s = [], []
    for i in range(rounds):
        if i % 2 == 0:
            a_s.append(_per_call_s(a, a_number))
            b_s.append(_per_call_s(b, b_number))
        else:
            b_s.append(_per_call_s(b, b_number))
            a_s.append(_per_call_s(a, a_number))
    return {
        "bytes": len(body),
        "lines": body.count(b"\n"),
        "families": body.count(b"# TYPE "),
        "work_series": sum(1 for line in body.splitlines() if line.split(b"{")[0].decode() in WORK_NAMES),
        "hook_s": a_s,
        "full_parse_s": b_s,
        "ratio": [b / a for a, b in zip(a_s, b_s)],
        "calls_per_timing": {"hook": a_number, "full_parse": b_number},
    }


def measure_all(rounds: int) -> dict:
    results = []
    for label, args in BODIES:
        body, content_type = fetch_body(args)
        results.append({"body": label, **time_body(body, content_type, rounds)})
    return {"rounds": rounds, "bodies": results, "median_ratio": statistics.median(
        statistics.median(r["ratio"]) for r in results)}
