"""A worker's hook following its leader: a real leader (emulated engine + real drain-sidecar) and the
real prestop of a worker, over real sockets."""

from __future__ import annotations

import json
import socket
import subprocess
import time

import pytest

from emulation.engine_process import EngineProcess
from tests.engine_work import send_requests
from tests.environment import require_executable, require_root
from tests.sidecar.secret_volume import k8s_secret
from tests.sidecar.sidecar_process import SidecarProcess

from .prestop_run import NO_PROCESSES, PRESTOP, run_prestop, start_prestop

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
        check = run_check("--follow-leader", f"http://127.0.0.1:{leader.port}", "--leader-token-file", str(wrong))
    # The worker's own deadline, G - 5, as a leader that never answered: unknown, its own outcome.
    assert (run.code, run.finished["outcome"]) == (12, "leader_unreachable"), run.stdout
    assert run.elapsed_s >= 3.0 and "401" in run.finished["reason"]
    state = run.event("read_state")
    assert state["outcome"] == "unavailable" and "401" in state["detail"]
    # ... and `prestop check` says so before any deletion: exit 12, one line naming the leader and the 401.
    assert check.returncode == 12 and len(check.stderr.splitlines()) == 1 and "401" in check.stderr


def run_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PRESTOP, "check", "--proc-root", NO_PROCESSES, *args], capture_output=True, text=True,
                          timeout=30)


def refusing_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_leader_on_a_wrong_port_is_unknown_not_gone_and_check_says_so_first():
    """Issue 21: --follow-leader on a wrong port ended leader_gone, exit 0, after the route wait: the
    worker took SIGTERM while its leader served."""
    url = f"http://127.0.0.1:{refusing_port()}"
    check = run_check("--follow-leader", url)
    assert check.returncode == 12 and check.stderr.startswith(f"prestop check: the leader {url}/v1/work does not answer")
    assert len(check.stderr.splitlines()) == 1 and json.loads(check.stdout)["leader_answered"] is False
    run = run_prestop("--route-wait", "0.5", "--grace", "8", "--follow-leader", url, "--port", "1")
    assert (run.code, run.finished["outcome"]) == (12, "leader_unreachable"), run.stdout
    assert run.elapsed_s >= 3.0 and "never answered as a drain-sidecar" in run.finished["reason"]


def test_check_reads_a_busy_then_idle_leader_as_the_drain_would():
    with EngineProcess("--kind", "vllm") as leader_engine, \
            SidecarProcess("--port", str(leader_engine.port), "--engine", "vllm") as leader:
        url = f"http://127.0.0.1:{leader.port}"
        idle = run_check("--follow-leader", url)
        send_requests(leader_engine, 2, duration_s=60)
        time.sleep(1.5)  # the sidecar's next read sees them
        busy = run_check("--follow-leader", url)
    assert idle.returncode == 0 and json.loads(idle.stdout)["outcome"] == "idle", idle.stdout + idle.stderr
    assert busy.returncode == 1 and json.loads(busy.stdout)["in_flight"] == 2, busy.stdout


def test_a_token_file_with_a_line_break_inside_is_refused_at_start(tmp_path):
    bad = tmp_path / "token"
    bad.write_bytes(b"tok\r\nX-Injected: 1\n")
    run = run_prestop("--follow-leader", "http://127.0.0.1:1", "--leader-token-file", str(bad))
    assert run.code == 2 and len(run.stderr.strip().splitlines()) == 1
    assert "--leader-token-file" in run.stderr and "spaces, control or non-ASCII bytes" in run.stderr
    missing = run_check("--follow-leader", "http://127.0.0.1:1", "--leader-token-file", str(tmp_path / "none"))
    assert missing.returncode == 2 and "--leader-token-file" in missing.stderr and "No such file" in missing.stderr


def _served_work(sidecar: SidecarProcess) -> float:
    """The /v1/work answers the sidecar's own /metrics counts as 200."""
    from prometheus_client.parser import text_string_to_metric_families

    status, body, _ = sidecar.request("GET", "/metrics")
    assert status == 200
    return sum(s.value for f in text_string_to_metric_families(body.decode()) for s in f.samples
               if s.name == "modeldrain_sidecar_requests_total" and s.labels == {"route": "/v1/work", "code": "200"})


def test_a_worker_whose_token_rotated_before_its_leaders_is_still_trusted(tmp_path):
    """Issue 30, 4: kubelet refreshed the worker's Secret before the leader's: the worker sent the new
    token, the leader knew only the old one, every read was a 401 and the worker held to its deadline.
    Now a 401 is retried once with the token the worker's file held before."""
    (tmp_path / "leader").mkdir()
    (tmp_path / "worker").mkdir()
    leader_token = k8s_secret(tmp_path / "leader", "old-token", 1)
    worker_token = k8s_secret(tmp_path / "worker", "old-token", 1)
    with EngineProcess("--kind", "vllm") as leader_engine, \
            SidecarProcess("--port", str(leader_engine.port), "--engine", "vllm", "--token-file", str(leader_token),
                           "--token-overlap", "0") as leader:
        send_requests(leader_engine, 2, duration_s=6.0)
        hook = start_prestop(*WORKER, "--follow-leader", f"http://127.0.0.1:{leader.port}",
                             "--leader-token-file", str(worker_token), "--port", "1")
        deadline_at = time.monotonic() + 20
        while _served_work(leader) < 1:  # the worker's first trusted read, with the old token
            assert time.monotonic() < deadline_at and hook.poll() is None, "the worker never read its leader"
            time.sleep(0.05)
        k8s_secret(tmp_path / "worker", "new-token", 2)  # the worker's node refreshed first
        out, err = hook.communicate(timeout=60)
    assert hook.returncode == 0, err
    finished = json.loads(out.splitlines()[-1])
    assert finished["outcome"] == "idle", finished


DUAL_STACK_HOSTS = "::1 leader.dual.test\n127.0.0.1 leader.dual.test\n"


@pytest.mark.root
def test_a_leader_name_with_two_addresses_is_followed_on_the_one_that_answers(tmp_path):
    """Dual stack: the name resolves to ::1 first (nothing listens there) and to 127.0.0.1 (the
    leader's sidecar). The worker's prestop runs in a private mount namespace whose /etc/hosts
    says so; this machine's own /etc/hosts is untouched."""
    require_root("a private mount namespace for /etc/hosts")
    require_executable("unshare", "a private mount namespace for /etc/hosts")
    hosts = tmp_path / "hosts"
    hosts.write_text(DUAL_STACK_HOSTS)
    with EngineProcess("--kind", "vllm") as leader_engine, \
            SidecarProcess("--port", str(leader_engine.port), "--engine", "vllm") as leader:
        send_requests(leader_engine, 2, duration_s=3.0)
        script = f'mount --bind "{hosts}" /etc/hosts && exec "$@"'
        argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "prestop", PRESTOP,
                "--proc-root", NO_PROCESSES, *WORKER, "--follow-leader", f"http://leader.dual.test:{leader.port}",
                "--port", "1", "--quiet"]
        resolved = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "getent",
                                   "getent", "ahostsv6", "leader.dual.test"], capture_output=True, text=True)
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert resolved.stdout.split()[0] == "::1", resolved.stdout + resolved.stderr  # the refusing address first
    finished = json.loads(proc.stdout.splitlines()[-1])
    assert (proc.returncode, finished["outcome"]) == (0, "idle"), proc.stdout + proc.stderr
    assert finished["elapsed_s"] >= 2.5  # it waited out the leader's requests, not "gone" at the first refusal
