"""The drain loop: sleep, read, decide, log. Thin by design; decision.py holds the rules.

The clock and the reader are parameters, so the loop itself (what it logs, when it reads, what
it returns) is tested with both injected, and the real ones over real sockets.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Callable, Protocol, TypedDict

from modeldrain.hook import __version__, constants
from modeldrain.hook.decision import (
    DrainOutcome,
    DrainPlan,
    DrainState,
    ExitReserve,
    Finish,
    after_read,
    exit_reserve_for,
    next_step,
    reserve_after_read,
)
from modeldrain.hook.events import EventLog, utc_timestamp
from modeldrain.hook.exit_policy import ExitPolicy, PolicyChoice, policy_after_health, policy_before_health
from modeldrain.hook.fetch import FetchError, fetch
from modeldrain.hook.foreign_body import NOT_AN_ENGINE
from modeldrain.hook.held_connections import HeldConnections
from modeldrain.hook.leader import KnownLeader, LeaderReader
from modeldrain.hook.leader_memory import recall_leader
from modeldrain.hook.outcome import Read, ReadOutcome, read_fields
from modeldrain.hook.reader import EngineReader
from modeldrain.hook.release_trust import start_words
from modeldrain.hook.settings import DrainConfig

__all__ = ["DrainFields", "DrainResult", "PROGRESS_LOG_INTERVAL_S", "run_drain"]

# While busy, a changed in-flight count is logged at most this often: a timeline people can
# follow in `kubectl logs`, not a line per poll.
PROGRESS_LOG_INTERVAL_S = 5.0


class Clock(Protocol):
    def now(self) -> float: ...

    def sleep_until(self, at: float) -> None: ...


class MonotonicClock:
    """The real clock: time.monotonic, the clock every deadline here is on."""

    def now(self) -> float:
        return time.monotonic()

    def sleep_until(self, at: float) -> None:
        while (remaining_s := at - time.monotonic()) > 0:
            time.sleep(remaining_s)


# One read of the engine, given the time it may take.
ReadEngine = Callable[[float], Read]
# One read of the engine's /health: its status (None: no HTTP answer) and what happened.
ReadHealth = Callable[[], tuple[int | None, str]]
# What drain_started says when the argv and environment allow following SGLang's drain.
FOLLOW_PENDING_REASON = ("SGLang drains on SIGTERM (it keeps serving, new requests too, and exits once empty), "
                         "SGL_FORCE_SHUTDOWN unset, node rank 0: followed if /health answers 200 by the route "
                         "wait's end")
# How long the route wait's end waits for the /health thread to hand over an answer it has.
HEALTH_HANDOVER_S = 0.05
# The ask of a worker's own drain-sidecar (an answer from memory, on loopback: milliseconds) is bounded
# by the route wait's end, and gets at least this, which may delay a short route wait's first read.
LEADER_MEMORY_MIN_WAIT_S = 1.0
# /health's body is a few bytes; a bigger one is read no further.
HEALTH_MAX_BODY_BYTES = 4096


def health_reader(config: DrainConfig, timeout_s: float) -> ReadHealth:
    """GET /health where the engine's /metrics is, bounded by timeout_s."""
    target = replace(config.read.target, path="/health")

    def read() -> tuple[int | None, str]:
        try:
            response = fetch(target, timeout_s=timeout_s, max_body_bytes=HEALTH_MAX_BODY_BYTES)
        except FetchError as exc:
            return exc.status, exc.detail
        return response.status, ""

    return read


