"""The preStop strategies a fleet is rolled with: what each does at a delete, and where its figures come from.

Each is a grace G, a preStop (none, the native sleep, or prestop) and the engine's SIGTERM mode
(vLLM's default abort, or a `--shutdown-timeout` drain). The deletion model (deletion.py) is the
same for all; `measured` says whether results.json holds real deletions of exactly this setting
(then the report can set the model against them), or whether the setting is a composition of the
measured behaviours, "modelled, not measured".
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
class Strategy:
    name: str
    grace_s: float
    hook: Hook
    sleep_s: float = 0.0
    shutdown_timeout_s: float | None = None  # vLLM's --shutdown-timeout; None: abort on SIGTERM
    measured: str | None = None  # the results.json cells of this very setting; None: modelled, not measured

    def __post_init__(self) -> None:
        if self.grace_s <= 0 or self.sleep_s < 0 or (self.shutdown_timeout_s is not None and self.shutdown_timeout_s < 0):
            raise ValueError(f"{self.name}: grace must be positive, sleep and --shutdown-timeout not negative")
        if (self.hook is Hook.SLEEP) != (self.sleep_s > 0):
            raise ValueError(f"{self.name}: a sleep hook needs a positive sleep, and only it has one")

    @property
    def provenance(self) -> str:
        return f"measured ({self.measured})" if self.measured else "modelled, not measured"


_G = DEFAULT_GRACE_S
STRATEGIES: tuple[Strategy, ...] = (
    Strategy("no hook", _G, Hook.NONE, measured="drain matrix, G = 30"),
    Strategy("sleep 5", _G, Hook.SLEEP, sleep_s=5.0, measured="drain matrix, G = 30"),
    Strategy("sleep G−5", _G, Hook.SLEEP, sleep_s=_G - 5.0, measured="drain matrix, G = 30"),
    Strategy("KServe LLMInferenceService (sleep 15, G = 60, --shutdown-timeout 40)", 60.0, Hook.SLEEP,
             sleep_s=15.0, shutdown_timeout_s=40.0, measured="shutdown-timeout family, G = 60"),
    Strategy("llm-d guide (sleep 15, G = 75, --shutdown-timeout 45)", 75.0, Hook.SLEEP, sleep_s=15.0,
             shutdown_timeout_s=45.0),
    Strategy("Inference Extension manifest (sleep 30, G = 130)", 130.0, Hook.SLEEP, sleep_s=30.0),
    Strategy("prestop", _G, Hook.PRESTOP, measured="drain matrix, G = 30"),
    Strategy("prestop, G = 130", 130.0, Hook.PRESTOP),
    Strategy("prestop + --shutdown-timeout 40 (G = 60)", 60.0, Hook.PRESTOP, shutdown_timeout_s=40.0,
             measured="shutdown-timeout family, G = 60"),
)
STRATEGIES_BY_NAME = {s.name: s for s in STRATEGIES}
