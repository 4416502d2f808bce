"""The simulation's honesty check: a small fleet of emulated vLLM replicas rolled for real.

Six emulated engines (real processes) each take the drain matrix's steady short load from their own
router (emulation.load.LoadGenerator, as every bench deletion does); then, one at a time (maxSurge 0,
maxUnavailable 1, no spare accelerator), kubelet's emulation deletes the next old replica with the
strategy's preStop, and once its engine has exited the replacement engine is started and waited
ready before the next delete. The measured rollout time (first delete to last replacement ready)
and the held idle summed over the six deletions are then set against the simulation of the same
roll: each deletion's own requests (when each arrived, how long it ran, as the router recorded it),
its router's lag and the replacements' measured start-ups, so that only the timing pools the fleet
draws from (solo.py) are drawn. Six deletions are one sample of arrivals: a simulation that drew
them afresh held the check to luck (a roll whose last requests came late by chance fell outside a
model that was right), so that spread is shown beside it and judged by nothing.
"""

from __future__ import annotations

import random
import statistics
import time
import zlib
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from bench.drains.deletion import ROUTE_LAG_RANGE_S, Deletion, engine, prestop_argv, summarize
from bench.drains.quality import SCENARIOS_BY_NAME
from bench.fleet import deletion as model
from bench.fleet.loads import Load
from bench.fleet.measured import Measured
from bench.fleet.rollout import Policy, roll
from bench.fleet.strategies import Hook, Strategy
from bench.spread import Spread
from bench.tables import MIN_SECONDS_DIFFERENCE
from emulation.kubelet import delete_pod
from emulation.load import LoadGenerator, RequestOutcome

# Small enough for 2 cores: six loaded engines at once, and the replacement starting.
REPLICAS = 6
# The drain matrix's steady short load, so the per-deletion pools describe these very deletions.
SCENARIO = "steady short"
# Simulated rollouts the measured one is set against: at 200 a model that is right leaves a real
# roll outside its min–max about 1 time in 100 per figure (at 50: 1 in 25, six figures a run).
SIM_SEEDS = 200


@dataclass(frozen=True)
class RealRoll:
    strategy: str
    replicas: int
    wall_s: float
    held_idle_s: float
    cut: int
    failed: int
    startups_s: tuple[float, ...]
    deletions: tuple[dict, ...]

    def as_dict(self) -> dict:
        return {"strategy": self.strategy, "replicas": self.replicas, "wall_s": round(self.wall_s, 3),
                "held_idle_s": round(self.held_idle_s, 3), "cut": self.cut, "failed": self.failed,
                "startups_s": [round(s, 3) for s in self.startups_s], "deletions": list(self.deletions)}


def matrix_load() -> Load:
    scenario = SCENARIOS_BY_NAME[SCENARIO]
    assert scenario.rate_per_s is not None and scenario.durations is not None  # a loaded scenario
    return Load(SCENARIO, scenario.rate_per_s, scenario.durations(0.0))


def _hook(strategy: Strategy, prestop: Path, port: int) -> tuple[list[str] | None, float | None]:
    if strategy.hook is Hook.PRESTOP:
        return prestop_argv(prestop, strategy.grace_s, "--port", str(port), "--engine", "vllm"), None
    if strategy.hook is Hook.SLEEP:
        return None, strategy.sleep_s
    return None, None


def roll_for_real(strategy: Strategy, prestop: Path, seed: int, warmup_s: float,
                  progress: Callable[[str], None] | None = None) -> RealRoll:
    if strategy.shutdown_timeout_s is not None:
        raise ValueError("the real roll runs vLLM's default engine; --shutdown-timeout is not wired in")
    load = matrix_load()
    rng = random.Random(seed)
    lags = [rng.uniform(*ROUTE_LAG_RANGE_S) for _ in range(REPLICAS)]
    with ExitStack() as stack:
        olds = [stack.enter_context(engine("--kind", "vllm")) for _ in range(REPLICAS)]
        routers = [LoadGenerator(e.base_url, rate_per_s=load.rate_per_s, durations=load.durations,
                                 seed=seed + 10 * i).start() for i, e in enumerate(olds)]
        time.sleep(warmup_s)
        started = time.monotonic()
        deletions, startups, touched = [], [], []
        for i, (old, router) in enumerate(zip(olds, routers)):
            assert old.port is not None  # started
            in_flight = router.tally().in_flight
            hook_argv, sleep_s = _hook(strategy, prestop, old.port)
            report = delete_pod(old, hook_argv, strategy.grace_s, hook_sleep_s=sleep_s, load=router,
                                route_drop_after_s=round(lags[i], 3))
            deletion = Deletion(report, in_flight, round(lags[i], 3))
            deletions.append(summarize(deletion))
            touched.append(recorded_requests(deletion))
            replacement = engine("--kind", "vllm")
            t = time.monotonic()
            stack.enter_context(replacement)  # starts it; waits for /health
            startups.append(time.monotonic() - t)
            if progress:
                progress(f"real roll {strategy.name}: replica {i + 1}/{REPLICAS} exited at "
                         f"{deletions[-1].engine_exited_at_s:.1f} s, replacement ready in {startups[-1]:.1f} s")
        wall_s = time.monotonic() - started
    return RealRoll(strategy.name, REPLICAS, wall_s, sum(d.held_idle_s for d in deletions),
                    sum(d.cut for d in deletions), sum(d.failed + d.rejected_new + d.refused + d.other for d in deletions),
                    tuple(startups), tuple(dict(engine_exited_at_s=d.engine_exited_at_s, held_idle_s=d.held_idle_s,
                                                cut=d.cut, completed=d.completed, route_lag_s=d.route_lag_s,
                                                sigterm_at_s=d.sigterm_at_s, last_completed_at_s=d.last_completed_at_s,
                                                requests=requests)
                                           for d, requests in zip(deletions, touched)))