class _HealthInBackground:
    """One /health read beside the route wait: SGLang's takes >= 1 s, which the hook must not add to
    its return. The answer counts only if it came by the route wait's end; else it is unknown."""

    def __init__(self, read: ReadHealth):
        self._result: tuple[int | None, str] | None = None
        self._thread = threading.Thread(target=self._run, args=(read,), name="health-read", daemon=True)
        self._thread.start()

    def _run(self, read: ReadHealth) -> None:
        try:
            self._result = read()
        except Exception as exc:  # noqa: BLE001 - an unforeseen failure is an unknown health: the full drain
            self._result = (None, f"unexpected {type(exc).__name__}: {exc}"[:200])

    def result(self, wait_s: float) -> tuple[int | None, str]:
        # Its fetch ends by the route wait's end; the floor only lets a thread that has its answer hand it over.
        self._thread.join(max(HEALTH_HANDOVER_S, wait_s))
        return self._result if self._result is not None else (None, "no answer by the route wait's end")


class DrainFields(TypedDict):
    """How a drain ended, as `drain_finished` says it (the hook's line, the sidecar's route)."""

    outcome: str
    reason: str
    elapsed_s: float
    in_flight: float | None
    reads: int
    exit_code: int


@dataclass(frozen=True)
class DrainResult:
    outcome: DrainOutcome
    reason: str
    elapsed_s: float
    in_flight: float | None
    reads: int
    # Seconds from the end of the last read that saw work in flight (from the drain's start when
    # none did) to the return: the time the drain held the engine after its last request. Not one
    # of drain_finished's fields; the hook reports it to its sidecar (hook.sidecar_report).
    held_after_last_busy_s: float | None = None

    def fields(self) -> DrainFields:
        return DrainFields(outcome=self.outcome.value, reason=self.reason, elapsed_s=self.elapsed_s,
                           in_flight=self.in_flight, reads=self.reads, exit_code=int(self.outcome.exit_code))


def run_drain(config: DrainConfig, started_at: float, log: EventLog, *,
              read: ReadEngine | None = None, clock: Clock = MonotonicClock(),
              health: ReadHealth | None = None, held: HeldConnections | None = None) -> DrainResult:
    """Drain until idle, unmeasurable or the deadline; or, for an SGLang server whose SIGTERM will
    drain, return after the route wait (modeldrain/hook/exit_policy.py). `read`: the engine reader (default:
    the configured EngineReader, whose switch to the engine's own port is logged as a warning);
    `health`: the /health reader (default: health_reader); `held`: the engine port's outside
    connections, said in drain_started, progress and a deadline's reason (default: looked at when
    the engine itself is read)."""
    rc = config.read
    if held is None and read is None and config.leader is None:
        held = HeldConnections(rc.target.port)
    following_leader = config.leader is not None
    plan = DrainPlan.build(started_at=started_at, grace_s=config.grace_s, route_wait_s=config.route_wait_s,
                           exit_reserve=initial_exit_reserve(config), interval_s=config.interval_s,
                           busy_interval_s=config.busy_interval_s, read_timeout_s=rc.read_timeout_s)
    choice = policy_before_health(rc.hint, following_leader=following_leader, other_engines=len(rc.others))
    if choice is not None:
        _log_start(config, plan, log, choice, held)
    known: KnownLeader | None = None
    if read is None:
        if config.leader is not None:
            known = _recall_leader(config, plan, clock, log)
            read = LeaderReader(config.leader, known).read
        else:
            read = EngineReader(rc, lambda message: log.warning("config_warning", message=message), load_first=True).read
    if choice is None:
        health_wait_s = max(0.0, plan.first_read_at - clock.now())
        pending = _HealthInBackground(health or health_reader(config, min(constants.HEALTH_READ_TIMEOUT_S,
                                                                           health_wait_s)))
        _log_start(config, plan, log, PolicyChoice(ExitPolicy.FOLLOW_ENGINE_DRAIN, FOLLOW_PENDING_REASON), held)
        clock.sleep_until(plan.first_read_at)  # the route wait stays: routers lag
        confirmed = policy_after_health(*pending.result(plan.first_read_at - clock.now()))
        if confirmed.policy is ExitPolicy.FOLLOW_ENGINE_DRAIN:
            elapsed_s = round(clock.now() - started_at, 3)
            return DrainResult(DrainOutcome.ENGINE_DRAINS, confirmed.reason, elapsed_s, None, 0, elapsed_s)
        log.emit("exit_policy_changed", exit_policy=confirmed.policy.value, exit_policy_reason=confirmed.reason)

    # A leader the worker's sidecar saw answer has answered: refused now, it is gone, not unknown.
    state = DrainState(leader_answered=known is not None)
    progress = _ProgressLog(log, held)
    last_busy_at = started_at
    while True:
        step = next_step(plan, state, clock.now(), following_leader=following_leader)
        clock.sleep_until(step.at if step.at is not None else clock.now())
        if isinstance(step, Finish):
            return _result(state, step, started_at, clock.now(), last_busy_at, held)
        current = read(step.timeout_s)
        if current.outcome is ReadOutcome.BUSY:
            last_busy_at = max(last_busy_at, current.started_at + current.duration_s)
        if state.reads == 0 and current.detail.startswith(NOT_AN_ENGINE):
            log.warning("config_warning", message=current.detail)  # a misplaced probe: said at the first read
        state, finish = after_read(state, current, following_leader=following_leader)
        progress.observe(current, state.reads, clock.now())
        grown = reserve_after_read(plan.exit_reserve, current)
        if grown is not None:
            plan = plan.with_exit_reserve(grown)
            log.emit("exit_reserve_changed", exit_reserve_s=grown.seconds, reason=grown.reason,
                     deadline_s=round(plan.deadline_at - plan.started_at, 3))
        if finish is not None:
            return _result(state, finish, started_at, clock.now(), last_busy_at, held)


