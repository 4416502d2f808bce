"""One Pod deletion under a router's load, as every drain-configuration family runs it.

The caller starts the engine (and whatever stands in front of it); this module sends the load,
deletes the Pod with kubelet's emulation (`emulation.kubelet.delete_pod`) and sums up how the
requests the delete touched ended, when the engine got SIGTERM and SIGKILL, when it exited and what
the hook said. Everything is measured on real processes and sockets; only the seed is chosen.

A load has two parts, both optional:
- the router's Poisson arrivals of short requests, which stop a random lag after the delete (the
  router learning of it);
- tail requests: a few requests sent as the warm-up starts, each drawn to end at a time within a
  window after the delete (say G − 20 … G − 17), so a family can put the last work where a rule
  decides (the exit reserve, the poll cadence).
"""

from __future__ import annotations

import atexit
import functools
import json
import random
import shutil
import socket
import subprocess
import tempfile
import time
import zlib
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable, Protocol, Sequence

from emulation import constants as emulation_constants
from emulation.engine_process import EngineProcess
from emulation.kubelet import DeletionReport, delete_pod
from emulation.load import (
    Durations,
    LoadGenerator,
    LoadTally,
    RequestBody,
    RequestOutcome,
    RequestRecord,
    UniformDurations,
    emulator_body,
)
from emulation.timeline import delete_tally

# Tail requests end within their window; after the engine is gone they end at once. This bounds
# the wait for their records.
TAIL_SETTLE_S = 10.0

# The router learns of the delete after a lag drawn from this range: long enough that requests
# land on a replica already being deleted (the route wait's reason), short as real routers are.
ROUTE_LAG_RANGE_S = (0.5, 2.0)

# Scheduler slots: enough that the loads below queue only now and then, as a healthy replica does.
MAX_RUNNING = 16


@dataclass(frozen=True)
class TailRequests:
    count: int
    ends_after_delete_s: tuple[float, float]  # each request ends at a time drawn from this window


@dataclass(frozen=True)
class RouterLoad:
    """What the router sends one replica around its deletion."""

    warmup_s: float  # load before the delete, so the replica is in its steady state
    rate_per_s: float | None = None  # Poisson arrivals of `durations`, until the router drops the replica
    durations: Durations | None = None
    tail: TailRequests | None = None
    route_lag_range_s: tuple[float, float] = ROUTE_LAG_RANGE_S

    def tail_durations(self) -> Durations | None:
        """Sent as the warm-up starts, a request of warmup + x s ends x s after the delete."""
        if self.tail is None:
            return None
        low, high = self.tail.ends_after_delete_s
        return UniformDurations(self.warmup_s + low, self.warmup_s + high)


IDLE = RouterLoad(warmup_s=0.5)


def seed_of(*names: object) -> int:
    """The same for every strategy of a scenario's repeat: only the hook (or the engine) differs."""
    return zlib.crc32("/".join(str(n) for n in names).encode())


def route_lag_s(seed: int, lag_range_s: tuple[float, float]) -> float:
    return round(random.Random(seed).uniform(*lag_range_s), 3)


def dead_port() -> socket.socket:
    """A port bound but not listening: connections to it are refused, and nothing else can take it."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    return holder


@functools.cache
def _empty_proc_root() -> Path:
    path = Path(tempfile.mkdtemp(prefix="bench-no-processes-"))
    atexit.register(shutil.rmtree, path, True)
    return path


def prestop_argv(prestop: Path, grace_s: float, *flags: str) -> list[str]:
    """prestop as a cell runs it: quiet, and blind to this machine's other processes.

    In a Pod the hook sees only its own container's processes (the engine's), and takes the
    engine's kind, role and port from that argv. This machine's /proc shows every emulated engine,
    hook and test process running here, so the hook is pointed at an empty process table
    (`--proc-root`): what it knows comes from its flags and the engine's exposition, as in a Pod
    whose engine argv says nothing more.
    """
    return [str(prestop), "--grace", f"{grace_s:g}", *flags, "--quiet", "--proc-root", str(_empty_proc_root())]


def hook_events(report: DeletionReport) -> dict[str, dict]:
    """The hook's JSON log events by name (the first of each; the last for exit_reserve_changed)."""
    events: dict[str, dict] = {}
    for line in (report.hook_stderr + "\n" + report.hook_stdout).splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line that is not JSON (none expected) is not an event
        if isinstance(event, dict) and "event" in event:
            if event["event"] == "exit_reserve_changed":
                events[event["event"]] = event
            else:
                events.setdefault(event["event"], event)
    return events


@dataclass(frozen=True)
class Deletion:
    """A finished deletion: kubelet's report (every request's record in it) and the router's lag."""

    report: DeletionReport
    in_flight_at_delete: int
    route_lag_s: float | None

    @property
    def records(self) -> tuple[RequestRecord, ...]:
        return self.report.load.records if self.report.load else ()

    def at(self, offset_s: float) -> float:
        """Monotonic time of `offset_s` after this deletion's delete."""
        return self.report.t0 + offset_s

    def last_completed_at(self) -> float | None:
        """Monotonic end of the last request completed after the delete; None when none was."""
        ends = [r.ended_at for r in self.records
                if r.outcome is RequestOutcome.COMPLETED and r.ended_at > self.report.t0]
        return max(ends) if ends else None

    def in_flight_at(self, monotonic_at: float) -> int:
        """Requests the router had sent and not yet seen end at that moment."""
        return sum(1 for r in self.records if r.started_at <= monotonic_at < r.ended_at)

    def summary(self) -> dict:
        return asdict(summarize(self))


