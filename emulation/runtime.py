"""The emulated engine's state while it runs: one incarnation of the process, and what outlives it.

An incarnation is what a real process would hold (scheduler, counters, start time, template); the
`restart` misbehaviour replaces it. `EngineTotals` are the emulator's own bookkeeping for tests
(GET /control/stats) and are kept across incarnations, so a test can count every engine read.
"""

from __future__ import annotations

import enum
import os
import time
from dataclasses import dataclass, replace

from emulation.engine_config import EngineConfig, EngineKind, Role
from emulation.exposition import Body, Renderer
from emulation.http_active import HttpActive
from emulation.live_metrics import EngineSnapshot, live_families
from emulation.misbehaviour import MisbehaviourSetting
from emulation.scheduler import Outcome, Phase, RankSnapshot, Scheduler
from emulation.server_load import ServerLoad
from emulation.stats_ticks import StatsTicks
from emulation.template import EngineTemplate, engine_template


class ServingState(enum.Enum):
    SERVING = "serving"
    DRAINING = "draining"  # SIGTERM received, work still finishing (drain, drain-timeout)
    STOPPING = "stopping"  # the listener is closed or closing, the process about to exit


@dataclass
class EngineTotals:
    """Counts over the emulator's whole life, whatever restarts happen."""

    completed: int = 0
    aborted: int = 0  # dropped with no response (SIGTERM abort, restart)
    failed: int = 0  # given up with HTTP 500 (drain timeout)
    rejected: int = 0  # refused with HTTP 500 on arrival (vLLM draining)
    client_gone: int = 0
    metrics_reads: int = 0

    def count(self, outcome: Outcome) -> None:
        if outcome is Outcome.COMPLETED:
            self.completed += 1
        elif outcome is Outcome.ABORTED:
            self.aborted += 1
        elif outcome is Outcome.FAILED:
            self.failed += 1
        elif outcome is Outcome.CLIENT_GONE:
            self.client_gone += 1


@dataclass(frozen=True)
class Incarnation:
    """One emulated process: its start time, scheduler, families and renderer."""

    number: int
    start_time_s: float  # wall clock, as process_start_time_seconds
    scheduler: Scheduler
    template: EngineTemplate
    renderer: Renderer
    ticks: StatsTicks  # when SGLang's scheduler republishes (emulation/stats_ticks.py)


def new_incarnation(config: EngineConfig, number: int, totals: EngineTotals) -> Incarnation:
    start_time_s = time.time()
    template = engine_template(config, start_time_s, os.getpid())
    scheduler = Scheduler(config.kind, config.role, config.dp, config.max_running, totals.count)
    return Incarnation(number, start_time_s, scheduler, template, Renderer(config, template.families),
                       StatsTicks(time.monotonic()))


class EngineRuntime:
    """Everything the handlers read and change; the wiring hands it to each of them."""

    def __init__(self, config: EngineConfig):
        self.config = config
        self.totals = EngineTotals()
        self.incarnation = new_incarnation(config, 1, self.totals)
        self.setting = MisbehaviourSetting(mode=config.misbehaviour)
        self.state = ServingState.SERVING
        self.rejects_new_work = False  # vLLM draining with --shutdown-timeout: new requests get 500
        self.health_ok = True  # SGLang answers /health 503 once SIGTERM arrives
        self.port = config.port
        # vLLM's abort: requests SIGTERM found in flight get no answer, and their clients' connections
        # stay open (the API process lingers until they go): the handlers holding them.
        self.lingering: set[object] = set()  # their request protocols (aiohttp's RequestHandler)
        # SGLang's HTTP gauge: the process's handlers, whatever restarts the scheduler.
        self.http_active = HttpActive()
        # vLLM's GET /load: the API servers' counts from arrival (emulation/server_load.py).
        self.server_load = ServerLoad(config.server_load_tracking, config.api_servers)

    @property
    def scheduler(self) -> Scheduler:
        return self.incarnation.scheduler

    def restart(self) -> None:
        """A fresh process: new start time, counters at zero, nothing in flight."""
        self.incarnation = new_incarnation(self.config, self.incarnation.number + 1, self.totals)

    def engine_snapshot(self) -> EngineSnapshot:
        scheduler = self.scheduler
        publishes = scheduler.first_run_seen or not (
            (self.config.kind is EngineKind.SGLANG and self.config.role is Role.DECODE)
            or (self.config.kind is EngineKind.VLLM and self.config.multiprocess))
        ranks = scheduler.snapshot()
        if self.config.kind is EngineKind.SGLANG:
            published = self.incarnation.ticks.view(ranks, self.setting, time.monotonic())
            ranks = tuple(replace(rank, heartbeat_s=published.heartbeat_s) for rank in published.ranks)
        return EngineSnapshot(ranks, publishes, self.http_active.snapshot())

    def render_metrics(self, accept: str, accept_encoding: str, setting: MisbehaviourSetting,
                       fill_to_bytes: int = 0, only_samples: frozenset[str] | None = None) -> Body:
        families = live_families(self.config, self.incarnation.template, self.engine_snapshot(), setting)
        return self.incarnation.renderer.render(families, accept, accept_encoding, fill_to_bytes, only_samples)

    def render_idle_metrics(self, accept: str) -> Body:
        """The exposition as it would read with nothing in flight (the redirect decoy)."""
        idle_rank = RankSnapshot({phase: 0 for phase in Phase}, 0, 0, 0, ())
        snapshot = EngineSnapshot(tuple(idle_rank for _ in range(self.config.dp)), True)
        families = live_families(self.config, self.incarnation.template, snapshot, MisbehaviourSetting())
        return self.incarnation.renderer.render(families, accept, "")

    def stats(self) -> dict:
        ranks = self.scheduler.snapshot()
        return {
            "kind": self.config.kind.value,
            "role": self.config.role.value,
            "pid": os.getpid(),
            "port": self.port,
            "state": self.state.value,
            "on_sigterm": self.config.on_sigterm.value,
            "misbehave": self.setting.mode.value,
            "completed": self.totals.completed,
            "aborted": self.totals.aborted,
            "failed": self.totals.failed,
            "rejected": self.totals.rejected,
            "client_gone": self.totals.client_gone,
            "running": sum(r.running for r in ranks),
            "waiting": sum(r.waiting for r in ranks),
            "in_flight": sum(r.in_flight for r in ranks),
            "metrics_reads": self.totals.metrics_reads,
            "incarnation": self.incarnation.number,
            "start_time": self.incarnation.start_time_s,
        }
