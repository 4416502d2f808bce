"""bench/fleet/calibration.py's pure parts: a bench load's requests for the model, and the range check."""

from __future__ import annotations

import random

from bench.drains.deletion import RouterLoad, TailRequests
from bench.fleet.calibration import SCENARIOS, inside, lost, requests_from, router_load, unmeasured_cells
from bench.fleet.strategies import STRATEGIES
from emulation.load import UniformDurations


def test_a_bench_load_is_sent_from_its_warmup_and_carries_its_tail() -> None:
    load = RouterLoad(5.0, rate_per_s=3.0, durations=UniformDurations(0.5, 3.0), tail=TailRequests(3, (25.0, 55.0)))
    out = requests_from(load, 1.0, random.Random(3))
    tail = [r for r in out if r.ends_s >= 25.0]
    assert len(tail) == 3 and all(r.arrives_s == -5.0 and r.ends_s <= 55.0 for r in tail)
    assert all(-5.0 <= r.arrives_s < 1.0 and r.ends_s > 0 for r in out)


def test_an_idle_load_sends_nothing() -> None:
    assert requests_from(router_load("idle", 30.0), 0.0, random.Random(1)) == []


def test_inside_allows_the_grain_and_no_more() -> None:
    assert inside(60.1, [60.0, 60.0], 0.25)
    assert not inside(60.3, [60.0, 60.0], 0.25)
    assert not inside(4, [3, 3], 0.0)


def test_every_lost_outcome_counts_once() -> None:
    assert lost({"cut": 2, "rejected_new": 1, "failed": 3, "refused": 1, "other": 0, "completed": 9}) == 7


def test_only_the_settings_results_json_lacks_are_deleted_here() -> None:
    cells = unmeasured_cells(quick=True)
    assert {c.strategy.name for c in cells} == {s.name for s in STRATEGIES if s.measured is None}
    assert {c.scenario for c in cells} == set(SCENARIOS)
