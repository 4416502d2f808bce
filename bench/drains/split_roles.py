"""SGLang prefill and decode servers deleted: when does the hook's role reserve take SIGKILL away?

An SGLang prefill or decode server keeps serving after SIGTERM (its running work and new requests
alike), checks its queue 4 s after the signal and every 5 s after that, and once the queue is empty
waits 15 s for its split-role scheduler before it exits (emulation/shutdown.py; the spec measured a
decoder leaving 26 s and a prefiller 28 s after the delete at G = 30). So even with its work done
it needs 19–24 s after SIGTERM, and a hook that returns after G − 20 gets it killed at G. prestop
returns by G − 20 for these roles (modeldrain/hook/decision.py); returning earlier cuts nothing, since the
engine keeps serving.

Strategies: no hook; Kubernetes' `sleep` for G − 5 (idle and never served only: it is killed
whatever the load);
prestop as deployed, which learns the role from the exposition's engine_type label and takes the
20 s reserve; prestop `--exit-reserve 5`, the reserve every engine got before.

Scenarios: idle (never served, and served before: a decode server that has served nothing has no
scheduler gauges, so no hook can read it idle); the last work ending G − 19 … G − 17 after the delete, where the reserve decides;
and ending G − 15 … G − 6, where nothing saves the exit (the engine's last check finds the queue
empty too late for its 15 s wait). The work is three requests sent before the delete, drawn to end
in that window, among 2 req/s of short requests until the router drops the replica.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.drains.deletion import IDLE, RouterLoad, TailRequests, delete_under_load, engine, prestop_argv, seed_of
from emulation.load import SHORT_REQUESTS

FAMILY = "split roles"
ROLES = ("prefill", "decode")
GRACES_S = (30.0, 45.0)
QUICK_ROLES = ("decode",)
QUICK_GRACES_S = (30.0,)

# The reserve prestop used for every engine before the role reserve (modeldrain/hook/constants.py EXIT_RESERVE_S).
OLD_EXIT_RESERVE_S = 5.0

WARMUP_S = 3.0

# Repeats per cell (full run, --quick): the outcomes here are set by the engine's and kubelet's
# timers, and two paired repeats are what the tie rule needs; the cells are long (up to G each).
REPEATS = (2, 1)


class Strategy(enum.Enum):
    NO_HOOK = "no hook"
    SLEEP_G_MINUS_5 = "sleep G−5"
    PRESTOP = "prestop"
    PRESTOP_RESERVE_5 = "prestop --exit-reserve 5"

    def hook_argv(self, prestop: Path, port: int, grace_s: float) -> list[str] | None:
        if self not in (Strategy.PRESTOP, Strategy.PRESTOP_RESERVE_5):
            return None
        flags = ["--port", str(port), "--engine", "sglang"]
        if self is Strategy.PRESTOP_RESERVE_5:
            flags += ["--exit-reserve", f"{OLD_EXIT_RESERVE_S:g}"]
        return prestop_argv(prestop, grace_s, *flags)

    def sleep_s(self, grace_s: float) -> float | None:
        return grace_s - 5.0 if self is Strategy.SLEEP_G_MINUS_5 else None


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    load: Callable[[float], RouterLoad]  # grace -> load
    strategies: tuple[Strategy, ...]


def _work_ending(first_s: float, last_s: float) -> Callable[[float], RouterLoad]:
    """Three requests ending G − first … G − last after the delete, among 2 req/s of short ones."""
    return lambda g: RouterLoad(WARMUP_S, rate_per_s=2.0, durations=SHORT_REQUESTS,
                                tail=TailRequests(3, (g - first_s, g - last_s)))


# Two requests that ended 2–3 s before the delete: the engine has served, and is idle.
_SERVED_BEFORE = RouterLoad(WARMUP_S, tail=TailRequests(2, (-3.0, -2.0)))

_BANDS = (Strategy.NO_HOOK, Strategy.PRESTOP, Strategy.PRESTOP_RESERVE_5)
SCENARIOS: tuple[Scenario, ...] = (
    Scenario("idle, never served", "no requests since the engine started (a decode server then has no scheduler "
             "gauges at all, as the real one: the hook cannot read it idle)", lambda g: IDLE, tuple(Strategy)),
    Scenario("idle, served before", "2 requests that ended 2–3 s before the delete, none after",
             lambda g: _SERVED_BEFORE, _BANDS),
    Scenario("work ends G−19…G−17", "3 requests ending G−19…G−17 s after the delete, among 2 req/s of 0.5–3 s",
             _work_ending(19.0, 17.0), _BANDS),
    Scenario("work ends G−15…G−6", "3 requests ending G−15…G−6 s after the delete, among 2 req/s of 0.5–3 s",
             _work_ending(15.0, 6.0), _BANDS),
)
QUICK_SCENARIOS = ("idle, never served", "work ends G−19…G−17")


@dataclass(frozen=True)
class Cell:
    role: str
    grace_s: float
    scenario: Scenario
    strategy: Strategy
    repeat: int

    def expected_s(self) -> float:
        if self.strategy is Strategy.NO_HOOK and self.scenario.name.startswith("idle"):
            deletion = 19.0
        else:
            deletion = self.grace_s
        return self.scenario.load(self.grace_s).warmup_s + deletion

    def key(self) -> dict:
        return {"family": FAMILY, "role": self.role, "grace_s": self.grace_s, "scenario": self.scenario.name,
                "strategy": self.strategy.value, "repeat": self.repeat}


def cells(repeats: int | None = None, quick: bool = False) -> list[Cell]:
    repeats = repeats or REPEATS[quick]
    roles = QUICK_ROLES if quick else ROLES
    graces = QUICK_GRACES_S if quick else GRACES_S
    scenarios = [s for s in SCENARIOS if not quick or s.name in QUICK_SCENARIOS]
    return [Cell(role, g, sc, st, r) for role in roles for g in graces for sc in scenarios for st in sc.strategies
            for r in range(repeats)]


def run(cell: Cell, prestop: Path) -> dict:
    seed = seed_of(FAMILY, cell.scenario.name, cell.repeat)
    with engine("--kind", "sglang", "--role", cell.role) as sglang:
        assert sglang.port is not None  # set once started
        deletion = delete_under_load(sglang, cell.scenario.load(cell.grace_s), seed, cell.grace_s,
                                     hook_argv=cell.strategy.hook_argv(prestop, sglang.port, cell.grace_s),
                                     hook_sleep_s=cell.strategy.sleep_s(cell.grace_s))
    return {"seed": seed, **deletion.summary()}
