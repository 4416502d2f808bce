"""Issue 29, item 4: kubelet runs a container's preStop again when it restarts mid-drain. The second
run knows the first (a marker in $TMPDIR), says so, and does not wait the route wait the first
already served. Real processes: an emulated engine and two execs of the real prestop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from emulation.engine_process import EngineProcess

from .prestop_run import NO_PROCESSES, PRESTOP, HookRun

ROUTE_WAIT_S = 4.0
FIRST_RUNS_S = 1.5  # at least this much of the first run's route wait passes before kubelet loses it
MARKER_WITHIN_S = 15.0  # the first run's start-up (imports) on a loaded 2-core machine


def hook_argv(engine_port: int, *extra: str) -> list[str]:
    return [PRESTOP, "--proc-root", NO_PROCESSES, "--route-wait", str(ROUTE_WAIT_S), "--grace", "30", "--port",
            str(engine_port), *extra, "--quiet"]


def run(argv: list[str], tmpdir) -> HookRun:
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=dict(os.environ, TMPDIR=str(tmpdir)))
    return HookRun(proc.returncode, time.monotonic() - started, proc.stdout, proc.stderr)


def first_run(argv: list[str], tmpdir) -> tuple[subprocess.Popen, float]:
    """The first exec, once it has left its marker and run at least FIRST_RUNS_S; and when it started."""
    started = time.monotonic()
    hook = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TMPDIR=str(tmpdir)))
    while not [name for name in os.listdir(tmpdir) if name.startswith("prestop-run-")]:
        assert time.monotonic() - started < MARKER_WITHIN_S and hook.poll() is None, "the first run left no marker"
        time.sleep(0.02)
    time.sleep(max(0.0, started + FIRST_RUNS_S - time.monotonic()))
    return hook, started


def names(hook: HookRun) -> list[str]:
    return [e["event"] for e in hook.events]


def test_a_run_after_the_first_was_killed_is_a_rerun_and_skips_the_route_wait_it_served(tmp_path):
    with EngineProcess("--kind", "vllm") as engine:
        argv = hook_argv(engine.port)
        first, first_started = first_run(argv, tmp_path)
        # Another hook beside it (another command line) is no rerun of it, its marker there or not.
        other = subprocess.Popen(hook_argv(engine.port, "--interval", "0.5"), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=dict(os.environ, TMPDIR=str(tmp_path)))
        first.send_signal(signal.SIGKILL)  # kubelet restarted: the runtime killed the exec it lost
        served_s = time.monotonic() - first_started
        first.communicate(timeout=10)
        second = run(argv, tmp_path)
        other_out, other_err = other.communicate(timeout=60)
        third = run(argv, tmp_path)  # the second finished: a new drain
    assert other.returncode == 0 and '"event":"rerun"' not in other_err, other_err
    assert second.code == 0 and second.finished["outcome"] == "idle", second.stdout + second.stderr
    assert names(second)[:2] == ["drain_started", "rerun"], names(second)
    rerun = second.event("rerun")
    assert rerun["first_pid"] == first.pid and rerun["first_running"] is False
    # The first exec began just after `first_started`: the second waits at most what is left of it.
    assert 0 <= rerun["route_wait_left_s"] <= ROUTE_WAIT_S - served_s + 0.2
    assert second.event("drain_started")["first_read_s"] == rerun["route_wait_left_s"]
    assert "rerun" not in names(third) and third.event("drain_started")["first_read_s"] == ROUTE_WAIT_S
    assert not [p for p in os.listdir(tmp_path) if p.startswith("prestop-run-")]  # every finished run cleaned up


def test_a_run_beside_a_first_that_still_runs_says_so(tmp_path):
    """An abandoned exec may still run (kubelet stopped waiting, the runtime did not kill it)."""
    with EngineProcess("--kind", "vllm") as engine:
        argv = hook_argv(engine.port)
        first, _ = first_run(argv, tmp_path)
        second = run(argv, tmp_path)
        out, _ = first.communicate(timeout=30)
    rerun = second.event("rerun")
    assert rerun["first_pid"] == first.pid and rerun["first_running"] is True
    assert second.code == 0 and first.returncode == 0
    assert json.loads(out.splitlines()[-1])["outcome"] == "idle"  # the first still ends as it would have
