"""One numbered read of the engine: the hook's reader, run off the event loop.

The reader is synchronous (stdlib sockets and a parse, under one end-to-end deadline), so each
read runs on a daemon thread (sidecar/daemon_thread.py); the coalescer guarantees one at a time.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from modeldrain.hook.config import ReadConfig
from modeldrain.hook.events import EventLog
from modeldrain.hook.outcome import Read, ReadOutcome
from modeldrain.hook.reader import EngineReader
from modeldrain.sidecar.connections import ConnectionCount, ConnectionWatch
from modeldrain.sidecar.daemon_thread import run_in_daemon_thread
from modeldrain.sidecar.idle_run import IdleRunTracker
from modeldrain.sidecar.incarnation import Incarnation, IncarnationTracker, Observation
from modeldrain.sidecar.metrics import SidecarMetrics


@dataclass(frozen=True)
class Sample:
    seq: int
    started_at_unix: float  # wall time at the read's start, for people and logs
    read: Read
    incarnation: Incarnation
    target_url: str  # what was read: the configured target, or the engine's own port it moved to
    idle_run_since_seq: int | None = None  # sidecar/idle_run.py
    connections: ConnectionCount | None = None  # sidecar/connections.py, scanned with the read
    # The first read of the unbroken run of reads that found no outside connection (None: this one found
    # some, or could not count): what idle_run_since_seq is to idle reads.
    connections_free_since_seq: int | None = None


class EngineSampler:
    def __init__(self, config: ReadConfig, metrics: SidecarMetrics, log: EventLog,
                 connections: ConnectionWatch | None = None):
        self._config = config
        self._connections = connections
        self._free_run = IdleRunTracker()  # a run of reads with no outside connection
        self._reader = EngineReader(config, lambda message: log.warning("config_warning", message=message))
        self._metrics = metrics
        self._tracker = IncarnationTracker()
        self._idle_run = IdleRunTracker()

    async def sample(self, seq: int) -> Sample:
        started_at_unix = time.time()
        c = self._config
        engine_read = run_in_daemon_thread(lambda: self._reader.read(c.read_timeout_s), "engine-read")
        if self._connections is None:
            read, connections = await engine_read, None
        else:  # side by side: the scan adds nothing to the read's latency
            read, connections = await asyncio.gather(engine_read, self._connections.scan())
        observation = Observation(
            answered=read.outcome is not ReadOutcome.REFUSED,
            process_start_time=read.process_start_time,
            counters=read.restart_counters or None,
        )
        incarnation = self._tracker.observe(seq, observation)
        idle_run_since_seq = self._idle_run.observe(seq, idle=read.outcome.is_idle, incarnation=incarnation.value)
        self._metrics.observe_read(read, incarnation.value)
        free_since_seq = None
        if connections is not None:
            free_since_seq = self._free_run.observe(seq, idle=connections.established == 0, incarnation=0)
        return Sample(seq, started_at_unix, read, incarnation, self._reader.target.url, idle_run_since_seq,
                      connections, free_since_seq)
