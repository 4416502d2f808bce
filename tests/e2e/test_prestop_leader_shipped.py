"""Issue 29, item 1, with deploy/leaderworkerset.yaml's own command lines: the leader Pod deleted first
(LeaderWorkerSet's rolling update and scale-down), then the worker's preStop.

Two Pods as two network namespaces joined by a veth pair (10.29.0.1, the leader; 10.29.0.2, the
worker), nothing routed beyond them. In each, the shipped drain-sidecar's args and environment
(the downward API's values and LeaderWorkerSet's variables, as tests/deploy/manifests.py reads
them); in the leader, an emulated SGLang on its port 30000. The worker's processes run in a mount
namespace of their own whose /etc/hosts names the leader (LWS_LEADER_ADDRESS) and whose resolver
is an NXDOMAIN server in the worker's namespace, as a cluster DNS after the leader Pod is gone.
The worker's postStart, `prestop check` and preStop are the shipped commands, with only the
install path and the token's mount point moved to this machine's. Root only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.containers.dns import NxdomainServer
from tests.containers.netns import call_in_netns, http_get
from tests.deploy.manifests import documents, pod_templates, poststart_command, prestop_command
from tests.environment import require_executable, require_root
from tests.sidecar.secret_volume import k8s_secret

from .prestop_run import PRESTOP

LEADER_ADDRESS, WORKER_ADDRESS = "10.29.0.1", "10.29.0.2"
SHIPPED_TOKEN = "/var/run/secrets/drain-sidecar/token"
SHIPPED_PRESTOP = "/drain/prestop"
SIDECAR_PORT = 8490
START_TIMEOUT_S = 20.0
KNOWN_WITHIN_S = 15.0


def shipped_group():
    (lws,) = [d for d in documents() if d.kind == "LeaderWorkerSet"]
    leader, worker = pod_templates([lws])
    return leader, worker


def container(template, name):
    return next(c for c in template.containers() if c["name"] == name)


def pod_env(template, env_of_container) -> dict[str, str]:
    """What the downward API and LeaderWorkerSet put in a container's environment."""
    values = {"metadata.namespace": "default", "metadata.name": template.pod_name,
              "metadata.uid": f"uid-of-{template.pod_name}"}
    env = dict(template.injected_env)
    for item in env_of_container.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
            continue
        path = item["valueFrom"]["fieldRef"]["fieldPath"]
        env[item["name"]] = values.get(path) or template.labels.get(path.split("'")[1], "")
    return env


