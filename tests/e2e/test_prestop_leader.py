"""A worker's hook following its leader: a real leader (emulated engine + real drain-sidecar) and the
real prestop of a worker, over real sockets."""

from __future__ import annotations

import json
import time

from emulation.engine_process import EngineProcess
from tests.engine_work import send_requests
from tests.sidecar.secret_volume import k8s_secret
from tests.sidecar.sidecar_process import SidecarProcess

from .prestop_run import run_prestop, start_prestop

WORKER = ["--route-wait", "0.5", "--grace", "30"]


def test_the_worker_waits_until_the_leader_reads_idle_twice(tmp_path):
    token = k8s_secret(tmp_path, "leader-token", 1)
    with EngineProcess("--kind", "vllm") as leader_engine, \
            SidecarProcess("--port", str(leader_engine.port), "--engine", "vllm", "--token-file", str(token)) as leader:
        send_requests(leader_engine, 3, duration_s=3.0)
        run = run_prestop(*WORKER, "--follow-leader", f"http://127.0.0.1:{leader.port}",
                          "--leader-token-file", str(token), "--port", "1")  # its own engine: nothing there
    assert run.code == 0, run.stderr
    assert run.finished["outcome"] == "idle" and run.finished["elapsed_s"] >= 2.5
    started = run.event("drain_started")
    assert started["target"] == f"http://127.0.0.1:{leader.port}/v1/work"
    assert started["target_source"] == "the leader's drain-sidecar, from --follow-leader"
    first = run.event("read_state")
    assert first["outcome"] == "busy" and first["in_flight"] == 3


def test_the_worker_returns_at_once_when_the_leader_is_gone():
    with EngineProcess("--kind", "vllm") as leader_engine:
        leader = SidecarProcess("--port", str(leader_engine.port), "--engine", "vllm").start()
        send_requests(leader_engine, 2, duration_s=60)
        hook = start_prestop(*WORKER, "--follow-leader", f"http://127.0.0.1:{leader.port}", "--port", "1")
        time.sleep(2.0)  # the worker is reading a busy leader
        started = time.monotonic()
        leader.stop()  # the leader's Pod is gone
        out, err = hook.communicate(timeout=15)
        waited_s = time.monotonic() - started
    assert hook.returncode == 0, err
    finished = json.loads(out.splitlines()[-1])
    assert finished["outcome"] == "leader_gone" and finished["reason"].startswith("leader gone")
    assert waited_s < 2.5  # the next read after the leader left


def test_a_wrong_token_is_waited_out_not_taken_for_gone(tmp_path):
    token = k8s_secret(tmp_path, "leader-token", 1)
    wrong = tmp_path / "wrong"
    wrong.write_text("nope")
    with EngineProcess("--kind", "vllm") as leader_engine, \
            SidecarProcess("--port", str(leader_engine.port), "--engine", "vllm", "--token-file", str(token)) as leader:
        run = run_prestop("--route-wait", "0.5", "--grace", "8", "--follow-leader", f"http://127.0.0.1:{leader.port}",
                          "--leader-token-file", str(wrong), "--port", "1")
    assert run.code == 10  # the worker's own deadline, G - 5
    state = run.event("read_state")
    assert state["outcome"] == "unavailable" and "401" in state["detail"]
