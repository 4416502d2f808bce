"""The simulation's honesty check: a small fleet of emulated vLLM replicas rolled for real.

Six emulated engines (real processes) each take the drain matrix's steady short load from their own
router (emulation.load.LoadGenerator, as every bench deletion does); then, one at a time (maxSurge 0,
maxUnavailable 1, no spare accelerator), kubelet's emulation deletes the next old replica with the
strategy's preStop, and once its engine has exited the replacement engine is started and waited
ready before the next delete. The measured rollout time (first delete to last replacement ready)
and the held idle summed over the six deletions are then set against the simulation of the same
fleet, the same load and the replacements' measured start-ups.
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
from emulation.kubelet import delete_pod
from emulation.load import LoadGenerator

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
        deletions, startups = [], []
        for i, (old, router) in enumerate(zip(olds, routers)):
            assert old.port is not None  # started
            in_flight = router.tally().in_flight
            hook_argv, sleep_s = _hook(strategy, prestop, old.port)
            report = delete_pod(old, hook_argv, strategy.grace_s, hook_sleep_s=sleep_s, load=router,
                                route_drop_after_s=round(lags[i], 3))
            deletions.append(summarize(Deletion(report, in_flight, round(lags[i], 3))))
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
                                                cut=d.cut, completed=d.completed) for d in deletions))


def _same_deletion(strategy: Strategy, load: Load, measured: Measured, rng: random.Random, real: RealRoll,
                   i: int) -> model.Outcome:
    """Replica i's deletion as the roll had it: its router's lag is the one the real roll drew (six
    draws decide how late the last requests end, so a roll whose lags came out long by chance is no
    test of the rest), the arrivals, durations and timings drawn afresh."""
    timings = model.Timings.draw(measured, rng)
    lag_s = real.deletions[i].get("route_lag_s")
    if lag_s is not None:
        timings = replace(timings, route_lag_s=lag_s)
    return model.delete(strategy, model.requests(load, timings.route_lag_s, rng), timings)


def simulate_same(real: RealRoll, strategy: Strategy, measured: Measured, seeds: int = SIM_SEEDS) -> dict:
    """The simulation of the same roll: its spread over seeds, and whether the real one is inside it."""
    load = matrix_load()
    walls, helds, losts = [], [], []
    for seed in range(seeds):
        rng = random.Random(zlib.crc32(f"real-roll/{seed}".encode()))
        walls_rng = random.Random(rng.random())
        totals = roll(Policy(real.replicas), lambda i: _same_deletion(strategy, load, measured, rng, real, i),
                      lambda i: walls_rng.choice(real.startups_s))
        walls.append(totals.wall_s)
        helds.append(totals.held_idle_s)
        losts.append(totals.cut + totals.failed)
    wall, held, lost = Spread.of(walls), Spread.of(helds), Spread.of(losts)
    return {"seeds": seeds, "wall_s": walls, "held_idle_s": helds, "lost": losts,
            "lost_within": lost.low <= real.cut + real.failed <= lost.high,
            "startup_median_s": statistics.median(real.startups_s),
            "wall_within": wall.low <= real.wall_s <= wall.high,
            "held_idle_within": held.low <= real.held_idle_s <= held.high}