def recorded_requests(deletion: Deletion) -> list[list]:
    """The requests the delete touched, as the router recorded them, relative to the delete:
    [arrived, asked duration, ended, outcome], in the order they were sent."""
    t0 = deletion.report.t0
    return [[round(r.started_at - t0, 3), round(r.duration_s, 3), round(r.ended_at - t0, 3), r.outcome.value]
            for r in sorted(deletion.records, key=lambda r: r.started_at) if r.ended_at >= t0]


def replayed(requests: list[list], timeout_s: float) -> list[model.Request]:
    """A real deletion's requests for the model: a completed one as it ran (arrived to answered), any
    other as the router asked it, for the model to decide its fate."""
    out = []
    for arrived, asked, ended, outcome in requests:
        if outcome == RequestOutcome.COMPLETED.value:
            out.append(model.Request(arrived, ended, gives_up_s=arrived + timeout_s))
        else:
            out.append(model.request(arrived, asked, timeout_s))
    return out


def _same_deletion(strategy: Strategy, load: Load, measured: Measured, rng: random.Random, real: RealRoll,
                   i: int, fresh: bool) -> model.Outcome:
    """Replica i's deletion as the roll had it: its router's lag, and its own requests (or, `fresh`,
    arrivals and durations drawn afresh); the timings drawn from the pools."""
    recorded = real.deletions[i]
    if "route_lag_s" not in recorded or "requests" not in recorded:
        raise ValueError("the real roll's deletions lack their lag and requests: rerun the fleet part")
    timings = replace(model.Timings.draw(measured, rng), route_lag_s=recorded["route_lag_s"])
    touched = model.requests(load, timings.route_lag_s, rng) if fresh else \
        replayed(recorded["requests"], load.request_timeout_s)
    return model.delete(strategy, touched, timings)


def _spread_over_seeds(real: RealRoll, strategy: Strategy, measured: Measured, seeds: int,
                       fresh: bool) -> tuple[list[float], list[float], list[int]]:
    load = matrix_load()
    walls, helds, losts = [], [], []
    for seed in range(seeds):
        rng = random.Random(zlib.crc32(f"real-roll/{seed}".encode()))
        walls_rng = random.Random(rng.random())
        totals = roll(Policy(real.replicas),
                      lambda i: _same_deletion(strategy, load, measured, rng, real, i, fresh),
                      lambda i: walls_rng.choice(real.startups_s))
        walls.append(totals.wall_s)
        helds.append(totals.held_idle_s)
        losts.append(totals.cut + totals.failed)
    return walls, helds, losts


def simulate_same(real: RealRoll, strategy: Strategy, measured: Measured, seeds: int = SIM_SEEDS) -> dict:
    """The simulation of the same roll, its own requests replayed: its spread over seeds, and whether
    the real one is inside it; and, beside it, the spread with the arrivals drawn afresh."""
    walls, helds, losts = _spread_over_seeds(real, strategy, measured, seeds, fresh=False)
    fresh_walls, fresh_helds, fresh_losts = _spread_over_seeds(real, strategy, measured, seeds, fresh=True)
    wall, held, lost = Spread.of(walls), Spread.of(helds), Spread.of(losts)
    return {"seeds": seeds, "wall_s": walls, "held_idle_s": helds, "lost": losts,
            "lost_within": lost.low <= real.cut + real.failed <= lost.high,
            "startup_median_s": statistics.median(real.startups_s),
            "wall_within": wall.low - MIN_SECONDS_DIFFERENCE <= real.wall_s <= wall.high + MIN_SECONDS_DIFFERENCE,
            "held_idle_within": held.low - MIN_SECONDS_DIFFERENCE <= real.held_idle_s <= held.high + MIN_SECONDS_DIFFERENCE,
            "fresh_arrivals": {"wall_s": fresh_walls, "held_idle_s": fresh_helds, "lost": fresh_losts}}
