"""How long prestop holds an engine after its last request: the lag from that request's end to the
hook's return, at the new busy cadence (`--busy-interval 0.25`) and the old one (`--busy-interval 1`).

The rule is the same at both: two consecutive complete zero reads, the second at least 1 s after
the first. What changes is how soon the first zero is read: while work is in flight, the next read
comes `--busy-interval` after the last. So the lag is about U(0, busy interval) + 1 s + one read.

Busy: a vLLM engine under 4 req/s of short requests until the router drops it (0.5–2 s after the
delete), plus three requests drawn to end 6–12 s after the delete, after the 5 s route wait, so the
poll's cadence (not the route wait) decides when the last end is seen. Many repeats, paired by seed.
Idle: the hook's return on a replica with nothing to do (the route wait, then two idle reads).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from bench.drains.deletion import IDLE, RouterLoad, TailRequests, delete_under_load, engine, prestop_argv, seed_of
from emulation.load import SHORT_REQUESTS

FAMILY = "return lag"
GRACE_S = 30.0
REPEATS = (20, 3)  # busy deletions per cadence: full run, --quick
IDLE_REPEATS = (5, 1)

BUSY = RouterLoad(5.0, rate_per_s=4.0, durations=SHORT_REQUESTS, tail=TailRequests(3, (6.0, 12.0)))


class Cadence(enum.Enum):
    NEW = "--busy-interval 0.25"
    OLD = "--busy-interval 1"

    @property
    def busy_interval_s(self) -> float:
        return 0.25 if self is Cadence.NEW else 1.0


@dataclass(frozen=True)
class Cell:
    scenario: str  # "busy" or "idle"
    cadence: Cadence
    repeat: int

    @property
    def load(self) -> RouterLoad:
        return BUSY if self.scenario == "busy" else IDLE

    def expected_s(self) -> float:
        return self.load.warmup_s + (16.0 if self.scenario == "busy" else 9.0)

    def key(self) -> dict:
        return {"family": FAMILY, "grace_s": GRACE_S, "scenario": self.scenario, "strategy": self.cadence.value,
                "repeat": self.repeat}


def cells(repeats: int | None = None, quick: bool = False) -> list[Cell]:
    busy = [Cell("busy", c, r) for c in Cadence for r in range(repeats or REPEATS[quick])]
    return busy + [Cell("idle", Cadence.NEW, r) for r in range(IDLE_REPEATS[quick])]


def run(cell: Cell, prestop: Path) -> dict:
    seed = seed_of(FAMILY, cell.scenario, cell.repeat)
    with engine("--kind", "vllm") as vllm:
        assert vllm.port is not None  # set once started
        argv = prestop_argv(prestop, GRACE_S, "--port", str(vllm.port), "--engine", "vllm",
                            "--busy-interval", f"{cell.cadence.busy_interval_s:g}")
        deletion = delete_under_load(vllm, cell.load, seed, GRACE_S, hook_argv=argv)
    summary = deletion.summary()
    returned, last = summary["hook_returned_at_s"], summary["last_completed_at_s"]
    lag = round(returned - last, 3) if returned is not None and last is not None else None
    return {"seed": seed, "lag_s": lag, **summary}
