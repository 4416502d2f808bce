"""Drain quality: the same busy replica deleted under each preStop strategy, really.

Each cell is one Pod deletion: an emulated vLLM engine (a real process, aborting every request in
flight on SIGTERM as vLLM does by default), a router sending it completions, and the kubelet
emulation deleting the Pod with one of the strategies below. The router keeps sending for a short
random lag after the delete (seeded: the same lag, arrivals and durations for every strategy).

Strategies: no hook (SIGTERM at the delete); Kubernetes' native `sleep` action for 5 s and for
G − 5; the `prestop` exec hook (the bundle, dist/prestop, when it exists; else the console script).

Cells run concurrently, each with its own engine on its own port, each wholly inside one worker
thread: EngineProcess ties the engine (and kubelet the hook) to the thread that started it.
"""

from __future__ import annotations

import enum
import math
import random
import threading
import time
import traceback
import zlib
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable, Iterable, Sequence

from bench.drains.deletion import (
    MAX_RUNNING,
    ROUTE_LAG_RANGE_S,
    RouterLoad,
    TailRequests,
    dead_port,
    hook_events,
    prestop_argv,
)
from bench.paths import prestop_executable
from emulation.engine_process import EngineProcess
from emulation.kubelet import DeletionReport, delete_pod
from emulation.load import MIXED_REQUESTS, SHORT_REQUESTS, Durations, LoadGenerator, LoadTally, UniformDurations
from emulation.timeline import delete_tally

GRACES_S = (30.0, 45.0)  # the operator's default, and what it advises for SGLang's split roles

# A hung engine's requests: longer than any deletion, so none is ever answered.
NEVER_S = 3600.0

# Concurrent cells by default: the full matrix (144 deletions, ~1 h one after another) takes ~7.5
# min. A cell is mostly waiting (timers, sleeps, a few requests a second): 8 of them used ~0.2 of
# a core on average on a 2-core machine.
DEFAULT_JOBS = 8


class Strategy(enum.Enum):
    NO_HOOK = "no hook"
    SLEEP_5 = "sleep 5"
    SLEEP_G_MINUS_5 = "sleep G−5"
    PRESTOP = "prestop"

    def sleep_s(self, grace_s: float) -> float | None:
        return {Strategy.SLEEP_5: 5.0, Strategy.SLEEP_G_MINUS_5: grace_s - 5.0}.get(self)


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    warmup_s: float  # load before the delete, so the replica is in its steady state
    rate_per_s: float | None  # router's Poisson arrivals; None: no requests at all
    durations: Callable[[float], Durations] | None  # grace -> request durations
    long_requests: int = 0  # requests of G to 2G s, sent as the warmup starts (see LONG_WARMUP_S)
    hung: bool = False
    wrong_port: bool = False
    seeds_of: str | None = None  # draw the seeds of that scenario (the same load, run again)


# Sent this long before the delete and at least G long, a long request ends after G − 5: no
# strategy can let it finish, since prestop returns at G − 5 at the latest.
LONG_WARMUP_S = 5.0


def long_durations(grace_s: float) -> Durations:
    return UniformDurations(grace_s, 2 * grace_s)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("idle", "no requests at all", 0.5, None, None),
    Scenario("steady short", "4 req/s, 0.5–3 s each (~7 in flight)", 5.0, 4.0, lambda g: SHORT_REQUESTS),
    Scenario("mixed ≤20 s", "2 req/s, 80% 0.5–3 s, 20% 3–20 s (~7 in flight)", 10.0, 2.0,
             lambda g: MIXED_REQUESTS),
    Scenario("long > G−5", "3 requests of G–2G s (none can finish by G−5) among 3 req/s of 0.5–3 s",
             LONG_WARMUP_S, 3.0, lambda g: SHORT_REQUESTS, long_requests=3),
    Scenario("hung engine", "wedged: accepts, answers nothing, ignores SIGTERM; 2 req/s", 3.0, 2.0,
             lambda g: UniformDurations(NEVER_S, NEVER_S), hung=True),
    Scenario("wrong port", "steady short (its seeds too), but prestop reads a port where nothing listens", 5.0,
             4.0, lambda g: SHORT_REQUESTS, wrong_port=True, seeds_of="steady short"),
)
SCENARIOS_BY_NAME = {s.name: s for s in SCENARIOS}


