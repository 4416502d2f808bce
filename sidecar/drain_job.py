"""`GET /v1/drain?grace=G`: the hook's drain, run by the sidecar for an engine image left untouched.

An engine image that cannot carry `prestop` can still drain: its preStop is an httpGet on this
route (as Knative's queue-proxy does). The drain is the hook's own loop (hook.drain.run_drain):
the same route wait, counted from the request's arrival, the same reads and rules, the same
deadline G - reserve. It runs on a thread of its own, since it sleeps and reads synchronously.

kubelet's HTTP hook has no client timeout, ignores the status and may call again (its delivery
is at-least-once), and every container's hook targets the same Pod: so concurrent and repeated
calls join the one drain, and a call within the grace of a finished drain gets its answer at
once. A call after that grace is a new deletion (the engine container restarted since), and
starts a new drain.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from modeldrain.hook import constants
from modeldrain.hook.config import DrainConfig, ReadConfig
from modeldrain.hook.drain import DrainFields, DrainResult, run_drain
from modeldrain.hook.events import EventLog
from modeldrain.sidecar.daemon_thread import run_in_daemon_thread


class DrainAnswer(DrainFields):
    """What the route answers: the hook's drain_finished fields, and whether this call joined."""

    grace_s: float
    joined: bool


@dataclass
class _Job:
    started_at: float  # monotonic: the first call's arrival
    grace_s: float
    done: asyncio.Future[DrainResult]


class DrainJobs:
    """At most one drain at a time; every caller of a deletion shares it."""

    def __init__(self, read: ReadConfig, log: EventLog):
        self._read = read
        self._log = log
        self._job: _Job | None = None
        self.waiting = 0  # calls waiting for the drain now

    async def drain(self, grace_s: float) -> DrainAnswer:
        self.waiting += 1
        try:
            return await self._drain(grace_s)
        finally:
            self.waiting -= 1

    async def _drain(self, grace_s: float) -> DrainAnswer:
        now = time.monotonic()
        job = self._job
        joined = job is not None and now < job.started_at + job.grace_s
        if job is None or not joined:
            job = self._start(now, grace_s)
        elif grace_s != job.grace_s:
            self._log.warning("drain_grace_differs", grace_s=grace_s, running_grace_s=job.grace_s,
                              message="a drain is already running: this call joins it with its grace")
        result = await asyncio.shield(job.done)
        return {**result.fields(), "grace_s": job.grace_s, "joined": joined}

    def _start(self, started_at: float, grace_s: float) -> _Job:
        config = DrainConfig(read=self._read, leader=None, grace_s=grace_s, route_wait_s=constants.ROUTE_WAIT_S,
                             exit_reserve_s=None, interval_s=constants.POLL_INTERVAL_S,
                             busy_interval_s=constants.BUSY_POLL_INTERVAL_S)

        def run() -> DrainResult:
            result = run_drain(config, started_at, self._log)
            self._log.emit("drain_finished", **result.fields())
            return result

        # A daemon thread: the drain ends by its own deadline, and never holds the process's exit.
        # An exception reaches every waiting caller as a 500.
        job = _Job(started_at, grace_s, asyncio.ensure_future(run_in_daemon_thread(run, "drain")))
        self._job = job
        return job