def _recall_leader(config: DrainConfig, plan: DrainPlan, clock: Clock, log: EventLog) -> KnownLeader | None:
    """Ask the worker's own drain-sidecar which leader it saw answer, within the route wait."""
    assert config.leader is not None
    if config.own_sidecar is None:
        log.emit("leader_memory", known=False, detail="--own-sidecar none")
        return None
    timeout_s = min(config.read.read_timeout_s, max(LEADER_MEMORY_MIN_WAIT_S, plan.first_read_at - clock.now()))
    recall = recall_leader(config.own_sidecar, config.leader, timeout_s)
    known = recall.known
    log.emit("leader_memory", known=known is not None, detail=recall.detail, own_sidecar=config.own_sidecar.url,
             leader_uid=known.identity.uid if known else None,
             leader_instance=known.identity.instance if known else None,
             last_answered_age_s=round(known.last_answered_age_s, 3) if known else None)
    return known


def initial_exit_reserve(config: DrainConfig) -> ExitReserve:
    """--exit-reserve when given; else what the engine's role needs, when the start knows it."""
    if config.exit_reserve_s is not None:
        return ExitReserve(config.exit_reserve_s, "--exit-reserve", explicit=True)
    hint = config.read.hint
    where = {"flag": "--disaggregation-mode", "cmdline": "its command line"}.get(hint.source, hint.source)
    return exit_reserve_for(hint.role, where)