def router_load(scenario: Scenario, grace_s: float) -> RouterLoad:
    """The scenario's load as bench/drains/deletion.py sends it (its long requests as a tail that ends
    G − warm-up … 2G − warm-up after the delete: sent as the warm-up starts, they run G to 2G)."""
    tail = TailRequests(scenario.long_requests, (grace_s - scenario.warmup_s, 2 * grace_s - scenario.warmup_s)) \
        if scenario.long_requests else None
    if scenario.rate_per_s is None:
        return RouterLoad(scenario.warmup_s, tail=tail)
    assert scenario.durations is not None  # a scenario with a rate says its durations
    return RouterLoad(scenario.warmup_s, rate_per_s=scenario.rate_per_s, durations=scenario.durations(grace_s),
                      tail=tail)


def seed_for(scenario: Scenario, repeat: int) -> int:
    """The same for every strategy and grace: the only thing that differs between them is the hook."""
    return zlib.crc32(f"{scenario.seeds_of or scenario.name}/{repeat}".encode())


def route_lag_s(seed: int) -> float:
    return round(random.Random(seed).uniform(*ROUTE_LAG_RANGE_S), 3)


@dataclass(frozen=True)
class Cell:
    strategy: Strategy
    scenario: Scenario
    grace_s: float
    repeat: int

    def expected_s(self) -> float:
        """A rough duration, to start the longest cells first."""
        g = self.grace_s
        if self.scenario.hung:
            deletion = g
        elif self.strategy is Strategy.NO_HOOK:
            deletion = 2
        elif self.strategy is Strategy.SLEEP_5:
            deletion = 7
        elif self.strategy is Strategy.SLEEP_G_MINUS_5:
            deletion = g - 3
        else:
            deletion = {"idle": 8, "steady short": 9, "mixed ≤20 s": 22, "long > G−5": g - 3,
                        "wrong port": 7}.get(self.scenario.name, g)
        return self.scenario.warmup_s + deletion + 1


@dataclass(frozen=True)
class CellResult:
    strategy: str
    scenario: str
    grace_s: float
    repeat: int
    seed: int
    route_lag_s: float
    touched: int  # requests in flight at the delete or sent after it
    in_flight_at_delete: int
    completed: int
    cut: int
    rejected: int
    refused: int
    other: int
    sigterm_at_s: float
    sigkill_at_s: float | None
    engine_exited_at_s: float
    engine_exit_code: int | None
    last_completed_at_s: float | None  # the last request completed after the delete, if any
    held_idle_s: float  # engine exit − max(delete, last completed request's end)
    hook_exit_code: int | None
    hook_outcome: str | None  # prestop's drain_finished outcome
    hook_first_log_s: float | None  # delete to prestop's first log line (drain_started), start-up under load
    wall_s: float
    error: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def _engine_args(scenario: Scenario) -> list[str]:
    args = ["--kind", "vllm", "--max-running", str(MAX_RUNNING)]
    if scenario.hung:
        # A wedged API server never gets to run its SIGTERM handler: only SIGKILL ends it.
        args += ["--on-sigterm", "ignore"]
    return args


def _hook(cell: Cell, engine_port: int, dead_port: int | None, prestop: Path) -> tuple[list[str] | None, float | None]:
    if cell.strategy is Strategy.PRESTOP:
        port = dead_port if cell.scenario.wrong_port else engine_port
        return prestop_argv(prestop, cell.grace_s, "--port", str(port), "--engine", "vllm"), None
    return None, cell.strategy.sleep_s(cell.grace_s)


def _with_long_requests(report: DeletionReport, long_load: LoadGenerator) -> DeletionReport:
    """The report with the long requests' records added to the router's."""
    extra = long_load.wait(timeout_s=10.0)
    ours = report.load or LoadTally((), 0)
    return replace(report, load=LoadTally(ours.records + extra.records, ours.in_flight + extra.in_flight))


