"""Every drain this sidecar knows of, and whether its Pod is draining: for /v1/work and /metrics.

Two kinds of drain reach it: its own `GET /v1/drain` calls (an engine image without prestop),
and the engine's prestop hook in the same Pod, which posts `started` and `finished` to
`POST /v1/hook-events` over loopback (modeldrain/hook/sidecar_report.py, best effort). Either is
the Pod's deletion reaching the sidecar: from the first one on, `/v1/work` says the member is
draining (`sidecar.draining`), long before a native sidecar's own SIGTERM (after its engine
exited). It stays so: a deletion is never undone.

Each drain is counted when it starts and when it ends, by outcome (the hook's exit class, or
`abandoned`, `unreported`), with the time it held the engine after the last request and the work
in flight at its deadline. A hook that started and never said how it ended (killed at the grace,
or its message lost) is counted `unreported` once its grace and UNREPORTED_SLACK_S have passed.
"""

from __future__ import annotations

import enum
import math
import re
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from modeldrain.hook import sidecar_report
from modeldrain.hook.decision import DrainOutcome
from modeldrain.hook.events import EventLog
from modeldrain.hook.signals import STOP_SIGNALS
from modeldrain.sidecar.metrics import SidecarMetrics

__all__ = ["ABANDONED", "DrainLedger", "Draining", "MAX_OPEN_HOOK_DRAINS", "UNREPORTED_SLACK_S", "Via"]


class Via(enum.Enum):
    HOOK = "hook"  # the engine's prestop hook, reported over loopback
    DRAIN_CALL = "drain_call"  # this sidecar's own GET /v1/drain
    SIGTERM = "sigterm"  # the sidecar's own SIGTERM (a classic container gets it at the deletion)


# The ways a drain reaches the sidecar (the metrics' `via`); SIGTERM starts none, it only says the Pod is deleted.
DRAIN_VIAS = (Via.HOOK, Via.DRAIN_CALL)


ABANDONED = "abandoned"  # a /v1/drain call whose client went away
UNREPORTED = "unreported"  # a hook that started and never said how it ended
# Every outcome label /metrics may carry: the drain's own, the hook's stops by signal, and the two above.
OUTCOMES = (*(o.value for o in DrainOutcome), *sorted({outcome for _, outcome, _ in STOP_SIGNALS.values()}),
            ABANDONED, UNREPORTED)

# kubelet kills the engine at its grace; a hook's end not heard of this long after that never comes.
UNREPORTED_SLACK_S = 5.0
# Hook drains open at once: one hook per Pod is the rule, a few repeats (kubelet's at-least-once
# delivery, a restarted container) the exception. Past this the oldest is counted unreported, so a
# local process posting starts cannot grow the sidecar's memory.
MAX_OPEN_HOOK_DRAINS = 32
# Drain ids whose end was counted, remembered so that a start arriving after its end (the start is
# posted from a thread nobody waits on) is not counted again.
MAX_FINISHED_IDS = 64
# The longest grace a hook may report (a Pod's terminationGracePeriodSeconds can be set that high).
MAX_REPORTED_GRACE_S = 86400.0
_DRAIN_ID = re.compile(r"^[0-9a-f]{%d}$" % sidecar_report.DRAIN_ID_HEX)


@dataclass(frozen=True)
class Draining:
    """The first word of the Pod's deletion: when, and by which way."""

    since_unix: float
    since_monotonic_s: float
    via: Via


@dataclass(frozen=True)
class _Open:
    started_at: float
    grace_s: float


