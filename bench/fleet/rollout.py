"""A role's rollout and scale-down as a discrete-event simulation, Kubernetes' Deployment rules.

The controller, at every event (and at the start), in one sync:
- deletes old replicas while the ready ones (old serving + new ready) stay at least N − maxUnavailable;
- creates new replicas while the non-terminating ones (old serving + new created) stay at most
  N + maxSurge (Kubernetes does not count a terminating Pod against the surge);
- starts a created replica once an accelerator is free: a terminating replica holds its own until
  its engine exits, and the pool has N + `spare` of them. With maxSurge 0 and no spare accelerator
  the replacement waits the departing replica out (the drain adds to the rollout); with spare
  accelerators for the surge, it starts while the old one drains (the drain overlaps).

A replacement is ready its start-up (model load) after it starts. Each deletion's outcome comes
from a callable (deletion.py's model in the bench, fixed numbers in the tests). Events at the same
moment are taken in the order they were scheduled.
"""

from __future__ import annotations

import enum
import heapq
from dataclasses import dataclass, field
from typing import Callable

from bench.fleet.deletion import Outcome

# A deletion's outcome for the i-th replica deleted; a start-up's seconds for the i-th started.
DeletionSource = Callable[[int], Outcome]
StartupSource = Callable[[int], float]


class Event(enum.Enum):
    OLD_EXITED = "old exited"
    NEW_READY = "new ready"


@dataclass(frozen=True)
class Policy:
    replicas: int
    max_surge: int = 0
    max_unavailable: int = 1
    spare_accelerators: int = 0  # free accelerators in the pool beyond the role's N

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ValueError("a role has at least one replica")
        if min(self.max_surge, self.max_unavailable, self.spare_accelerators) < 0:
            raise ValueError("maxSurge, maxUnavailable and spare accelerators cannot be negative")
        if self.max_surge == 0 and self.max_unavailable == 0:
            raise ValueError("maxSurge and maxUnavailable cannot both be 0 (Kubernetes refuses it: nothing could move)")
        if self.max_surge > 0 and self.spare_accelerators == 0:
            raise ValueError("a surge needs a spare accelerator to start on")


@dataclass(frozen=True)
class Totals:
    wall_s: float  # first delete (or first start) to the last replica ready and the last old one gone
    held_idle_s: float  # summed over the deletions, in replica-seconds
    cut: int
    failed: int
    sigkilled: int
    deletions: int
    log: tuple[tuple[float, str, int], ...] = ()  # (time, what, replica), when asked for


@dataclass
class _State:
    policy: Policy
    old_serving: int
    old_terminating: int = 0
    new_created: int = 0  # pending or starting or ready
    new_starting: int = 0
    new_ready: int = 0
    deleted: int = 0
    started: int = 0
    totals: dict = field(default_factory=lambda: {"held": 0.0, "cut": 0, "failed": 0, "killed": 0})

    @property
    def pending(self) -> int:
        return self.new_created - self.new_starting - self.new_ready

    @property
    def accelerators_held(self) -> int:
        return self.old_serving + self.old_terminating + self.new_starting + self.new_ready


def roll(policy: Policy, deletion: DeletionSource, startup: StartupSource, keep_log: bool = False) -> Totals:
    """Replace every replica of the role; returns when the last new one is ready and no old one is left."""
    n = policy.replicas
    capacity = n + policy.spare_accelerators
    state = _State(policy, old_serving=n)
    events: list[tuple[float, int, Event, int]] = []
    sequence = 0
    log: list[tuple[float, str, int]] = []
    now = 0.0

    def schedule(at: float, event: Event, replica: int) -> None:
        nonlocal sequence
        heapq.heappush(events, (at, sequence, event, replica))
        sequence += 1

    def sync() -> None:
        changed = True
        while changed:
            changed = False
            if state.old_serving > 0 and state.old_serving + state.new_ready - 1 >= n - policy.max_unavailable:
                outcome = deletion(state.deleted)
                state.old_serving -= 1
                state.old_terminating += 1
                state.totals["held"] += outcome.held_idle_s
                state.totals["cut"] += outcome.cut
                state.totals["failed"] += outcome.failed
                state.totals["killed"] += outcome.sigkilled
                if keep_log:
                    log.append((now, "delete", state.deleted))
                schedule(now + outcome.exited_at_s, Event.OLD_EXITED, state.deleted)
                state.deleted += 1
                changed = True
            if state.new_created < n and state.old_serving + state.new_created < n + policy.max_surge:
                state.new_created += 1
                changed = True
            if state.pending > 0 and state.accelerators_held < capacity:
                state.new_starting += 1
                if keep_log:
                    log.append((now, "start", state.started))
                schedule(now + startup(state.started), Event.NEW_READY, state.started)
                state.started += 1
                changed = True

    sync()
    while events:
        now, _, event, replica = heapq.heappop(events)
        if keep_log:
            log.append((now, event.value, replica))
        if event is Event.OLD_EXITED:
            state.old_terminating -= 1
        else:
            state.new_starting -= 1
            state.new_ready += 1
        sync()
    if state.new_ready != n or state.old_serving or state.old_terminating:
        raise RuntimeError(f"the rollout stalled: {state}")  # the rules above cannot leave it so; a bug if so
    return Totals(wall_s=now, held_idle_s=state.totals["held"], cut=state.totals["cut"],
                  failed=state.totals["failed"], sigkilled=state.totals["killed"], deletions=state.deleted,
                  log=tuple(log))


def scale_down(replicas: int, to: int, deletion: DeletionSource) -> Totals:
    """Remove replicas − to at once (a scale-down deletes them together); wall time: the last one gone."""
    if not 0 <= to < replicas:
        raise ValueError(f"a scale-down goes from {replicas} to fewer, not to {to}")
    outcomes = [deletion(i) for i in range(replicas - to)]
    return Totals(wall_s=max(o.exited_at_s for o in outcomes), held_idle_s=sum(o.held_idle_s for o in outcomes),
                  cut=sum(o.cut for o in outcomes), failed=sum(o.failed for o in outcomes),
                  sigkilled=sum(o.sigkilled for o in outcomes), deletions=len(outcomes))