def run_cell(cell: Cell, prestop: Path) -> CellResult:
    """One deletion, start to finish, in the calling thread."""
    started = time.monotonic()
    scenario = cell.scenario
    seed = seed_for(scenario, cell.repeat)
    lag_s = route_lag_s(seed)
    dead = dead_port() if scenario.wrong_port else None
    try:
        with EngineProcess(*_engine_args(scenario)) as engine:
            assert engine.port is not None  # set once started
            if scenario.hung:
                engine.misbehave("hang")  # /metrics: the request is read, no byte of an answer comes
            long_load = None
            if scenario.long_requests:
                long_load = LoadGenerator(engine.base_url, concurrency=scenario.long_requests,
                                          max_requests=scenario.long_requests,
                                          durations=long_durations(cell.grace_s), seed=seed + 2).start()
            load = None
            if scenario.rate_per_s is not None:
                assert scenario.durations is not None  # a scenario with a rate says its durations
                load = LoadGenerator(engine.base_url, rate_per_s=scenario.rate_per_s,
                                     durations=scenario.durations(cell.grace_s), seed=seed).start()
            time.sleep(scenario.warmup_s)
            in_flight = (load.tally().in_flight if load else 0) + (long_load.tally().in_flight if long_load else 0)
            hook_argv, sleep_s = _hook(cell, engine.port, dead.getsockname()[1] if dead else 0, prestop)
            report = delete_pod(engine, hook_argv, cell.grace_s, hook_sleep_s=sleep_s, load=load,
                                route_drop_after_s=lag_s if load else None)
            if long_load is not None:
                report = _with_long_requests(report, long_load)
    finally:
        if dead is not None:
            dead.close()
    tally = delete_tally(report)
    last = report.relative(report.load.last_finished_at) if report.load else None
    last_after_delete = last if last is not None and last > 0 else None
    events = hook_events(report)
    started_event = events.get("drain_started", {})
    finished_event = events.get("drain_finished", {})
    return CellResult(
        strategy=cell.strategy.value, scenario=scenario.name, grace_s=cell.grace_s, repeat=cell.repeat,
        seed=seed, route_lag_s=lag_s,
        touched=tally.touched if tally else 0, in_flight_at_delete=in_flight,
        completed=tally.completed if tally else 0, cut=tally.cut if tally else 0,
        rejected=tally.rejected if tally else 0, refused=tally.refused if tally else 0,
        other=tally.other if tally else 0,
        sigterm_at_s=round(report.sigterm_at, 3),
        sigkill_at_s=None if report.sigkill_at is None else round(report.sigkill_at, 3),
        engine_exited_at_s=round(report.engine_exited_at, 3), engine_exit_code=report.engine_exit_code,
        last_completed_at_s=None if last_after_delete is None else round(last_after_delete, 3),
        held_idle_s=round(report.engine_exited_at - (last_after_delete or 0.0), 3),
        hook_exit_code=report.hook_exit_code,
        hook_outcome=finished_event.get("outcome"),
        hook_first_log_s=round((report.hook_started_at or 0.0) + started_event["elapsed_s"], 3)
        if isinstance(started_event.get("elapsed_s"), (int, float)) else None,
        wall_s=round(time.monotonic() - started, 2),
    )


def _failed(cell: Cell, started: float, exc: BaseException) -> CellResult:
    seed = seed_for(cell.scenario, cell.repeat)
    return CellResult(cell.strategy.value, cell.scenario.name, cell.grace_s, cell.repeat, seed, route_lag_s(seed),
                      0, 0, 0, 0, 0, 0, 0, math.nan, None, math.nan, None, None, math.nan, None, None, None,
                      round(time.monotonic() - started, 2),
                      error="".join(traceback.format_exception_only(type(exc), exc)).strip())


def cells(graces_s: Sequence[float], repeats: int, scenarios: Iterable[Scenario] = SCENARIOS,
          strategies: Iterable[Strategy] = Strategy) -> list[Cell]:
    strategies, scenarios = list(strategies), list(scenarios)
    return [Cell(st, sc, g, r) for g in graces_s for sc in scenarios for st in strategies for r in range(repeats)]


def run_matrix(all_cells: Sequence[Cell], jobs: int = DEFAULT_JOBS, prestop: Path | None = None,
               progress: Callable[[str], None] | None = None) -> list[CellResult]:
    """Every cell, `jobs` at a time, longest first; a cell that fails is recorded, not raised."""
    prestop = prestop or prestop_executable()
    ordered = sorted(all_cells, key=lambda c: c.expected_s(), reverse=True)
    results: list[CellResult] = []
    lock = threading.Lock()

    def one(cell: Cell) -> CellResult:
        started = time.monotonic()
        try:
            return run_cell(cell, prestop)
        except Exception as exc:  # recorded in the results and the report: one bad cell must not end the run
            return _failed(cell, started, exc)

    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="drain-cell") as pool:
        futures = [pool.submit(one, c) for c in ordered]
        for done, future in enumerate(as_completed(futures), 1):
            result = future.result()
            with lock:
                results.append(result)
            if progress:
                status = f"ERROR {result.error}" if result.error else (
                    f"{result.completed} completed, {result.cut} cut, exit {result.engine_exited_at_s:.1f} s")
                progress(f"[{done}/{len(futures)}] G={result.grace_s:g} {result.scenario} / {result.strategy} "
                         f"#{result.repeat}: {status}")
    order = {(c.grace_s, c.scenario.name, c.strategy.value, c.repeat): i for i, c in enumerate(all_cells)}
    results.sort(key=lambda r: order[(r.grace_s, r.scenario, r.strategy, r.repeat)])
    return results
