"""`GET /v1/drain?grace=G`: the hook's drain, run by the sidecar for an engine image left untouched.

An engine image that cannot carry `prestop` can still drain: its preStop is an httpGet on this
route (as Knative's queue-proxy does). The drain is the hook's own loop (hook.drain.run_drain)
and its own rules: the route wait counted from *this call's* arrival, reads until two idle ones
at least 1 s apart, the deadline G - reserve from *this call's* G. It runs on a thread of its own,
since it sleeps and reads synchronously.

The route needs no token (docs/sidecar-api.md, "Threat model"), so no call may speak for another:
every call measures for itself, from its own arrival, and answers only about what it read after
that. Concurrent calls share the engine reads (the coalescer: a read that starts after the call
asked for it, so a shared read is never older than the question) and nothing else, neither a
start, a deadline nor a result. A call whose client goes away stops reading.

kubelet's HTTP hook has no client timeout, ignores the status and may call again (its delivery
is at-least-once): a repeated call costs one more route wait, never a stale answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from typing import Any, Callable, Coroutine

from modeldrain.hook import constants
from modeldrain.hook.drain import DrainFields, DrainResult, run_drain
from modeldrain.hook.events import EventLog
from modeldrain.hook.outcome import Read, ReadOutcome
from modeldrain.hook.settings import DrainConfig, ReadConfig
from modeldrain.sidecar.daemon_thread import run_in_daemon_thread
from modeldrain.sidecar.drain_admission import DrainAdmission, Refusal
from modeldrain.sidecar.drain_ledger import ABANDONED, DrainLedger

__all__ = ["DrainJobs", "DrainRefused"]

# A read of the engine, as the sidecar shares it: one that starts after this is called.
FreshRead = Callable[[], Coroutine[Any, Any, Read]]


class DrainAnswer(DrainFields):
    """What the route answers: the hook's drain_finished fields for this call's own drain."""

    grace_s: float  # this call's own grace
    joined: bool  # other drain calls were waiting at its arrival (they shared reads, nothing else)


class DrainRefused(Exception):
    def __init__(self, refusal: Refusal):
        super().__init__(refusal.message)
        self.refusal = refusal


class _Abandoned(Exception):
    """The call's client went away: its drain stops at its next sleep or read."""


class _CallClock:
    """The monotonic clock, whose sleeps end early (raising _Abandoned) once the call is abandoned."""

    def __init__(self, abandoned: threading.Event):
        self._abandoned = abandoned

    def now(self) -> float:
        return time.monotonic()

    def sleep_until(self, at: float) -> None:
        while (remaining_s := at - time.monotonic()) > 0:
            if self._abandoned.wait(remaining_s):
                raise _Abandoned
        if self._abandoned.is_set():
            raise _Abandoned


class DrainJobs:
    """Runs one drain per call, each on its own clock; admission bounds who may hold one."""

    def __init__(self, read: ReadConfig, log: EventLog, fresh_read: FreshRead, admission: DrainAdmission,
                 ledger: DrainLedger):
        self._read = read
        self._log = log
        self._fresh_read = fresh_read
        self.admission = admission
        self._ledger = ledger

    @property
    def waiting(self) -> int:
        return self.admission.waiting

    async def drain(self, grace_s: float, source: str) -> DrainAnswer:
        """This call's drain, from now; raises DrainRefused past its network's share or the total."""
        arrived_at = time.monotonic()
        self._ledger.call_arrived()  # the Pod is being deleted, whether this call is admitted or not
        refusal = self.admission.admit(source)
        if refusal is not None:
            raise DrainRefused(refusal)
        joined = self.admission.waiting > 1
        abandoned = threading.Event()
        loop = asyncio.get_running_loop()
        self._ledger.call_started()
        result: DrainResult | None = None
        try:
            result = await run_in_daemon_thread(
                lambda: self._run(arrived_at, grace_s, source, loop, abandoned), "drain")
        finally:
            abandoned.set()  # a cancelled call (its client gone) stops its thread at the next step
            self.admission.release(source)
            if result is None:
                self._ledger.call_finished(ABANDONED, held_after_last_busy_s=None, in_flight=None)
            else:
                self._ledger.call_finished(result.outcome.value, held_after_last_busy_s=result.held_after_last_busy_s,
                                           in_flight=result.in_flight)
        if result is None:  # its reads were cancelled under it: the sidecar is stopping
            raise RuntimeError("the drain's reads of the engine were cancelled: the sidecar is stopping")
        return {**result.fields(), "grace_s": grace_s, "joined": joined}

    def _run(self, arrived_at: float, grace_s: float, source: str, loop: asyncio.AbstractEventLoop,
             abandoned: threading.Event) -> DrainResult | None:
        config = DrainConfig(read=self._read, leader=None, grace_s=grace_s, route_wait_s=constants.ROUTE_WAIT_S,
                             exit_reserve_s=None, interval_s=constants.POLL_INTERVAL_S,
                             busy_interval_s=constants.BUSY_POLL_INTERVAL_S, grace_flag="?grace=")

        def read(timeout_s: float) -> Read:
            if abandoned.is_set():
                raise _Abandoned
            return self._shared_read(loop, timeout_s)

        try:
            result = run_drain(config, arrived_at, self._log, read=read, clock=_CallClock(abandoned))
        except _Abandoned:
            self._log.emit("drain_abandoned", source=source, message="the caller went away; its drain stopped")
            return None
        self._log.emit("drain_finished", **result.fields(), grace_s=grace_s, source=source)
        return result

    def _shared_read(self, loop: asyncio.AbstractEventLoop, timeout_s: float) -> Read:
        """The next shared read (one that starts after this call), waited on for at most timeout_s:
        past it the read counts as a timeout, busy, as the hook's own read would."""
        asked_at = time.monotonic()
        future: concurrent.futures.Future[Read] = asyncio.run_coroutine_threadsafe(self._fresh_read(), loop)
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()  # the shared read goes on for its other callers (the coalescer shields it)
            return Read(ReadOutcome.TIMEOUT, started_at=asked_at, duration_s=round(time.monotonic() - asked_at, 3),
                        detail=f"the sidecar's shared read did not finish within {timeout_s:.3g} s")
        except concurrent.futures.CancelledError:
            raise _Abandoned from None  # the sidecar is stopping: its reads were cancelled