class DrainLedger:
    def __init__(self, metrics: SidecarMetrics, log: EventLog, clock: Callable[[], float] = time.monotonic):
        self._metrics = metrics
        self._log = log
        self._clock = clock
        self.draining: Draining | None = None
        self._open_hooks: OrderedDict[str, _Open] = OrderedDict()
        self._finished_ids: OrderedDict[str, None] = OrderedDict()
        self._open_calls = 0
        metrics.watch_drains(lambda via: self.in_progress(Via(via)), lambda: self.draining is not None,
                             [v.value for v in DRAIN_VIAS], OUTCOMES)

    def in_progress(self, via: Via) -> int:
        self.sweep()
        return len(self._open_hooks) if via is Via.HOOK else self._open_calls

    def sigterm(self) -> None:
        """The sidecar's own SIGTERM: the Pod is being deleted (a native sidecar's comes last of all)."""
        self._mark_draining(Via.SIGTERM)

    # --- this sidecar's own /v1/drain calls -------------------------------------------------

    def call_arrived(self) -> None:
        """A /v1/drain call with a valid grace: kubelet's (or anyone's) word that the Pod is deleted."""
        self._mark_draining(Via.DRAIN_CALL)

    def call_started(self) -> None:
        self._open_calls += 1
        self._metrics.drain_started(Via.DRAIN_CALL.value)

    def call_finished(self, outcome: str, *, held_after_last_busy_s: float | None, in_flight: float | None) -> None:
        self._open_calls -= 1
        self._metrics.drain_finished(Via.DRAIN_CALL.value, outcome, held_after_last_busy_s,
                                     in_flight if outcome == DrainOutcome.DEADLINE.value else None)

    # --- the engine's hook, over loopback -----------------------------------------------------

    def hook_event(self, message: Any) -> str:
        """Take one message of hook.sidecar_report; raises ValueError (for a 400) when it is not one.
        Fields it does not know are ignored (a newer hook may send more). Returns what it did."""
        if not isinstance(message, Mapping):
            raise ValueError("the body is not a JSON object")
        event, drain_id = message.get("event"), message.get("drain")
        if event not in (sidecar_report.STARTED, sidecar_report.FINISHED):
            raise ValueError(f"event must be {sidecar_report.STARTED!r} or {sidecar_report.FINISHED!r}")
        if not isinstance(drain_id, str) or not _DRAIN_ID.match(drain_id):
            raise ValueError(f"drain must be {sidecar_report.DRAIN_ID_HEX} lowercase hex characters")
        # Every field this version knows is checked whenever it is present, whatever the event.
        grace_s = _number(message, "grace_s", nullable=False) if "grace_s" in message or event == sidecar_report.STARTED else None
        if grace_s is not None and not 0 < grace_s <= MAX_REPORTED_GRACE_S:
            raise ValueError(f"grace_s must be above 0 and at most {MAX_REPORTED_GRACE_S:g}")
        outcome = message.get("outcome")
        if ("outcome" in message or event == sidecar_report.FINISHED) and (
                outcome not in OUTCOMES or outcome in (ABANDONED, UNREPORTED)):
            raise ValueError("outcome is none of a hook's outcomes")
        exit_code = message.get("exit_code")
        if "exit_code" in message and (isinstance(exit_code, bool) or not isinstance(exit_code, int)):
            raise ValueError("exit_code must be an integer")
        _number(message, "elapsed_s")
        held_s = _number(message, "held_after_last_busy_s")
        in_flight = _number(message, "in_flight")
        if event == sidecar_report.STARTED:
            assert grace_s is not None
            return self._hook_started(drain_id, grace_s)
        return self._hook_finished(drain_id, str(outcome), held_s, in_flight)

    def _hook_started(self, drain_id: str, grace_s: float) -> str:
        self._mark_draining(Via.HOOK)
        if drain_id in self._open_hooks or drain_id in self._finished_ids:
            return "already counted"
        self.sweep()
        if len(self._open_hooks) >= MAX_OPEN_HOOK_DRAINS:
            oldest, _ = self._open_hooks.popitem(last=False)
            self._count_unreported(oldest, "too many hook drains open at once")
        self._open_hooks[drain_id] = _Open(self._clock(), grace_s)
        self._metrics.drain_started(Via.HOOK.value)
        self._log.emit("hook_drain_started", drain=drain_id, grace_s=grace_s)
        return "started"

    def _hook_finished(self, drain_id: str, outcome: str, held_s: float | None, in_flight: float | None) -> str:
        self._mark_draining(Via.HOOK)
        if drain_id in self._finished_ids:
            return "already counted"
        if self._open_hooks.pop(drain_id, None) is None:
            self._metrics.drain_started(Via.HOOK.value)  # its start was lost or is still on its way
        self._remember_finished(drain_id)
        self._metrics.drain_finished(Via.HOOK.value, outcome, held_s,
                                     in_flight if outcome == DrainOutcome.DEADLINE.value else None)
        self._log.emit("hook_drain_finished", drain=drain_id, outcome=outcome, held_after_last_busy_s=held_s,
                       in_flight=in_flight)
        return "finished"

    def sweep(self) -> None:
        """Count as unreported the hooks whose grace (and the slack) passed without their end."""
        now = self._clock()
        for drain_id, opened in list(self._open_hooks.items()):
            if now - opened.started_at > opened.grace_s + UNREPORTED_SLACK_S:
                del self._open_hooks[drain_id]
                self._count_unreported(drain_id, "its grace passed without its end")

    def _count_unreported(self, drain_id: str, why: str) -> None:
        self._remember_finished(drain_id)
        self._metrics.drain_finished(Via.HOOK.value, UNREPORTED, None, None)
        self._log.warning("hook_drain_unreported", drain=drain_id, message=why)

    def _remember_finished(self, drain_id: str) -> None:
        self._finished_ids[drain_id] = None
        while len(self._finished_ids) > MAX_FINISHED_IDS:
            self._finished_ids.popitem(last=False)

    def _mark_draining(self, via: Via) -> None:
        if self.draining is None:
            self.draining = Draining(time.time(), self._clock(), via)
            self._log.emit("draining", via=via.value)


def _number(message: Mapping[str, Any], key: str, *, nullable: bool = True) -> float | None:
    value = message.get(key)
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{key} must be a number of at least 0{' or null' if nullable else ''}")
    return float(value)
