"""The drain's decisions as pure functions of the plan, the reads so far and the clock.

No I/O and no clock of its own: the loop in drain.py passes `now`, so every rule here is
unit-tested with an injected clock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hook.constants import IDLE_READS_REQUIRED
from hook.exitcodes import ExitCode
from hook.outcome import Read


class DrainOutcome(enum.Enum):
    IDLE = "idle"  # two consecutive complete idle reads: exit 0
    DEADLINE = "deadline"  # G - 5 reached with work in flight or unknown: exit 10
    UNMEASURABLE = "unmeasurable"  # refused / HTTP error / TLS failure: exit 11

    @property
    def exit_code(self) -> ExitCode:
        return _EXIT_CODES[self]


_EXIT_CODES = {
    DrainOutcome.IDLE: ExitCode.OK,
    DrainOutcome.DEADLINE: ExitCode.DEADLINE,
    DrainOutcome.UNMEASURABLE: ExitCode.UNMEASURABLE,
}


@dataclass(frozen=True)
class DrainPlan:
    """The drain's timeline on the monotonic clock, fixed at start."""

    started_at: float  # when the hook was exec'd (kubelet's grace clock starts there)
    first_read_at: float  # the end of the route wait
    deadline_at: float  # started_at + G - exit reserve
    interval_s: float
    read_timeout_s: float

    @classmethod
    def build(cls, *, started_at: float, grace_s: float, route_wait_s: float, exit_reserve_s: float,
              interval_s: float, read_timeout_s: float) -> "DrainPlan":
        deadline_at = started_at + max(0.0, grace_s - exit_reserve_s)
        return cls(
            started_at=started_at,
            first_read_at=min(started_at + route_wait_s, deadline_at),
            deadline_at=deadline_at,
            interval_s=interval_s,
            read_timeout_s=read_timeout_s,
        )


@dataclass(frozen=True)
class DrainState:
    reads: int = 0
    idle_streak: int = 0
    last_read: Read | None = None


@dataclass(frozen=True)
class ReadAt:
    """Next step: start a read at `at`, bounded by `timeout_s` so it ends by the deadline."""

    at: float
    timeout_s: float


@dataclass(frozen=True)
class Finish:
    outcome: DrainOutcome
    reason: str
    at: float | None = None  # when to return: the deadline for DEADLINE, now otherwise


def next_step(plan: DrainPlan, state: DrainState, now: float) -> ReadAt | Finish:
    """When to read next, or that the deadline comes first."""
    if state.last_read is None:
        due_at = plan.first_read_at
    else:
        due_at = state.last_read.started_at + plan.interval_s
    at = max(now, due_at)
    if at >= plan.deadline_at:
        return Finish(DrainOutcome.DEADLINE, _deadline_reason(state), at=plan.deadline_at)
    return ReadAt(at=at, timeout_s=min(plan.read_timeout_s, plan.deadline_at - at))


def after_read(state: DrainState, read: Read) -> tuple[DrainState, Finish | None]:
    """Fold one read into the state; finish on a read that ends the drain or on enough idle reads."""
    streak = state.idle_streak + 1 if read.outcome.is_idle else 0
    new = DrainState(reads=state.reads + 1, idle_streak=streak, last_read=read)
    if read.outcome.ends_drain:
        return new, Finish(DrainOutcome.UNMEASURABLE, f"nothing to measure: {read.detail}")
    if streak >= IDLE_READS_REQUIRED:
        return new, Finish(DrainOutcome.IDLE, f"{streak} consecutive complete reads summed to zero")
    return new, None


def _deadline_reason(state: DrainState) -> str:
    last = state.last_read
    if last is None:
        return "deadline reached before the first read"
    if last.in_flight is not None and last.complete:
        return f"deadline reached with {last.in_flight:g} in flight"
    return f"deadline reached with work unknown (last read {last.outcome.value}: {last.detail})"