def _log_start(config: DrainConfig, plan: DrainPlan, log: EventLog, choice: PolicyChoice,
               held: HeldConnections | None = None) -> None:
    rc = config.read
    target, target_source = rc.target.url, rc.target.source
    if config.leader is not None:
        target, target_source = config.leader.target.url, f"the leader's drain-sidecar, from {config.leader.source}"
    log.emit(
        "drain_started",
        version=__version__,
        grace_s=config.grace_s,
        grace_source=config.grace_flag if config.grace_given else "assumed (--grace not given)",
        first_read_s=round(plan.first_read_at - plan.started_at, 3),
        deadline_s=round(plan.deadline_at - plan.started_at, 3),
        exit_reserve_s=plan.exit_reserve.seconds,
        exit_reserve_reason=plan.exit_reserve.reason,
        target=target,
        target_source=target_source,
        engine=rc.hint.kind.value if rc.hint.kind else "detect",
        role=rc.hint.role.value if rc.hint.role else "detect",
        engine_source=rc.hint.source,
        exit_policy=choice.policy.value,
        exit_policy_reason=choice.reason,
        log_mirror=log.mirror_status,
        release_rules=list(start_words(rc.hint)) if config.leader is None else [],
        **(held.at_start.fields() if held is not None else {}),
    )
    if config.rerun_of is not None:
        first = config.rerun_of
        log.emit("rerun", first_pid=first.pid, first_started_at=utc_timestamp(first.started_at_unix),
                 first_running=first.running, route_wait_left_s=round(config.route_wait_s, 3),
                 message="an earlier run of this hook in this container started and did not finish (kubelet "
                 "restarted mid-drain and runs the preStop again); the route wait it served is not waited again")
    # What the read configuration says of the local engine (no port found, a bad annotation) does
    # not apply to a worker that reads its leader's sidecar instead.
    local_warnings = () if config.leader is not None else rc.warnings
    for warning in local_warnings + config.warnings:
        log.warning("config_warning", message=warning)
    if not config.grace_given:
        log.warning("config_warning", message=(
            f"--grace not given: assuming {config.grace_s:g} s. The hook cannot read the Pod's "
            "terminationGracePeriodSeconds; with a longer one the drain ends early and SIGTERM cuts what still "
            "runs. Repeat it: prestop --grace G (prestop lint checks a manifest for it)"))
    if not constants.ADMITTED_GRACE_MIN_S <= config.grace_s <= constants.ADMITTED_GRACE_MAX_S:
        log.warning("config_warning", message=(
            f"--grace {config.grace_s:g} is outside the {constants.ADMITTED_GRACE_MIN_S:g}-"
            f"{constants.ADMITTED_GRACE_MAX_S:g} s that the ModelDeployment operator's shutdown documentation "
            "admits (restated in modeldrain's docs/requirements.md); is it the Pod's terminationGracePeriodSeconds?"))


class _ProgressLog:
    """Logs a read when its kind of answer changes (`read_state`), and a changed in-flight count
    at most every PROGRESS_LOG_INTERVAL_S (`progress`)."""

    def __init__(self, log: EventLog, held: HeldConnections | None = None):
        self._log = log
        self._held = held
        self._key: tuple[object, ...] | None = None
        self._in_flight: float | None = None
        self._at = -float("inf")

    def observe(self, read: Read, reads: int, now: float) -> None:
        key = (read.outcome, read.missing, read.kind, read.role)
        changed = key != self._key
        progressed = read.in_flight != self._in_flight and now - self._at >= PROGRESS_LOG_INTERVAL_S
        if not (changed or progressed):
            return
        # A progress line also says which outside connections are open, and which predate the delete.
        connections = self._held.look().fields() if self._held is not None and not changed else {}
        self._log.emit("read_state" if changed else "progress", **read_fields(read), reads=reads, **connections)
        self._key, self._in_flight, self._at = key, read.in_flight, now


def _result(state: DrainState, finish: Finish, started_at: float, now: float, last_busy_at: float,
            held: HeldConnections | None = None) -> DrainResult:
    last = state.last_read
    return DrainResult(
        outcome=finish.outcome,
        reason=finish.reason + _held_words(finish, held),
        elapsed_s=round(now - started_at, 3),
        in_flight=last.in_flight if last is not None else None,
        reads=state.reads,
        held_after_last_busy_s=round(max(0.0, now - last_busy_at), 3),
    )


def _held_words(finish: Finish, held: HeldConnections | None) -> str:
    """What a deadline's reason adds when clients connected before the delete are still connected:
    work that keeps arriving on them is why no read was idle (modeldrain/hook/held_connections.py)."""
    if finish.outcome is not DrainOutcome.DEADLINE or held is None:
        return ""
    count = held.look()
    if not count.from_before_delete:
        return ""
    return (f"; {count.detail}: a client on a keep-alive connection (a plain Service, a NodePort) keeps sending "
            "after the delete, which the route wait cannot stop (docs/configurations.md)")
