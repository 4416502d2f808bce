"""The drain loop: sleep, read, decide, log. Thin by design; decision.py holds the rules."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from hook import __version__, constants
from hook.config import DrainConfig
from hook.decision import DrainOutcome, DrainPlan, DrainState, Finish, after_read, next_step
from hook.events import EventLog
from hook.outcome import Read
from hook.reader import read_work

# While busy, a changed in-flight count is logged at most this often: a timeline people can
# follow in `kubectl logs`, not a line per poll.
PROGRESS_LOG_INTERVAL_S = 5.0


@dataclass(frozen=True)
class DrainResult:
    outcome: DrainOutcome
    reason: str
    elapsed_s: float
    in_flight: float | None
    reads: int


def run_drain(config: DrainConfig, started_at: float, log: EventLog,
              read: Callable[..., Read] = read_work) -> DrainResult:
    rc = config.read
    plan = DrainPlan.build(started_at, config.grace_s, config.route_wait_s, config.exit_reserve_s,
                           config.interval_s, rc.read_timeout_s)
    log.emit(
        "drain_started",
        version=__version__,
        grace_s=config.grace_s,
        first_read_s=round(plan.first_read_at - started_at, 3),
        deadline_s=round(plan.deadline_at - started_at, 3),
        target=rc.target.url,
        target_source=rc.target.source,
        engine=rc.hint.kind.value if rc.hint.kind else "detect",
        role=rc.hint.role.value if rc.hint.role else "detect",
        engine_source=rc.hint.source,
        log_mirror=log.mirror_status,
    )
    for warning in rc.warnings:
        log.emit("config_warning", message=warning)
    if not constants.ADMITTED_GRACE_MIN_S <= config.grace_s <= constants.ADMITTED_GRACE_MAX_S:
        log.emit("config_warning", message=(
            f"--grace {config.grace_s:g} is outside the {constants.ADMITTED_GRACE_MIN_S:g}-"
            f"{constants.ADMITTED_GRACE_MAX_S:g} s the operator admits; is it the Pod's terminationGracePeriodSeconds?"))

    state = DrainState()
    logged_key = None
    logged_in_flight = None
    logged_at = 0.0
    while True:
        step = next_step(plan, state, time.monotonic())
        _sleep_until(step.at if step.at is not None else time.monotonic())
        if isinstance(step, Finish):
            return _finish(state, step, started_at)
        current = read(rc.target, rc.hint, step.timeout_s, rc.max_body_bytes)
        state, finish = after_read(state, current)
        key = (current.outcome, current.missing, current.kind, current.role)
        now = time.monotonic()
        progressed = current.in_flight != logged_in_flight and now - logged_at >= PROGRESS_LOG_INTERVAL_S
        if key != logged_key or progressed:
            log.emit(
                "read_state" if key != logged_key else "progress",
                outcome=current.outcome.value,
                in_flight=current.in_flight,
                missing=list(current.missing),
                engine=current.kind.value if current.kind else None,
                role=current.role.value if current.role else None,
                detail=current.detail,
                reads=state.reads,
            )
            logged_key, logged_in_flight, logged_at = key, current.in_flight, now
        if finish is not None:
            return _finish(state, finish, started_at)


def _finish(state: DrainState, finish: Finish, started_at: float) -> DrainResult:
    last = state.last_read
    return DrainResult(
        outcome=finish.outcome,
        reason=finish.reason,
        elapsed_s=round(time.monotonic() - started_at, 3),
        in_flight=last.in_flight if last is not None else None,
        reads=state.reads,
    )


def _sleep_until(at: float) -> None:
    while (remaining_s := at - time.monotonic()) > 0:
        time.sleep(remaining_s)
