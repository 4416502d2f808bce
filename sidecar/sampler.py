"""One numbered read of the engine: the hook's reader, run off the event loop.

`hook.reader.read_work` is synchronous (stdlib sockets with an end-to-end deadline), so it
runs on a single worker thread; the coalescer guarantees one read at a time, and one thread
bounds it even if that guarantee were broken.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import time
from dataclasses import dataclass

from hook.config import ReadConfig
from hook.outcome import Read, ReadOutcome
from hook.reader import read_work
from sidecar.idle_run import IdleRunTracker
from sidecar.incarnation import Incarnation, IncarnationTracker, Observation
from sidecar.metrics import SidecarMetrics


@dataclass(frozen=True)
class Sample:
    seq: int
    started_at_unix: float  # wall time at the read's start, for people and logs
    read: Read
    incarnation: Incarnation
    idle_run_since_seq: int | None = None  # sidecar/idle_run.py


class EngineSampler:
    def __init__(self, config: ReadConfig, metrics: SidecarMetrics):
        self._config = config
        self._metrics = metrics
        self._tracker = IncarnationTracker()
        self._idle_run = IdleRunTracker()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine-read")

    async def sample(self, seq: int) -> Sample:
        started_at_unix = time.time()
        c = self._config
        read = await asyncio.get_running_loop().run_in_executor(
            self._pool, functools.partial(read_work, c.target, c.hint, timeout_s=c.read_timeout_s,
                                          max_body_bytes=c.max_body_bytes))
        observation = Observation(
            answered=read.outcome is not ReadOutcome.REFUSED,
            process_start_time=read.process_start_time,
            counters=read.restart_counters or None,
        )
        incarnation = self._tracker.observe(seq, observation)
        idle_run_since_seq = self._idle_run.observe(seq, idle=read.outcome.is_idle, incarnation=incarnation.value)
        self._metrics.observe_read(read, incarnation.value)
        return Sample(seq, started_at_unix, read, incarnation, idle_run_since_seq)

    def close(self) -> None:
        # A read still running ends by its own deadline; do not wait for it.
        self._pool.shutdown(wait=False, cancel_futures=True)
