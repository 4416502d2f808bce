"""Issue 29: LeaderWorkerSet deletes the leader Pod before its workers. A worker whose leader was known
(its own drain-sidecar saw it answer) and is gone by the worker's preStop leaves after its route
wait; a leader never known stays unknown; a new leader of the same name is not the old one. Real
processes: the leader's emulated engine and drain-sidecar, the worker's drain-sidecar and prestop."""

from __future__ import annotations

import time

from emulation.engine_process import EngineProcess
from tests.engine_work import send_requests
from tests.sidecar.secret_volume import k8s_secret
from tests.sidecar.sidecar_process import SidecarProcess, kill_now

from .prestop_run import run_prestop
from .test_prestop_leader import refusing_port

KNOWN_WITHIN_S = 15.0  # the worker's sidecar reads an unknown leader every 2 s; room for a loaded machine


def leader_sidecar(engine: EngineProcess, token, uid: str, *args: str) -> SidecarProcess:
    return SidecarProcess("--port", str(engine.port), "--engine", "vllm", "--token-file", str(token), *args,
                          env={"POD_NAME": "llm-0", "POD_NAMESPACE": "team-a", "POD_UID": uid}).start()


def worker_sidecar(leader_url: str, token) -> SidecarProcess:
    """The worker's own sidecar, its own engine nowhere (a headless worker serves no metrics)."""
    return SidecarProcess("--port", "1", "--token-file", str(token), "--follow-leader", leader_url,
                          env={"POD_NAME": "llm-0-1", "POD_NAMESPACE": "team-a", "POD_UID": "worker-uid"}).start()


def wait_known(worker: SidecarProcess, token: str) -> dict:
    deadline_at = time.monotonic() + KNOWN_WITHIN_S
    while True:
        leader = worker.work({"Authorization": f"Bearer {token}"})["leader"]
        if leader["known"] or time.monotonic() > deadline_at:
            return leader
        time.sleep(0.2)


def worker_hook(leader_url: str, worker: SidecarProcess | None, token, *extra: str):
    own = worker.base_url if worker is not None else "none"
    return run_prestop("--route-wait", "1", "--grace", "30", "--follow-leader", leader_url,
                       "--leader-token-file", str(token), "--own-sidecar", own, "--port", "1", *extra)


def test_a_worker_whose_known_leader_was_deleted_first_leaves_after_its_route_wait(tmp_path):
    token = k8s_secret(tmp_path, "group-token", 1)
    with EngineProcess("--kind", "vllm") as engine:
        leader = leader_sidecar(engine, token, "leader-uid-1")
        url = f"http://127.0.0.1:{leader.port}"
        with worker_sidecar(url, token) as worker:
            known = wait_known(worker, "group-token")
            leader.stop()  # the leader Pod is deleted first: its sidecar and engine have exited
            kill_now(engine)
            run = worker_hook(url, worker, token)
            alone = worker_hook(url, None, token, "--grace", "8")  # without the sidecar's memory: as before
    assert known["known"] and known["uid"] == "leader-uid-1" and known["answers"] >= 1, known
    assert (run.code, run.finished["outcome"]) == (0, "leader_gone"), run.stdout + run.stderr
    assert run.elapsed_s < 8.0  # the route wait (1 s) and one refused read, not G - 5 = 25 s
    memory = run.event("leader_memory")
    assert memory["known"] is True and memory["leader_uid"] == "leader-uid-1", memory
    assert "connection refused" in run.finished["reason"] and "leader-uid-1" in run.finished["reason"]
    # The same worker without its sidecar's memory cannot tell a deleted leader from a wrong address.
    assert (alone.code, alone.finished["outcome"]) == (12, "leader_unreachable"), alone.stdout
    assert alone.event("leader_memory")["known"] is False


def test_a_leader_the_worker_never_reached_stays_unknown(tmp_path):
    """A newcomer's wrong address must never look like a leader that left."""
    token = k8s_secret(tmp_path, "group-token", 1)
    url = f"http://127.0.0.1:{refusing_port()}"
    with worker_sidecar(url, token) as worker:
        time.sleep(2.5)  # the worker's sidecar has tried the leader at least once
        memory = worker.work({"Authorization": "Bearer group-token"})["leader"]
        run = worker_hook(url, worker, token, "--grace", "8")
    assert memory["known"] is False and memory["last_outcome"] == "refused", memory
    assert (run.code, run.finished["outcome"]) == (12, "leader_unreachable"), run.stdout
    assert "never had an answer" in run.event("leader_memory")["detail"]


def test_a_new_leader_of_the_same_name_is_not_the_workers_leader(tmp_path):
    """The group is being replaced: a new leader Pod (another UID) answers at the old one's address,
    its engine busy. The worker's leader is gone: it leaves, rather than wait on another group."""
    token = k8s_secret(tmp_path, "group-token", 1)
    port = refusing_port()
    url = f"http://127.0.0.1:{port}"
    with EngineProcess("--kind", "vllm") as old_engine:
        old = leader_sidecar(old_engine, token, "leader-uid-1", "--listen", f"127.0.0.1:{port}")
        with worker_sidecar(url, token) as worker:
            known = wait_known(worker, "group-token")
            old.stop()
            with EngineProcess("--kind", "vllm") as new_engine, \
                    leader_sidecar(new_engine, token, "leader-uid-2", "--listen", f"127.0.0.1:{port}"):
                send_requests(new_engine, 2, duration_s=60)
                run = worker_hook(url, worker, token)
                kill_now(new_engine)
        kill_now(old_engine)
    assert known["uid"] == "leader-uid-1", known
    assert (run.code, run.finished["outcome"]) == (0, "leader_gone"), run.stdout + run.stderr
    assert "another leader answers" in run.finished["reason"] and "leader-uid-2" in run.finished["reason"]
    assert run.elapsed_s < 8.0
