"""The fleet's timing pools, from emulated deletions run one at a time.

In a fleet each Pod's deletion runs on its own node; the drain matrix runs eight at a time, and
there the hook's start-up and the engine's exit carry the other seven (~0.05-0.1 s a deletion,
every one of them later than alone). Summed over a roll of six that was enough to put a real roll
outside the simulation's range, once on each side as the machine was busier or quieter than the
drain matrix had been. So the fleet measures what it draws from here, alone, under the loads that
show each quantity, just before the real roll it is checked against:

- prestop's return after a quiet route wait (idle, steady short) and after the last request
  (mixed ≤20 s, whose long requests end past the route wait);
- vLLM's abort exit: SIGTERM to exit of an engine with nothing running (after prestop's drains;
  with requests running vLLM stays while their clients wait, which the model rules:
  bench/fleet/deletion.py);
- the `--shutdown-timeout` teardowns: SIGTERM to exit of an idle engine under the flag, and the last
  request's end to exit of one whose SIGTERM (no hook) found the steady short load running.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.drains.deletion import ROUTE_LAG_RANGE_S, delete_under_load, engine, prestop_argv, seed_of
from bench.drains.quality import SCENARIOS_BY_NAME, router_load
from bench.fleet.measured import Measured, MissingMeasurement, good, prestop_returns, teardowns_after_drain

FAMILY = "fleet pools"
GRACE_S = 30.0
# vLLM's flag in the KServe and llm-d settings; the teardown after the drain does not depend on N.
TIMEOUT_S = 40.0
# Deletions per kind (full, --quick): ~4 min and ~1 min, one after another.
REPEATS = (4, 1)


@dataclass(frozen=True)
class Kind:
    name: str
    scenario: str
    hook: str  # "prestop" or "none"
    shutdown_timeout: bool = False


KINDS = (
    Kind("prestop, idle", "idle", "prestop"),
    Kind("prestop, steady short", "steady short", "prestop"),
    Kind("prestop, mixed ≤20 s", "mixed ≤20 s", "prestop"),
    Kind("no hook, --shutdown-timeout, idle", "idle", "none", shutdown_timeout=True),
    Kind("no hook, --shutdown-timeout, steady short", "steady short", "none", shutdown_timeout=True),
)


def run_one(kind: Kind, repeat: int, prestop: Path) -> dict:
    flags = ["--kind", "vllm"] + (["--shutdown-timeout", f"{TIMEOUT_S:g}"] if kind.shutdown_timeout else [])
    seed = seed_of(FAMILY, kind.scenario, repeat)
    with engine(*flags) as vllm:
        assert vllm.port is not None  # set once started
        hook_argv = prestop_argv(prestop, GRACE_S, "--port", str(vllm.port), "--engine", "vllm") \
            if kind.hook == "prestop" else None
        deletion = delete_under_load(vllm, router_load(SCENARIOS_BY_NAME[kind.scenario], GRACE_S), seed, GRACE_S,
                                     hook_argv=hook_argv)
    return {"kind": kind.name, "repeat": repeat, "seed": seed, **deletion.summary()}


def measure(prestop: Path, quick: bool, progress: Callable[[str], None] | None = None) -> list[dict]:
    """Every kind's deletions, one at a time (nothing else of the bench running meanwhile)."""
    out = []
    started = time.monotonic()
    for kind in KINDS:
        for repeat in range(REPEATS[quick]):
            out.append(run_one(kind, repeat, prestop))
    if progress:
        progress(f"fleet: {len(out)} deletions for the pools, one at a time, in {time.monotonic() - started:.0f} s")
    return out


def _pool(name: str, values: list[float]) -> tuple[float, ...]:
    if not values:
        raise MissingMeasurement(f"the fleet's own deletions gave no {name}")
    return tuple(round(v, 3) for v in values)


def pools(deletions: list[dict]) -> Measured:
    """The pools out of measure()'s deletions; a deletion that was SIGKILLed or errored gives none."""
    ran = [d for d in deletions if good(d)]
    drained = [d for d in ran if d["kind"].startswith("prestop") and d["hook_outcome"] == "idle"]
    quiet, last = prestop_returns(drained)
    quiet_exit = [d["engine_exited_at_s"] - d["sigterm_at_s"] for d in drained]
    flagged = [d for d in ran if "--shutdown-timeout" in d["kind"]]
    teardown = [d["engine_exited_at_s"] - d["sigterm_at_s"] for d in flagged if d["kind"].endswith("idle")]
    after_drain = teardowns_after_drain(flagged)
    return Measured(
        abort_exit_lag_s=_pool("abort exit with nothing running", quiet_exit),
        teardown_idle_s=_pool("--shutdown-timeout teardown with nothing running", teardown),
        teardown_after_drain_s=_pool("--shutdown-timeout teardown after a drain of work", after_drain),
        prestop_quiet_return_s=_pool("return after a quiet route wait", quiet),
        prestop_last_return_s=_pool("return after the last request", last),
        route_lag_range_s=ROUTE_LAG_RANGE_S,
        sources=(f"{len(deletions)} emulated vLLM deletions run one at a time by this part (bench/fleet/solo.py): "
                 f"prestop's return after a quiet route wait from {len(quiet)}, after the last request from "
                 f"{len(last)}; the abort exit from {len(quiet_exit)}; the teardown with nothing running from "
                 f"{len(teardown)}, after a drain of work from {len(after_drain)}",),
    )