class Namespaces:
    """A network namespace per Pod, each held by a `sleep`, joined by a veth pair."""

    def __init__(self):
        self.holders: dict[str, subprocess.Popen] = {}

    def __enter__(self):
        for pod in ("leader", "worker"):
            self.holders[pod] = subprocess.Popen(["unshare", "--net", "sleep", "3600"], stdin=subprocess.DEVNULL)
        time.sleep(0.3)
        for pod in self.holders:
            assert os.readlink(f"/proc/{self.pid(pod)}/ns/net") != os.readlink("/proc/self/ns/net")
            self.ip(pod, "link", "set", "lo", "up")
        self.ip("leader", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0w", "netns", self.pid("worker"))
        for pod, link, address in (("leader", "eth0", LEADER_ADDRESS), ("worker", "eth0w", WORKER_ADDRESS)):
            self.ip(pod, "addr", "add", f"{address}/30", "dev", link)
            self.ip(pod, "link", "set", link, "up")
        return self

    def __exit__(self, *exc_info):
        for holder in self.holders.values():
            holder.kill()
            holder.wait(5)

    def pid(self, pod: str) -> str:
        return str(self.holders[pod].pid)

    def netns(self, pod: str) -> str:
        return f"/proc/{self.pid(pod)}/ns/net"

    def ip(self, pod: str, *args: str) -> None:
        subprocess.run(["nsenter", "-t", self.pid(pod), "-n", "ip", *args], check=True, capture_output=True, timeout=10)

    def argv(self, pod: str, argv: list[str], *, binds: dict[str, Path] | None = None, own_pids: bool = False) -> list[str]:
        """argv in the Pod's network namespace; the worker's with its own /etc/hosts and resolver
        (and, for a hook, a PID namespace of its own: its log mirror is its own PID 1's stdout)."""
        prefix = ["nsenter", f"--net={self.netns(pod)}"]
        if not binds:
            return prefix + argv
        mounts = " && ".join(f'mount --bind "{source}" {target}' for target, source in binds.items())
        pids = ["--pid", "--fork", "--mount-proc"] if own_pids else []
        return prefix + ["unshare", "--mount", "--propagation", "private", *pids, "--", "sh", "-c",
                         f'{mounts} && exec "$@"', "sh", *argv]


def localized(argv: list[str], token: Path) -> list[str]:
    return [PRESTOP if a == SHIPPED_PRESTOP else str(token) if a == SHIPPED_TOKEN else
            a.replace(SHIPPED_TOKEN, str(token)) for a in argv]


def wait_for(what: str, predicate, timeout_s: float = START_TIMEOUT_S):
    deadline_at = time.monotonic() + timeout_s
    while True:
        try:
            value = predicate()
            if value:
                return value
        except OSError:
            pass
        if time.monotonic() > deadline_at:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(0.2)


@pytest.mark.root
def test_the_shipped_worker_leaves_once_its_leader_pod_was_deleted_first(tmp_path):
    require_root("two network namespaces and a private /etc/hosts")
    for tool in ("unshare", "nsenter", "ip"):
        require_executable(tool, "two Pods' network namespaces")
    leader_t, worker_t = shipped_group()
    token = k8s_secret(tmp_path, "group-token", 1)
    no_processes = tempfile.mkdtemp(prefix="empty-proc-")
    hosts, resolv = tmp_path / "hosts", tmp_path / "resolv.conf"
    leader_name = worker_t.injected_env["LWS_LEADER_ADDRESS"]
    hosts.write_text(f"127.0.0.1 localhost\n{LEADER_ADDRESS} {leader_name}\n")
    resolv.write_text("nameserver 127.0.0.1\n")  # the NXDOMAIN server in the worker's namespace
    binds = {"/etc/hosts": hosts, "/etc/resolv.conf": resolv}
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("POD_", "LWS_", "MEMBER_"))}
    base_env["MODELDRAIN_PROC_ROOT"] = no_processes  # the engines of other tests are in no Pod here

    def sidecar_argv(template) -> tuple[list[str], dict[str, str]]:
        sidecar = container(template, "drain-sidecar")
        return ([sys.executable, "-m", "modeldrain.sidecar", *localized(sidecar["args"], token)],
                {**base_env, **pod_env(template, sidecar)})

    worker_engine = container(worker_t, "engine")
    hook_env = {**base_env, **pod_env(worker_t, worker_engine), "TMPDIR": str(tmp_path)}
    started: list[subprocess.Popen] = []

    def start(argv, env, log):
        process = subprocess.Popen(argv, env=env, stdout=open(tmp_path / log, "wb"), stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
        started.append(process)
        return process

    def hook(argv, timeout_s=60) -> subprocess.CompletedProcess:
        return subprocess.run(pods.argv("worker", localized(argv, token), binds=binds, own_pids=True), env=hook_env,
                              capture_output=True, text=True, timeout=timeout_s)

    def worker_work() -> dict:
        status, body = call_in_netns(pods.netns("worker"), lambda: http_get(
            SIDECAR_PORT, "/v1/work", {"Authorization": "Bearer group-token"}, timeout_s=10))
        assert status == 200, body
        return json.loads(body)

    with Namespaces() as pods:
        dns = NxdomainServer(pods.netns("worker"))
        try:
            engine = start(pods.argv("leader", [sys.executable, "-m", "emulation.engine", "--kind", "sglang",
                                                "--port", "30000"]), base_env, "leader-engine.log")
            leader_argv, leader_env = sidecar_argv(leader_t)
            leader = start(pods.argv("leader", leader_argv), leader_env, "leader-sidecar.log")
            worker_argv, worker_env = sidecar_argv(worker_t)
            start(pods.argv("worker", worker_argv, binds=binds), worker_env, "worker-sidecar.log")
            memory = wait_for("the worker's sidecar knows its leader", lambda: worker_work()["leader"]["known"]
                              and worker_work()["leader"], KNOWN_WITHIN_S + START_TIMEOUT_S)
            post_start = hook(poststart_command(worker_engine))
            # The worker's sidecar has just read the leader: an SGLang zero counts once the scheduler's
            # heartbeat (at most once a second) has advanced since the leader sidecar's previous read.
            time.sleep(1.5)
            check_argv = [a for a in prestop_command(worker_engine) if a not in ("--grace", "30")]
            check = hook([check_argv[0], "check", *check_argv[1:]])
            # The leader Pod is deleted first: its engine and its sidecar exit; its address stays, refusing.
            for process in (leader, engine):
                process.send_signal(signal.SIGKILL)
                process.wait(10)
            refused = hook(prestop_command(worker_engine))
            # ... and once the Pod object is gone its name no longer resolves.
            hosts.write_text("127.0.0.1 localhost\n")
            gone = hook(prestop_command(worker_engine))
        finally:
            dns.close()
            for process in started:
                if process.poll() is None:
                    process.kill()
                    process.wait(10)
    assert memory["uid"] == f"uid-of-{leader_t.pod_name}" and memory["url"] == f"http://{leader_name}:8490/v1/work"
    assert post_start.returncode == 0, post_start.stderr
    assert check.returncode == 0 and json.loads(check.stdout)["leader_answered"], check.stdout + check.stderr
    for run, says in ((refused, "connection refused"), (gone, "not found")):
        finished = json.loads(run.stdout.splitlines()[-1])
        assert (run.returncode, finished["outcome"]) == (0, "leader_gone"), run.stdout + run.stderr
        assert says in finished["reason"], finished
        # The shipped route wait (5 s) and a read, never the G - 5 = 25 s of a leader never known.
        assert 5.0 <= finished["elapsed_s"] < 10.0, finished
