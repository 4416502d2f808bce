"""The preStop strategies a fleet is rolled with: what each does at a delete, and where its figures come from.

Each is a grace G, a preStop (none, the native sleep, or prestop) and the engine's SIGTERM mode
(vLLM's default abort, or a `--shutdown-timeout` drain). The deletion model (deletion.py) is the
same for all; `measured` says where results.json holds real deletions of exactly this setting; the
fleet part deletes the others for real itself (calibration.py), so every setting's model is set
against real deletions of it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Hook(enum.Enum):
    NONE = "none"
    SLEEP = "sleep"
    PRESTOP = "prestop"


# The operator's default grace, and the grace the drain matrix runs at.
DEFAULT_GRACE_S = 30.0


@dataclass(frozen=True)
class MeasuredAs:
    """Where results.json holds real deletions of a setting: the part, and the strategy's name there."""

    part: str  # "drain" (the drain matrix) or "configurations" (its shutdown-timeout family)
    strategy: str

    def describe(self) -> str:
        return {"drain": "the drain matrix", "configurations": "the shutdown-timeout family"}[self.part]


@dataclass(frozen=True)
class Strategy:
    name: str
    grace_s: float
    hook: Hook
    sleep_s: float = 0.0
    shutdown_timeout_s: float | None = None  # vLLM's --shutdown-timeout; None: abort on SIGTERM
    measured: MeasuredAs | None = None  # the results.json cells of this very setting; None: measured by the fleet part

    def __post_init__(self) -> None:
        if self.grace_s <= 0 or self.sleep_s < 0 or (self.shutdown_timeout_s is not None and self.shutdown_timeout_s < 0):
            raise ValueError(f"{self.name}: grace must be positive, sleep and --shutdown-timeout not negative")
        if (self.hook is Hook.SLEEP) != (self.sleep_s > 0):
            raise ValueError(f"{self.name}: a sleep hook needs a positive sleep, and only it has one")

    @property
    def provenance(self) -> str:
        where = self.measured.describe() if self.measured else "the fleet part (bench/fleet/calibration.py)"
        return f"deleted for real in {where}, G = {self.grace_s:g}"


_G = DEFAULT_GRACE_S
STRATEGIES: tuple[Strategy, ...] = (
    Strategy("no hook", _G, Hook.NONE, measured=MeasuredAs("drain", "no hook")),
    Strategy("sleep 5", _G, Hook.SLEEP, sleep_s=5.0, measured=MeasuredAs("drain", "sleep 5")),
    Strategy("sleep G−5", _G, Hook.SLEEP, sleep_s=_G - 5.0, measured=MeasuredAs("drain", "sleep G−5")),
    Strategy("KServe LLMInferenceService (sleep 15, G = 60, --shutdown-timeout 40)", 60.0, Hook.SLEEP,
             sleep_s=15.0, shutdown_timeout_s=40.0,
             measured=MeasuredAs("configurations", "sleep 15 + --shutdown-timeout 40 (KServe)")),
    Strategy("llm-d guide (sleep 15, G = 75, --shutdown-timeout 45)", 75.0, Hook.SLEEP, sleep_s=15.0,
             shutdown_timeout_s=45.0),
    Strategy("Inference Extension manifest (sleep 30, G = 130)", 130.0, Hook.SLEEP, sleep_s=30.0),
    Strategy("prestop", _G, Hook.PRESTOP, measured=MeasuredAs("drain", "prestop")),
    Strategy("prestop, G = 130", 130.0, Hook.PRESTOP),
    # Deleted by the fleet part, though the shutdown-timeout family holds it: that family runs 24
    # deletions at once, and there its idle teardown came out 0.6-0.9 s slower than alone.
    Strategy("prestop + --shutdown-timeout 40 (G = 60)", 60.0, Hook.PRESTOP, shutdown_timeout_s=40.0),
)
STRATEGIES_BY_NAME = {s.name: s for s in STRATEGIES}
