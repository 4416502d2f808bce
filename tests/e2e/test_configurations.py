"""The emulator twins of tests/engines/test_configurations.py: the emulator started under real vLLM's
command line with `--api-server-count 2`, `--data-parallel-size 2` or `--enable-server-load-tracking`
(emulation/launch.py turns them into multiprocess mode, engine ranks and GET /load), deleted under
the same load through the kubelet emulation with the real prestop, the hook seeing the engine's argv.
"""

from __future__ import annotations

import json
import time

import pytest

from emulation.engine_process import EngineProcess
from emulation.kubelet import delete_pod
from emulation.launch import LaunchShape
from emulation.load import LoadGenerator, UniformDurations

from .prestop_run import PRESTOP

GRACE_S = 30
ROUTE_LAG_S = 3.0
ROUTE_WAIT_S = 5.0
DURATIONS = UniformDurations(6.0, 9.0)
CONCURRENCY = 8
WARM_LOAD_S = 3.0

CONFIGURATIONS = {
    "two-api-servers": ("--api-server-count", "2"),
    "data-parallel-2": ("--data-parallel-size", "2"),
    "server-load-tracking": ("--enable-server-load-tracking",),
}


def container_proc(tmp_path, engine: EngineProcess) -> str:
    """A /proc showing only the engine, as its container's PID namespace does."""
    root = tmp_path / "proc"
    root.mkdir()
    (root / str(engine.pid)).symlink_to(f"/proc/{engine.pid}")
    return str(root)


def hook_argv(engine: EngineProcess, tmp_path) -> list[str]:
    return [PRESTOP, "--grace", str(GRACE_S), "--proc-root", container_proc(tmp_path, engine), "--quiet"]


def events_of(report) -> list[dict]:
    return [json.loads(line) for line in report.hook_stderr.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("flags", list(CONFIGURATIONS.values()), ids=list(CONFIGURATIONS))
def test_an_emulated_vllm_so_configured_deleted_under_load_cuts_nothing(flags, tmp_path):
    with EngineProcess("--max-running", "16", launch=LaunchShape.VLLM_CLI, launch_engine_args=flags) as engine:
        load = LoadGenerator(engine.base_url, concurrency=CONCURRENCY, durations=DURATIONS, seed=7).start()
        time.sleep(WARM_LOAD_S)
        report = delete_pod(engine, hook_argv(engine, tmp_path), GRACE_S, load=load, route_drop_after_s=ROUTE_LAG_S)
    said = f"{report.load.summary()}; hook exit {report.hook_exit_code}:\n{report.hook_stderr[-3000:]}"
    assert report.hook_exit_code == 0 and not report.hook_abandoned, said
    assert report.cut == 0 and report.rejected == 0 and report.refused == 0 and report.load.other == 0, said
    assert report.completed >= CONCURRENCY, said
    last_done = report.relative(report.load.last_finished_at)
    assert last_done > ROUTE_WAIT_S, said
    # After the last request, and not held to the deadline (G - 5): the lag is measured, not asserted
    # here (reads take seconds on a loaded machine).
    assert last_done <= report.sigterm_at < GRACE_S - 5, said
    events = events_of(report)
    assert events[-1]["outcome"] == "idle", said
    if "--enable-server-load-tracking" in flags:
        idle_reads = [e for e in events if e["event"] in ("read_state", "progress") and e["outcome"] == "idle"]
        assert idle_reads and all("/load reads 0" in e["detail"] for e in idle_reads), idle_reads


def test_an_emulated_vllm_with_two_api_servers_that_served_nothing_returns_at_once(tmp_path):
    with EngineProcess(launch=LaunchShape.VLLM_CLI, launch_engine_args=("--api-server-count", "2")) as engine:
        report = delete_pod(engine, hook_argv(engine, tmp_path), GRACE_S)
    events = events_of(report)
    said = f"hook exit {report.hook_exit_code} at {report.sigterm_at:.2f} s:\n{report.hook_stderr[-3000:]}"
    assert report.hook_exit_code == 0 and events[-1]["outcome"] == "idle", said
    assert report.sigterm_at < GRACE_S - 5, said


def test_an_emulated_vllm_counts_load_per_api_server_and_only_with_the_flag():
    """GET /load as vLLM 0.32 answers it: 0 forever without the flag; with it, each answer is one
    API server's count, so with two of them 4 requests show as 2 (docs/engines.md)."""
    for flags, expected in ((("--enable-server-load-tracking",), {4}),
                            (("--enable-server-load-tracking", "--api-server-count", "2"), {2}),
                            ((), {0})):
        with EngineProcess(launch=LaunchShape.VLLM_CLI, launch_engine_args=flags) as engine:
            load = LoadGenerator(engine.base_url, concurrency=4, durations=UniformDurations(3.0, 3.0),
                                 max_requests=4).start()
            deadline = time.monotonic() + 2.0
            while engine.stats()["in_flight"] < 4 and time.monotonic() < deadline:
                time.sleep(0.05)
            answers = {json.loads(engine.get("/load")[1])["server_load"] for _ in range(4)}
            load.wait(timeout_s=30)
            after = json.loads(engine.get("/load")[1])["server_load"]
        assert answers == expected and after == 0, (flags, answers, after)
