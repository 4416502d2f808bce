"""The per-deletion model against real deletions of every strategy's own setting.

For each strategy and each of three loads the bench already deletes under (idle; mixed ≤20 s;
three requests longer than G − 5 among short ones), the real deletions come from results.json where
it holds that setting (the drain matrix, the shutdown-timeout family), and are run here with the
same harness (bench/drains/deletion.py: emulated vLLM, kubelet's emulation, the router's load) where
it does not. The model then deletes under the same load over many seeds, and the report shows
whether each measured median falls inside the model's range.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bench.drains import shutdown_timeout
from bench.drains.deletion import RouterLoad, delete_under_load, engine, prestop_argv, seed_of
from bench.fleet import deletion as model
from bench.fleet.measured import Measured
from bench.fleet.strategies import STRATEGIES, Hook, Strategy
from bench.pool import run_jobs
from bench.spread import Spread
from bench.tables import MIN_SECONDS_DIFFERENCE
from emulation.load import DEFAULT_REQUEST_TIMEOUT_S

FAMILY = "fleet settings"
SCENARIOS = ("idle", "mixed ≤20 s", "long > G−5")
# Real deletions per cell (full, --quick), paired by seed; the model's seeds per cell.
REPEATS = (3, 1)
MODEL_SEEDS = 40
# Concurrent deletions. At 12 (the machine shared with other work) vLLM's abort exit took 3.6–4.1 s
# in the three Inference Extension deletions under long requests, against 2.15 s run alone; at 6
# the 27 deletions take ~4 min.
JOBS = 6
# Outcomes a request can end in other than completed, under each part's field names.
LOST_FIELDS = ("cut", "rejected", "rejected_new", "failed", "refused", "other")


def router_load(scenario: str, grace_s: float) -> RouterLoad:
    return {s.name: s for s in shutdown_timeout.SCENARIOS}[scenario].load(grace_s)


@dataclass(frozen=True)
class Cell:
    strategy: Strategy
    scenario: str
    repeat: int

    def expected_s(self) -> float:
        load = router_load(self.scenario, self.strategy.grace_s)
        return load.warmup_s + (self.strategy.grace_s if self.scenario == "long > G−5" else 25.0)

    def key(self) -> dict:
        return {"family": FAMILY, "grace_s": self.strategy.grace_s, "scenario": self.scenario,
                "strategy": self.strategy.name, "repeat": self.repeat}


def engine_args(strategy: Strategy) -> list[str]:
    args = ["--kind", "vllm"]
    if strategy.shutdown_timeout_s is not None:
        args += ["--shutdown-timeout", f"{strategy.shutdown_timeout_s:g}"]
    return args


def run_cell(cell: Cell, prestop: Path) -> dict:
    strategy = cell.strategy
    seed = seed_of(FAMILY, cell.scenario, cell.repeat)
    with engine(*engine_args(strategy)) as vllm:
        assert vllm.port is not None  # set once started
        hook_argv = prestop_argv(prestop, strategy.grace_s, "--port", str(vllm.port), "--engine", "vllm") \
            if strategy.hook is Hook.PRESTOP else None
        deletion = delete_under_load(vllm, router_load(cell.scenario, strategy.grace_s), seed, strategy.grace_s,
                                     hook_argv=hook_argv,
                                     hook_sleep_s=strategy.sleep_s if strategy.hook is Hook.SLEEP else None)
    return {"seed": seed, **deletion.summary()}


def unmeasured_cells(quick: bool) -> list[Cell]:
    return [Cell(s, sc, r) for s in STRATEGIES if s.measured is None for sc in SCENARIOS
            for r in range(REPEATS[quick])]


def measure_unmeasured(prestop: Path, quick: bool, progress: Callable[[str], None] | None) -> list[dict]:
    cells = unmeasured_cells(quick)
    if progress:
        progress(f"fleet: {len(cells)} real deletions of the settings results.json lacks, {JOBS} at a time")
    run: Callable[[Any], dict] = lambda cell: run_cell(cell, prestop)  # run_jobs hands back each Cell given
    return run_jobs(cells, run, JOBS, progress)


def requests_from(load: RouterLoad, route_lag_s: float, rng: random.Random) -> list[model.Request]:
    """The requests of a bench load as its router sends them: from the warm-up's start, plus its tail
    (sent as the warm-up starts), each given up at the router's request timeout."""
    out = []
    if load.rate_per_s is not None and load.durations is not None:
        t = -load.warmup_s
        while True:
            t += rng.expovariate(load.rate_per_s)
            if t >= route_lag_s:
                break
            drawn = model.request(t, load.durations.draw(rng), DEFAULT_REQUEST_TIMEOUT_S)
            if drawn.ends_s > 0:
                out.append(drawn)
    if load.tail is not None:
        low, high = load.tail.ends_after_delete_s
        out += [model.request(-load.warmup_s, load.warmup_s + rng.uniform(low, high), DEFAULT_REQUEST_TIMEOUT_S)
                for _ in range(load.tail.count)]
    return out


def modelled(strategy: Strategy, scenario: str, measured: Measured, seeds: int = MODEL_SEEDS) -> list[model.Outcome]:
    load = router_load(scenario, strategy.grace_s)
    out = []
    for k in range(seeds):
        rng = random.Random(zlib.crc32(f"calibration/{scenario}/{k}".encode()))
        timings = model.Timings.draw(measured, rng)
        lag = timings.route_lag_s if load.rate_per_s is not None else 0.0
        out.append(model.delete(strategy, requests_from(load, lag, rng), timings))
    return out


def real_cells(strategy: Strategy, scenario: str, results: dict, ours: list[dict]) -> list[dict]:
    if strategy.measured is None:
        pool, name = ours, strategy.name
    elif strategy.measured.part == "drain":
        pool, name = results["drain"]["cells"], strategy.measured.strategy
    else:
        pool, name = results["configurations"]["cells"], strategy.measured.strategy
    return [c for c in pool if c["strategy"] == name and c["scenario"] == scenario
            and c["grace_s"] == strategy.grace_s and not c.get("error")]


def lost(cell: dict) -> int:
    return sum(int(cell.get(k) or 0) for k in LOST_FIELDS)


def inside(value: float, model_values: list[float], grain: float) -> bool:
    """Within the model's range, give or take the bench's grain for seconds (a SIGKILL lands a few ms late)."""
    spread = Spread.of(model_values)
    return spread.low - grain <= value <= spread.high + grain


def compare(results: dict, ours: list[dict], measured: Measured) -> list[dict]:
    rows = []
    for strategy in STRATEGIES:
        for scenario in SCENARIOS:
            real = real_cells(strategy, scenario, results, ours)
            if not real:
                continue
            sim = modelled(strategy, scenario, measured)
            row: dict = {"strategy": strategy.name, "scenario": scenario, "real_n": len(real),
                   "real_exit_s": [c["engine_exited_at_s"] for c in real],
                   "real_held_idle_s": [c["held_idle_s"] for c in real],
                   "real_lost": [lost(c) for c in real],
                   "model_exit_s": [o.exited_at_s for o in sim], "model_held_idle_s": [o.held_idle_s for o in sim],
                   "model_lost": [o.cut + o.failed for o in sim]}
            for key in ("exit_s", "held_idle_s", "lost"):
                row[f"{key}_inside"] = inside(Spread.of(row[f"real_{key}"]).median, row[f"model_{key}"],
                                              MIN_SECONDS_DIFFERENCE if key.endswith("_s") else 0.0)
            rows.append(row)
    return rows
