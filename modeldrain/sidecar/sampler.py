"""One numbered read of the engine: the hook's reader run off the event loop, each read told
which engine process gave it and where its run of idle reads began.

The reader is synchronous (stdlib sockets and a parse, under one end-to-end deadline), so each
read runs on a daemon thread (modeldrain/sidecar/daemon_thread.py); the coalescer guarantees one at a time.

Which process answered (IncarnationTracker). The controller holds a restarted replica
(docs/requirements.md, R4: the gauges of a fresh process cannot speak for the work it set out to
account for), so it needs to see a restart between its two idle reads. Evidence, any of which
bumps the counter once: `process_start_time_seconds` changed (vLLM with one API server serves
it); the listener went away (connection refused) after answering, and then answered again; a
cumulative counter went backwards (a fresh process starts its counters at zero).

Where the idle run began (RunTracker). A member must read idle twice, and a read between them
that finds work holds the operation (R2). Other callers (a peer, a second controller replica)
take reads too, so the controller's two reads need not have consecutive seqs; each answer says
the seq of the first read of the unbroken run of complete idle reads, in one engine incarnation,
that it ends. Two idle answers F and S belong to one run exactly when S's run began at or before
F's seq. The same tracker follows the run of reads that found no outside connection.

Both trackers are pure: fed one observation per read, in read order, and never look at a clock.
"""

from __future__ import annotations

import asyncio
import enum
import time
from dataclasses import dataclass, field

from modeldrain.hook.events import EventLog
from modeldrain.hook.outcome import Read, ReadOutcome
from modeldrain.hook.reader import EngineReader
from modeldrain.hook.settings import ReadConfig
from modeldrain.sidecar.connections import ConnectionCount, ConnectionWatch
from modeldrain.sidecar.daemon_thread import run_in_daemon_thread
from modeldrain.sidecar.metrics import SidecarMetrics

__all__ = [
    "EngineSampler", "Evidence", "Incarnation", "IncarnationTracker", "NumberedRead", "Observation", "RunTracker",
]


class Evidence(enum.Enum):
    START_TIME_CHANGED = "start_time_changed"
    LISTENER_RETURNED = "listener_returned"
    COUNTER_WENT_BACKWARDS = "counter_went_backwards"


@dataclass(frozen=True)
class Observation:
    """What one read says about the process behind the listener."""

    answered: bool  # the listener accepted the connection (any outcome but refused)
    process_start_time: float | None = None
    # Cumulative counters (name -> summed value) when the read carries them; None when not.
    counters: dict[str, float] | None = None


@dataclass(frozen=True)
class Incarnation:
    value: int  # 0: the first engine process this sidecar saw answer
    evidence: Evidence | None  # what made the latest bump; None before any
    changed_at_seq: int | None  # the read that saw it


@dataclass
class IncarnationTracker:
    """Folds observations into the incarnation counter."""

    _value: int = 0
    _evidence: Evidence | None = None
    _changed_at_seq: int | None = None
    _seen: bool = False  # some read has been answered
    _away: bool = False  # refused since the last answer
    _start_time: float | None = None
    _counters: dict[str, float] = field(default_factory=dict)

    @property
    def current(self) -> Incarnation:
        return Incarnation(self._value, self._evidence, self._changed_at_seq)

    def observe(self, seq: int, obs: Observation) -> Incarnation:
        if not obs.answered:
            if self._seen:
                self._away = True
            return self.current
        evidence = self._evidence_of(obs)
        if evidence is not None:
            self._value += 1
            self._evidence = evidence
            self._changed_at_seq = seq
            # A new process: what the old one said no longer bounds what the new one may say.
            self._counters = {}
        self._seen = True
        self._away = False
        if obs.process_start_time is not None:
            self._start_time = obs.process_start_time
        if obs.counters:
            self._counters.update(obs.counters)
        return self.current

    def _evidence_of(self, obs: Observation) -> Evidence | None:
        if not self._seen:
            return None
        if (obs.process_start_time is not None and self._start_time is not None
                and obs.process_start_time != self._start_time):
            return Evidence.START_TIME_CHANGED
        if self._away:
            return Evidence.LISTENER_RETURNED
        for name, value in (obs.counters or {}).items():
            if name in self._counters and value < self._counters[name]:
                return Evidence.COUNTER_WENT_BACKWARDS
        return None


@dataclass
class RunTracker:
    _since_seq: int | None = None
    _incarnation: int | None = None

    def observe(self, seq: int, *, idle: bool, incarnation: int) -> int | None:
        """The seq where the idle run this read belongs to began; None when this read is not idle."""
        if not idle:
            self._since_seq = None
        elif self._since_seq is None or incarnation != self._incarnation:
            self._since_seq = seq
        self._incarnation = incarnation
        return self._since_seq


@dataclass(frozen=True)
class NumberedRead:
    seq: int
    started_at_unix: float  # wall time at the read's start, for people and logs
    read: Read
    incarnation: Incarnation
    target_url: str  # what was read: the configured target, or the engine's own port it moved to
    idle_run_since_seq: int | None = None  # RunTracker, above
    connections: ConnectionCount | None = None  # modeldrain/sidecar/connections.py, scanned with the read
    # The first read of the unbroken run of reads that found no outside connection (None: this one found
    # some, or could not count): what idle_run_since_seq is to idle reads.
    connections_free_since_seq: int | None = None


class EngineSampler:
    def __init__(self, config: ReadConfig, metrics: SidecarMetrics, log: EventLog,
                 connections: ConnectionWatch | None = None):
        self._config = config
        self._connections = connections
        self._free_run = RunTracker()  # a run of reads with no outside connection
        self._reader = EngineReader(config, lambda message: log.warning("config_warning", message=message))
        self._metrics = metrics
        self._tracker = IncarnationTracker()
        self._idle_run = RunTracker()

    async def sample(self, seq: int) -> NumberedRead:
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
        return NumberedRead(seq, started_at_unix, read, incarnation, self._reader.target.url, idle_run_since_seq,
                      connections, free_since_seq)
