"""`python -m bench.run --parts fleet`: the fleet simulation's grid, the mix sweep, and the real roll.

Every figure is a list over fixed seeds (the report gives median and range). Seed k draws the same
requests and timings for every strategy (paired, as the drain matrix's repeats are), so strategies
are compared seed by seed; each deletion's draw is seeded by (size, load, seed, replica).
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.fleet import calibration, real_roll, solo
from bench.fleet import deletion as model
from bench.fleet.loads import LOADS, LONG_SHARES, Load, mix, steady
from bench.fleet.measured import Measured, from_real_engine_matrix
from bench.fleet.rollout import Policy, roll, scale_down
from bench.fleet.strategies import STRATEGIES, STRATEGIES_BY_NAME, Strategy

SECONDS_PER_HOUR = 3600.0

# Full run / --quick: fleet sizes, and seeds per figure.
SIZES = ((100, 1000), (10, 50))
SEEDS = (10, 3)
# The mix sweep's fleet (the plot), and the real roll's strategies.
MIX_SIZE = (100, 20)
REAL_ROLL_STRATEGIES = (("prestop", "sleep 5"), ("prestop",))
REAL_ROLL_WARMUP_S = 5.0  # the replicas' load runs this long before the first delete (steady state)

# One accelerator per replica: accelerator-hours scale by a replica's count (8 for a 70B on H100s).
ACCELERATORS_PER_REPLICA = 1
# A scale-down halves the role.
SCALE_DOWN_TO = 0.5


@dataclass(frozen=True)
class StartUp:
    """A replacement's start-up to ready, drawn uniformly from a range."""

    name: str
    range_s: tuple[float, float]


# A GPU's model load: minutes (weights from local disk into HBM, the CUDA graphs captured); a
# parameter, not a measurement. The CPU data point: real vLLM 0.32's start-up to /health on 2 CPU
# cores, measured by the project's real-engine tier (SGLang 0.5.23's was 25–31 s).
STARTUPS = (StartUp("model load 4–6 min", (240.0, 360.0)), StartUp("vLLM CPU start-up 45–60 s", (45.0, 60.0)))


@dataclass(frozen=True)
class Rollout:
    name: str
    short: str  # the table's column
    policy: Callable[[int], Policy]
    startup: StartUp


ROLLOUTS = (
    Rollout("maxSurge 0, maxUnavailable 1", "surge 0, load 4–6 min", lambda n: Policy(n, 0, 1, 0), STARTUPS[0]),
    Rollout("maxSurge 0, maxUnavailable 1", "surge 0, CPU 45–60 s", lambda n: Policy(n, 0, 1, 0), STARTUPS[1]),
    Rollout("maxSurge 1, maxUnavailable 0, one spare accelerator", "surge 1, 1 spare, load 4–6 min",
            lambda n: Policy(n, 1, 0, 1), STARTUPS[0]),
    Rollout("maxSurge 1, maxUnavailable 0, two spare accelerators", "surge 1, 2 spare, load 4–6 min",
            lambda n: Policy(n, 1, 0, 2), STARTUPS[0]),
)


def _seeded(*names: object) -> random.Random:
    return random.Random(zlib.crc32("/".join(str(n) for n in names).encode()))


def deletion_outcomes(size: int, load: Load, seed: int, measured: Measured,
                      strategies: tuple[Strategy, ...]) -> dict[str, list[model.Outcome]]:
    """Each replica's deletion under every strategy, from one draw of its requests and timings. The
    requests (and the router's lag) come from a stream of their own, so two sets of pools (the
    emulator's, the real engine's) see the very same requests, seed by seed."""
    out: dict[str, list[model.Outcome]] = {s.name: [] for s in strategies}
    for i in range(size):
        arrivals = _seeded(size, load.name, seed, i, "requests")
        lag_s = arrivals.uniform(*measured.route_lag_range_s)
        touched = model.requests(load, lag_s, arrivals)
        timings = model.Timings.draw(measured, _seeded(size, load.name, seed, i, "timings"), route_lag_s=lag_s)
        for strategy in strategies:
            out[strategy.name].append(model.delete(strategy, touched, timings))
    return out


def _figures(totals: list) -> dict:
    return {"wall_s": [t.wall_s for t in totals],
            "held_idle_h": [t.held_idle_s * ACCELERATORS_PER_REPLICA / SECONDS_PER_HOUR for t in totals],
            "cut": [t.cut for t in totals], "failed": [t.failed for t in totals],
            "sigkilled": [t.sigkilled for t in totals]}


