"""The drain's decisions as pure functions of the plan, the reads so far and the clock.

No I/O and no clock of its own: the loop in drain.py passes `now`, so every rule here is
unit-tested with an injected clock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from modeldrain.hook.constants import (
    BUSY_READ_ENGINE_SHARE,
    EXIT_RESERVE_S,
    IDLE_CONFIRM_GAP_S,
    IDLE_READS_REQUIRED,
    LOAD_BUSY_POLL_INTERVAL_S,
    LOAD_COUNTED_CONFIRM_GAP_S,
    SPLIT_ROLE_EXIT_RESERVE_S,
)
from modeldrain.hook.exitcodes import ExitCode
from modeldrain.hook.gauges import Role
from modeldrain.hook.outcome import Read, ReadOutcome

__all__ = [
    "DrainOutcome", "DrainPlan", "DrainState", "ExitReserve", "Finish", "ReadAt", "after_read", "busy_spacing_s",
    "exit_reserve_for", "next_step", "reserve_after_read",
]


class DrainOutcome(enum.Enum):
    IDLE = "idle"  # two consecutive complete idle reads: exit 0
    DEADLINE = "deadline"  # G - exit reserve reached with work in flight or unknown: exit 10
    UNMEASURABLE = "unmeasurable"  # refused / HTTP error / TLS failure: exit 11
    LEADER_GONE = "leader_gone"  # a worker following its leader: the leader's sidecar or engine is gone: exit 0
    ENGINE_GONE = "engine_gone"  # the engine answered, then its listener closed: it has exited: exit 0
    # A worker following its leader: the leader never once answered as a drain-sidecar (a wrong host,
    # port or token), so it is unknown, not gone; the worker waited to its deadline: exit 12
    LEADER_UNREACHABLE = "leader_unreachable"
    # An SGLang server whose SIGTERM will drain (modeldrain/hook/exit_policy.py): returned after the route wait,
    # its gauges unread; the engine serves what it holds and exits once empty: exit 0
    ENGINE_DRAINS = "engine_drains"

    @property
    def exit_code(self) -> ExitCode:
        return _EXIT_CODES[self]


_EXIT_CODES = {
    DrainOutcome.IDLE: ExitCode.OK,
    DrainOutcome.DEADLINE: ExitCode.DEADLINE,
    DrainOutcome.UNMEASURABLE: ExitCode.UNMEASURABLE,
    # The normal end of a worker's wait (the leader leaves first): not a failed hook in kubelet's events.
    DrainOutcome.LEADER_GONE: ExitCode.OK,
    # The engine answered earlier and refuses now: it has exited (another container's hook, as a
    # routing proxy's, sees its engine stop), so there is nothing left to wait for.
    DrainOutcome.ENGINE_GONE: ExitCode.OK,
    # Not a drain that happened: a worker configured with a leader that is not there. Non-zero, so
    # kubelet's FailedPreStopHook event shows it.
    DrainOutcome.LEADER_UNREACHABLE: ExitCode.LEADER_UNREACHABLE,
    # The engine's own SIGTERM drain serves what is left: a drain that happened, handed over.
    DrainOutcome.ENGINE_DRAINS: ExitCode.OK,
}

_SPLIT_ROLES = (Role.PREFILL, Role.DECODE)


@dataclass(frozen=True)
class ExitReserve:
    """How long before the grace ends the hook returns, and why."""

    seconds: float
    reason: str
    explicit: bool = False  # from --exit-reserve: no role changes it


def exit_reserve_for(role: Role | None, where: str) -> ExitReserve:
    """The reserve an engine of this role needs after SIGTERM; `where` says how the role is known."""
    if role in _SPLIT_ROLES:
        assert role is not None
        return ExitReserve(SPLIT_ROLE_EXIT_RESERVE_S,
                           f"SGLang {role.value} ({where}) needs up to ~20 s after SIGTERM even idle")
    return ExitReserve(EXIT_RESERVE_S, "the engine's exit after SIGTERM")


def reserve_after_read(current: ExitReserve, read: Read) -> ExitReserve | None:
    """A larger reserve when a read reveals a split role the start did not know; None to keep it."""
    if current.explicit or read.role not in _SPLIT_ROLES:
        return None
    revealed = exit_reserve_for(read.role, "from its metrics")
    return revealed if revealed.seconds > current.seconds else None


@dataclass(frozen=True)
class DrainPlan:
    """The drain's timeline on the monotonic clock, fixed at start (the reserve may grow once)."""

    started_at: float  # when the hook was exec'd (kubelet's grace clock starts there)
    grace_s: float
    route_wait_s: float
    exit_reserve: ExitReserve
    interval_s: float  # between read starts while nothing is known to be in flight
    busy_interval_s: float  # between read starts while work is in flight
    read_timeout_s: float

    @classmethod
    def build(cls, *, started_at: float, grace_s: float, route_wait_s: float, exit_reserve: ExitReserve,
              interval_s: float, busy_interval_s: float, read_timeout_s: float) -> "DrainPlan":
        return cls(started_at=started_at, grace_s=grace_s, route_wait_s=route_wait_s, exit_reserve=exit_reserve,
                   interval_s=interval_s, busy_interval_s=min(busy_interval_s, interval_s),
                   read_timeout_s=read_timeout_s)

    @property
    def deadline_at(self) -> float:
        """started_at + G - exit reserve."""
        return self.started_at + max(0.0, self.grace_s - self.exit_reserve.seconds)

    @property
    def first_read_at(self) -> float:
        """The end of the route wait, or the deadline if that comes first."""
        return min(self.started_at + self.route_wait_s, self.deadline_at)

    def with_exit_reserve(self, exit_reserve: ExitReserve) -> "DrainPlan":
        return replace(self, exit_reserve=exit_reserve)


