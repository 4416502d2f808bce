"""What users run instead of a drain hook, besides fixed sleeps: a short sleep and vLLM's own drain.

vLLM's `--shutdown-timeout N` makes SIGTERM a drain: running requests finish, a request arriving
meanwhile gets HTTP 500 ("cannot schedule new futures after shutdown"), requests still running at
N get HTTP 500 too, then ~7 s of teardown (emulation/constants.py, measured). Two settings seen in
the field, each against prestop on the same engine and on vLLM's default engine (abort on SIGTERM):

- `sleep 5` + `--shutdown-timeout 20`, G = 30;
- KServe's LLMInferenceService: preStop `sleep 15`, terminationGracePeriodSeconds 60, and
  `--shutdown-timeout` = G − 15 − 5 = 40 (vLLM >= 0.18).

Scenarios: idle; mixed ≤20 s (the drain matrix's load); a slow router, which keeps sending for
5–10 s after the delete (longer than `sleep 5`: its late requests reach a draining engine); and
long > G − 5 (three requests no strategy can finish, among short ones).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.drains.deletion import IDLE, RouterLoad, TailRequests, delete_under_load, engine, prestop_argv, seed_of
from emulation.load import MIXED_REQUESTS, SHORT_REQUESTS

FAMILY = "shutdown timeout"


# Repeats per cell (full run, --quick): paired by seed, enough for a spread.
REPEATS = (3, 1)


class Strategy(enum.Enum):
    SLEEP_5_TIMEOUT_20 = "sleep 5 + --shutdown-timeout 20"
    KSERVE = "sleep 15 + --shutdown-timeout 40 (KServe)"
    PRESTOP_TIMEOUT_20 = "prestop + --shutdown-timeout 20"
    PRESTOP_TIMEOUT_40 = "prestop + --shutdown-timeout 40"
    PRESTOP = "prestop, vLLM default (abort)"

    @property
    def shutdown_timeout_s(self) -> float | None:
        return {Strategy.SLEEP_5_TIMEOUT_20: 20.0, Strategy.PRESTOP_TIMEOUT_20: 20.0,
                Strategy.KSERVE: 40.0, Strategy.PRESTOP_TIMEOUT_40: 40.0}.get(self)

    @property
    def sleep_s(self) -> float | None:
        return {Strategy.SLEEP_5_TIMEOUT_20: 5.0, Strategy.KSERVE: 15.0}.get(self)

    def engine_args(self) -> list[str]:
        args = ["--kind", "vllm"]
        if self.shutdown_timeout_s is not None:
            args += ["--shutdown-timeout", f"{self.shutdown_timeout_s:g}"]
        return args

    def hook_argv(self, prestop: Path, port: int, grace_s: float) -> list[str] | None:
        if self.sleep_s is not None:
            return None
        return prestop_argv(prestop, grace_s, "--port", str(port), "--engine", "vllm")


# The grace each setting is run at, and the strategies compared there (the user's setting first).
SETTINGS: tuple[tuple[float, tuple[Strategy, ...]], ...] = (
    (30.0, (Strategy.SLEEP_5_TIMEOUT_20, Strategy.PRESTOP_TIMEOUT_20, Strategy.PRESTOP)),
    (60.0, (Strategy.KSERVE, Strategy.PRESTOP_TIMEOUT_40, Strategy.PRESTOP)),
)

# Sent this long before the delete and at least G long, a long request ends after G − 5.
LONG_WARMUP_S = 5.0


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    load: Callable[[float], RouterLoad]  # grace -> load


def _long_load(grace_s: float) -> RouterLoad:
    return RouterLoad(LONG_WARMUP_S, rate_per_s=3.0, durations=SHORT_REQUESTS,
                      tail=TailRequests(3, (grace_s - LONG_WARMUP_S, 2 * grace_s - LONG_WARMUP_S)))


_MIXED = RouterLoad(10.0, rate_per_s=2.0, durations=MIXED_REQUESTS)
# Longer than `sleep 5`, shorter than `sleep 15`: the router's late requests meet the engine draining.
_SLOW_ROUTER = RouterLoad(5.0, rate_per_s=4.0, durations=SHORT_REQUESTS, route_lag_range_s=(5.0, 10.0))
SCENARIOS: tuple[Scenario, ...] = (
    Scenario("idle", "no requests at all", lambda g: IDLE),
    Scenario("mixed ≤20 s", "2 req/s, 80% 0.5–3 s, 20% 3–20 s; router lag 0.5–2 s", lambda g: _MIXED),
    Scenario("slow router", "4 req/s of 0.5–3 s; the router keeps sending for 5–10 s after the delete",
             lambda g: _SLOW_ROUTER),
    Scenario("long > G−5", "3 requests of G–2G s (none can finish by G−5) among 3 req/s of 0.5–3 s", _long_load),
)
QUICK_SCENARIOS = ("slow router",)
QUICK_GRACES_S = (30.0,)


@dataclass(frozen=True)
class Cell:
    grace_s: float
    scenario: Scenario
    strategy: Strategy
    repeat: int

    def expected_s(self) -> float:
        load = self.scenario.load(self.grace_s)
        if self.scenario.name == "long > G−5":
            return load.warmup_s + self.grace_s
        return load.warmup_s + (self.strategy.sleep_s or 8.0) + 10.0

    def key(self) -> dict:
        return {"family": FAMILY, "grace_s": self.grace_s, "scenario": self.scenario.name,
                "strategy": self.strategy.value, "repeat": self.repeat}


def cells(repeats: int | None = None, quick: bool = False) -> list[Cell]:
    repeats = repeats or REPEATS[quick]
    out = []
    for grace_s, strategies in SETTINGS:
        if quick and grace_s not in QUICK_GRACES_S:
            continue
        for scenario in SCENARIOS:
            if quick and scenario.name not in QUICK_SCENARIOS:
                continue
            out += [Cell(grace_s, scenario, st, r) for st in strategies for r in range(repeats)]
    return out


def run(cell: Cell, prestop: Path) -> dict:
    seed = seed_of(FAMILY, cell.scenario.name, cell.repeat)
    with engine(*cell.strategy.engine_args()) as vllm:
        assert vllm.port is not None  # set once started
        deletion = delete_under_load(vllm, cell.scenario.load(cell.grace_s), seed, cell.grace_s,
                                     hook_argv=cell.strategy.hook_argv(prestop, vllm.port, cell.grace_s),
                                     hook_sleep_s=cell.strategy.sleep_s)
    return {"seed": seed, **deletion.summary()}
