"""A multi-Pod replica deleted: when does the worker get SIGTERM, against the leader's last request?

In a leader-served replica (vLLM with --headless workers, SGLang with --node-rank ≥ 1) only the
leader serves metrics, yet every worker holds shards the leader's running requests need. A
LeaderWorkerSet deletes the group's Pods at once. Here the leader is an emulated vLLM engine with
a real drain-sidecar in front of it (a native sidecar: it gets SIGTERM once the leader's engine has
exited) and prestop as its own hook; the worker is another emulated engine, with no metrics of its
own (its hook is pointed at a port where nothing listens), and one of:

- `prestop --follow-leader URL`: waits on the leader's drain-sidecar until the leader reads idle
  twice (or the leader is gone, or the worker's own deadline);
- prestop that only sees its own (absent) engine: refused after the route wait, exit 11;
- no hook: SIGTERM at the delete.

Measured: the worker's SIGTERM relative to the end of the leader's last completed request
(negative: the worker was told to stop while the leader still served), and how many of the
leader's requests were still running at that moment. The emulated leader does not fail when its
worker leaves, so these are counted, not cut: in a real multi-Pod replica they would fail.
"""

from __future__ import annotations

import enum
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from bench.drains.deletion import (
    IDLE,
    Deletion,
    RouterLoad,
    TailRequests,
    dead_port,
    delete_under_load,
    engine,
    hook_events,
    prestop_argv,
    seed_of,
)
from emulation.kubelet import DeletionReport, delete_pod
from emulation.load import SHORT_REQUESTS
from tests.sidecar.sidecar_process import SidecarProcess

FAMILY = "leader and worker"
GRACE_S = 30.0

# Both deletions start within this of each other, or the cell fails (a stuck start-up).
BARRIER_TIMEOUT_S = 60.0
# A native sidecar leaves at once when its engine is gone; this bounds the wait.
SIDECAR_EXIT_WAIT_S = 10.0


# Repeats per cell (full run, --quick): paired by seed, enough for a spread.
REPEATS = (3, 1)


class WorkerHook(enum.Enum):
    FOLLOWS_LEADER = "prestop --follow-leader"
    OWN_ENGINE = "prestop, own engine only"
    NO_HOOK = "no hook"

    def argv(self, prestop: Path, dead: int, sidecar_port: int) -> list[str] | None:
        if self is WorkerHook.NO_HOOK:
            return None
        leader = f"http://127.0.0.1:{sidecar_port}" if self is WorkerHook.FOLLOWS_LEADER else "none"
        return prestop_argv(prestop, GRACE_S, "--port", str(dead), "--engine", "vllm", "--follow-leader", leader)


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    load: RouterLoad


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("idle", "no requests at all", IDLE),
    Scenario("busy leader", "4 req/s of 0.5–3 s until the router drops it, and 2 requests ending 8–15 s after "
             "the delete", RouterLoad(5.0, rate_per_s=4.0, durations=SHORT_REQUESTS, tail=TailRequests(2, (8.0, 15.0)))),
)
QUICK_SCENARIOS = ("busy leader",)


@dataclass(frozen=True)
class Cell:
    scenario: Scenario
    worker: WorkerHook
    repeat: int

    def expected_s(self) -> float:
        return self.scenario.load.warmup_s + (18.0 if self.scenario.name != "idle" else 9.0)

    def key(self) -> dict:
        return {"family": FAMILY, "grace_s": GRACE_S, "scenario": self.scenario.name,
                "strategy": self.worker.value, "repeat": self.repeat}


def cells(repeats: int | None = None, quick: bool = False) -> list[Cell]:
    repeats = repeats or REPEATS[quick]
    return [Cell(sc, w, r) for sc in SCENARIOS if not quick or sc.name in QUICK_SCENARIOS for w in WorkerHook
            for r in range(repeats)]


def _stop_native_sidecar(sidecar: SidecarProcess) -> None:
    """SIGTERM once the engine has exited, as kubelet stops a native sidecar after the main containers."""
    assert sidecar.process is not None
    sidecar.process.send_signal(signal.SIGTERM)
    try:
        sidecar.process.wait(SIDECAR_EXIT_WAIT_S)
    except subprocess.TimeoutExpired:
        pass  # sidecar.stop() in the caller's finally ends it; the cell's numbers do not depend on it


def run(cell: Cell, prestop: Path) -> dict:
    seed = seed_of(FAMILY, cell.scenario.name, cell.repeat)
    dead = dead_port()
    barrier = threading.Barrier(2)
    worker_done: dict[str, DeletionReport | BaseException] = {}
    try:
        with engine("--kind", "vllm") as leader_engine, engine("--kind", "vllm") as worker_engine:
            assert leader_engine.port is not None
            sidecar = SidecarProcess("--port", str(leader_engine.port), "--engine", "vllm").start()
            try:
                assert sidecar.port is not None
                worker_argv = cell.worker.argv(prestop, dead.getsockname()[1], sidecar.port)

                def delete_worker() -> None:
                    try:
                        barrier.wait(BARRIER_TIMEOUT_S)
                        worker_done["report"] = delete_pod(worker_engine, worker_argv, GRACE_S)
                    except BaseException as exc:  # re-raised in the cell's thread below
                        worker_done["error"] = exc

                worker = threading.Thread(target=delete_worker, name="worker-deletion")
                worker.start()
                leader_argv = prestop_argv(prestop, GRACE_S, "--port", str(leader_engine.port), "--engine", "vllm")
                try:
                    leader = delete_under_load(leader_engine, cell.scenario.load, seed, GRACE_S,
                                               hook_argv=leader_argv, at_delete=lambda: barrier.wait(BARRIER_TIMEOUT_S))
                except BaseException:
                    barrier.abort()
                    raise
                finally:
                    worker.join()
                _stop_native_sidecar(sidecar)
            finally:
                sidecar.stop()
    finally:
        dead.close()
    if "error" in worker_done:
        raise RuntimeError(f"the worker's deletion failed: {worker_done['error']!r}")
    report = worker_done["report"]
    assert isinstance(report, DeletionReport)
    return {"seed": seed, **_pair(leader, report)}


def _pair(leader: Deletion, worker: DeletionReport) -> dict:
    """The leader's deletion, and the worker's on the leader's clock (both deletes were at once)."""
    worker_sigterm = worker.t0 + worker.sigterm_at
    last = leader.last_completed_at()
    events_offset_s = worker.t0 - leader.report.t0
    return {
        **leader.summary(),
        "delete_skew_s": round(events_offset_s, 3),
        "worker_hook_returned_at_s": None if worker.hook_returned_at is None
        else round(worker.hook_returned_at + events_offset_s, 3),
        "worker_hook_exit_code": worker.hook_exit_code,
        "worker_hook_outcome": hook_events(worker).get("drain_finished", {}).get("outcome"),
        "worker_sigterm_at_s": round(worker_sigterm - leader.report.t0, 3),
        "worker_exited_at_s": round(worker.engine_exited_at + events_offset_s, 3),
        "worker_sigkill_at_s": None if worker.sigkill_at is None else round(worker.sigkill_at + events_offset_s, 3),
        "worker_sigterm_after_last_request_s": None if last is None else round(worker_sigterm - last, 3),
        "leader_in_flight_at_worker_sigterm": leader.in_flight_at(worker_sigterm),
    }