@dataclass(frozen=True)
class DeletionSummary:
    """What a table row needs, in seconds after the delete; None where it did not happen."""

    route_lag_s: float | None
    touched: int  # requests in flight at the delete or sent after it
    in_flight_at_delete: int
    completed: int
    cut: int  # the connection closed without a whole answer
    rejected_new: int  # HTTP 500 to a request arriving while vLLM's --shutdown-timeout drains
    failed: int  # any other 5xx: a request in flight when --shutdown-timeout ran out
    refused: int
    other: int
    hook_returned_at_s: float | None
    hook_exit_code: int | None
    hook_outcome: str | None  # prestop's drain_finished outcome
    hook_exit_policy: str | None  # prestop's drain_started exit_policy (full_drain, follow_engine_drain)
    hook_reads: int | None
    hook_exit_reserve_s: float | None  # the reserve the hook ended with (grown from the exposition's role)
    sigterm_at_s: float
    sigkill_at_s: float | None
    engine_exited_at_s: float
    engine_exit_code: int | None
    last_completed_at_s: float | None
    held_idle_s: float  # engine exit − max(delete, last completed request's end)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def summarize(deletion: Deletion) -> DeletionSummary:
    report = deletion.report
    tally = delete_tally(report)
    touched = [r for r in deletion.records if r.ended_at >= report.t0]
    rejected = [r for r in touched if r.outcome is RequestOutcome.REJECTED]
    rejected_new = sum(1 for r in rejected if emulation_constants.VLLM_DRAIN_REJECT_MESSAGE in r.detail)
    last = deletion.last_completed_at()
    last_s = None if last is None else last - report.t0
    events = hook_events(report)
    finished = events.get("drain_finished", {})
    policy = events.get("drain_started", {}).get("exit_policy")
    reserve = events.get("exit_reserve_changed", events.get("drain_started", {})).get("exit_reserve_s")
    return DeletionSummary(
        route_lag_s=deletion.route_lag_s,
        touched=tally.touched if tally else 0, in_flight_at_delete=deletion.in_flight_at_delete,
        completed=tally.completed if tally else 0, cut=tally.cut if tally else 0,
        rejected_new=rejected_new, failed=len(rejected) - rejected_new,
        refused=tally.refused if tally else 0, other=tally.other if tally else 0,
        hook_returned_at_s=_rounded(report.hook_returned_at), hook_exit_code=report.hook_exit_code,
        hook_outcome=finished.get("outcome"),
        hook_exit_policy=policy if isinstance(policy, str) else None,
        hook_reads=finished.get("reads") if isinstance(finished.get("reads"), int) else None,
        hook_exit_reserve_s=float(reserve) if isinstance(reserve, (int, float)) else None,
        sigterm_at_s=round(report.sigterm_at, 3), sigkill_at_s=_rounded(report.sigkill_at),
        engine_exited_at_s=round(report.engine_exited_at, 3), engine_exit_code=report.engine_exit_code,
        last_completed_at_s=_rounded(last_s),
        held_idle_s=round(report.engine_exited_at - max(0.0, last_s or 0.0), 3),
    )


def _with_tail(report: DeletionReport, tail_load: LoadGenerator) -> DeletionReport:
    """The report with the tail requests' records added to the router's."""
    extra = tail_load.wait(timeout_s=TAIL_SETTLE_S)
    ours = report.load or LoadTally((), 0)
    return replace(report, load=LoadTally(ours.records + extra.records, ours.in_flight + extra.in_flight))


class Replica(Protocol):
    """What a deletion needs of an engine: the emulator's EngineProcess or a real server (engines.servers)."""

    @property
    def base_url(self) -> str: ...

    process: subprocess.Popen | None


def delete_under_load(engine: Replica, load: RouterLoad, seed: int, grace_s: float, *,
                      hook_argv: Sequence[str] | None = None, hook_sleep_s: float | None = None,
                      at_delete: Callable[[], object] | None = None,
                      request_body: RequestBody = emulator_body) -> Deletion:
    """Send `load`, delete the Pod around `engine` with the given preStop, return once it exited.

    `at_delete` runs just before the delete (a barrier, so two Pods are deleted at once).
    `request_body` shapes each request for the engine (a real one takes max_tokens, not a duration).
    """
    tail_load = None
    if load.tail is not None:
        tail_durations = load.tail_durations()
        assert tail_durations is not None
        tail_load = LoadGenerator(engine.base_url, concurrency=load.tail.count, max_requests=load.tail.count,
                                  durations=tail_durations, seed=seed + 2, request_body=request_body).start()
    router = None
    if load.rate_per_s is not None:
        if load.durations is None:
            raise ValueError("a load with a rate says its durations")
        router = LoadGenerator(engine.base_url, rate_per_s=load.rate_per_s, durations=load.durations,
                               seed=seed, request_body=request_body).start()
    time.sleep(load.warmup_s)
    in_flight = (router.tally().in_flight if router else 0) + (tail_load.tally().in_flight if tail_load else 0)
    lag_s = route_lag_s(seed, load.route_lag_range_s) if router else None
    if at_delete is not None:
        at_delete()
    if engine.process is None:
        raise ValueError("the engine was never started")
    report = delete_pod(engine.process, hook_argv, grace_s, hook_sleep_s=hook_sleep_s, load=router,
                        route_drop_after_s=lag_s)
    if tail_load is not None:
        report = _with_tail(report, tail_load)
    return Deletion(report, in_flight, lag_s)


def engine(*args: str) -> EngineProcess:
    """An emulated engine for one cell, tied to the calling thread (a cell runs wholly in one), with
    the drain matrix's scheduler slots; its router lag range is the matrix's too."""
    return EngineProcess(*args, "--max-running", str(MAX_RUNNING))