def grid(sizes: tuple[int, ...], seeds: int, measured: Measured, progress: Callable[[str], None] | None) -> dict:
    rollouts, scale_downs = [], []
    for size in sizes:
        for load in LOADS:
            per_seed = [deletion_outcomes(size, load, k, measured, STRATEGIES) for k in range(seeds)]
            for strategy in STRATEGIES:
                for r in ROLLOUTS:
                    totals = []
                    for k in range(seeds):
                        outcomes = per_seed[k][strategy.name]
                        start_rng = _seeded("startup", size, r.name, r.startup.name, k)
                        totals.append(roll(r.policy(size), outcomes.__getitem__,
                                           lambda i: start_rng.uniform(*r.startup.range_s)))
                    rollouts.append({"size": size, "load": load.name, "strategy": strategy.name,
                                     "rollout": r.name, "startup": r.startup.name, **_figures(totals)})
                to = int(size * SCALE_DOWN_TO)
                totals = [scale_down(size, to, per_seed[k][strategy.name].__getitem__) for k in range(seeds)]
                scale_downs.append({"size": size, "to": to, "load": load.name, "strategy": strategy.name,
                                    **_figures(totals)})
            if progress:
                progress(f"fleet: {size} replicas, {load.name}: {len(STRATEGIES)} strategies × {seeds} seeds")
    return {"rollouts": rollouts, "scale_downs": scale_downs}


def mix_sweep(size: int, seeds: int, measured: Measured) -> list[dict]:
    """Held accelerator-hours of one rollout against the share of long generations (the plot)."""
    rows = []
    rollout = ROLLOUTS[0]
    for share in LONG_SHARES:
        load = steady(f"long share {share:g}", mix(share))
        per_seed = [deletion_outcomes(size, load, k, measured, STRATEGIES) for k in range(seeds)]
        for strategy in STRATEGIES:
            totals = []
            for k in range(seeds):
                start_rng = _seeded("startup", size, rollout.name, rollout.startup.name, k)
                totals.append(roll(rollout.policy(size), per_seed[k][strategy.name].__getitem__,
                                   lambda i: start_rng.uniform(*rollout.startup.range_s)))
            rows.append({"long_share": share, "rate_per_s": load.rate_per_s, "strategy": strategy.name,
                         **_figures(totals)})
    return rows


def on_real_engine_timings(results: dict, measured: Measured, size: int, seeds: int) -> dict | None:
    """The first fleet size's grid again with the real-engine tier's real vLLM timings where it has
    them (the emulator's elsewhere); None when results.json holds no real-engine matrix."""
    if not results.get("real_engine_matrix", {}).get("cells"):
        return None
    real = from_real_engine_matrix(results, measured)
    return {"size": size, "measured": real.as_dict(), **grid((size,), seeds, real, None)}


def real_rolls(names: tuple[str, ...], prestop: Path, measured: Measured,
               progress: Callable[[str], None] | None) -> list[dict]:
    out = []
    for name in names:
        strategy = STRATEGIES_BY_NAME[name]
        real = real_roll.roll_for_real(strategy, prestop, zlib.crc32(f"real-roll/{name}".encode()),
                                       REAL_ROLL_WARMUP_S, progress)
        out.append({"real": real.as_dict(), "simulated": real_roll.simulate_same(real, strategy, measured)})
    return out


def settings(quick: bool) -> dict:
    """What the figures were computed with, for the report (and for anyone rereading results.json)."""
    sizes, seeds = SIZES[quick], SEEDS[quick]
    return {
        "quick": quick, "sizes": list(sizes), "seeds": seeds, "mix_size": MIX_SIZE[quick],
        "accelerators_per_replica": ACCELERATORS_PER_REPLICA, "scale_down_to": SCALE_DOWN_TO,
        "loads": [{"name": load.name, "rate_per_s": load.rate_per_s, "describe": load.describe(),
                   "durations": load.durations_text()} for load in LOADS],
        "strategies": [{"name": s.name, "grace_s": s.grace_s, "hook": s.hook.value, "sleep_s": s.sleep_s,
                        "shutdown_timeout_s": s.shutdown_timeout_s, "provenance": s.provenance}
                       for s in STRATEGIES],
        "rollouts": [{"name": r.name, "short": r.short, "startup": r.startup.name, "startup_range_s": list(r.startup.range_s)}
                     for r in ROLLOUTS],
    }


def measure(results: dict, matrix_pools: Measured, prestop: Path, quick: bool,
            progress: Callable[[str], None] | None = None) -> dict:
    """The pools from this part's own deletions (alone), then the grid, the sweep, the real roll
    (right after the pools, on the machine as they found it) and the check against every setting."""
    sizes, seeds = SIZES[quick], SEEDS[quick]
    pool_deletions = solo.measure(prestop, quick, progress)
    measured = solo.pools(pool_deletions)
    result = {
        "settings": settings(quick),
        "measured": measured.as_dict(),
        "matrix_pools": matrix_pools.as_dict(),
        "pool_deletions": pool_deletions,
        **grid(sizes, seeds, measured, progress),
        "mix": mix_sweep(MIX_SIZE[quick], seeds, measured),
        "real_engine": on_real_engine_timings(results, measured, sizes[0], seeds),
    }
    result["real_roll"] = real_rolls(REAL_ROLL_STRATEGIES[quick], prestop, measured, progress)
    deletions = calibration.measure_unmeasured(prestop, quick, progress)
    result["deletions"] = deletions
    result["calibration"] = calibration.compare(results, deletions, measured)
    return result