@dataclass(frozen=True)
class DrainState:
    reads: int = 0
    idle_streak: int = 0
    last_read: Read | None = None
    answered: bool = False  # some read got an HTTP answer from the engine
    leader_answered: bool = False  # a worker's read of its leader got a well-formed /v1/work answer
    first_idle_at: float | None = None  # when the current streak's first idle read started


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


def busy_spacing_s(read_duration_s: float, *, busy_interval_s: float, interval_s: float) -> float:
    """Between read starts while work is in flight: faster than `interval_s`, but a read that took
    long (a large exposition) is not repeated so often that the scrapes load the engine: at most
    BUSY_READ_ENGINE_SHARE of its time."""
    return min(interval_s, max(busy_interval_s, read_duration_s / BUSY_READ_ENGINE_SHARE))


def next_step(plan: DrainPlan, state: DrainState, now: float, *, following_leader: bool = False) -> ReadAt | Finish:
    """When to read next, or that the deadline comes first.

    After the route wait: every `busy_interval_s` while work is in flight (the first idle read
    follows the last request soon), LOAD_BUSY_POLL_INTERVAL_S after a busy read that was vLLM's
    /load alone (its count is cheap to ask: hook.reader), the confirming read IDLE_CONFIRM_GAP_S
    after the first idle one (LOAD_COUNTED_CONFIRM_GAP_S where that read's zero includes vLLM's
    only API server's /load, which counts every request from its arrival), and every `interval_s`
    otherwise (an engine that answers badly is not hurried). Busy reads never come so often that
    they take more than BUSY_READ_ENGINE_SHARE of the engine's time, by their own duration.
    """
    last = state.last_read
    if last is None:
        due_at = plan.first_read_at
    elif state.idle_streak > 0 and state.first_idle_at is not None and last.counted_from_arrival:
        due_at = max(last.started_at + plan.busy_interval_s, state.first_idle_at + LOAD_COUNTED_CONFIRM_GAP_S)
    elif state.idle_streak > 0 and state.first_idle_at is not None:
        due_at = max(last.started_at + plan.interval_s, state.first_idle_at + IDLE_CONFIRM_GAP_S)
    elif last.outcome is ReadOutcome.BUSY:
        busy_interval_s = (min(plan.busy_interval_s, LOAD_BUSY_POLL_INTERVAL_S) if last.counted_from_arrival
                           else plan.busy_interval_s)
        due_at = last.started_at + busy_spacing_s(last.duration_s, busy_interval_s=busy_interval_s,
                                                  interval_s=plan.interval_s)
    else:
        due_at = last.started_at + plan.interval_s
    at = max(now, due_at)
    if at >= plan.deadline_at:
        if following_leader and not state.leader_answered:
            return Finish(DrainOutcome.LEADER_UNREACHABLE, _unreachable_reason(state), at=plan.deadline_at)
        return Finish(DrainOutcome.DEADLINE, _deadline_reason(state), at=plan.deadline_at)
    return ReadAt(at=at, timeout_s=min(plan.read_timeout_s, plan.deadline_at - at))


def after_read(state: DrainState, read: Read, *, following_leader: bool = False) -> tuple[DrainState, Finish | None]:
    """Fold one read into the state; finish on a read that ends the drain or on enough idle reads.
    For a worker following its leader, a read that ends the drain means the leader is gone once
    the leader has answered; before that the leader is unknown (a wrong host, port or token looks
    the same), and the worker waits for it to its deadline. A refusal after the engine has answered
    means the engine has exited."""
    idle = read.outcome.is_idle
    streak = state.idle_streak + 1 if idle else 0
    first_idle_at = (state.first_idle_at if state.idle_streak else read.started_at) if idle else None
    new = DrainState(reads=state.reads + 1, idle_streak=streak, last_read=read, first_idle_at=first_idle_at,
                     answered=state.answered or read.http_status is not None,
                     leader_answered=state.leader_answered or read.leader_answered)
    if read.outcome.ends_drain:
        if following_leader:
            if new.leader_answered:
                return new, Finish(DrainOutcome.LEADER_GONE, f"leader gone: {read.detail}")
            return new, None  # never answered: unknown, waited on to the deadline
        if state.answered and read.outcome is ReadOutcome.REFUSED:
            return new, Finish(DrainOutcome.ENGINE_GONE, f"the engine answered before and is gone now: {read.detail}")
        return new, Finish(DrainOutcome.UNMEASURABLE, f"nothing to measure: {read.detail}")
    if streak >= IDLE_READS_REQUIRED:
        return new, Finish(DrainOutcome.IDLE, f"{streak} consecutive complete reads summed to zero")
    return new, None


def _unreachable_reason(state: DrainState) -> str:
    last = state.last_read
    if last is None:
        return "deadline reached before the first read of the leader"
    return (f"the leader never answered as a drain-sidecar in {state.reads} reads (last: {last.outcome.value}: "
            f"{last.detail}); check --follow-leader's host and port and --leader-token-file")


def _deadline_reason(state: DrainState) -> str:
    last = state.last_read
    if last is None:
        return "deadline reached before the first read"
    if last.in_flight is not None and last.complete:
        return f"deadline reached with {last.in_flight:g} in flight"
    return f"deadline reached with work unknown (last read {last.outcome.value}: {last.detail})"
