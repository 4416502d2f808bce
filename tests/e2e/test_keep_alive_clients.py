"""Clients that do not go away, for real: the emulated vLLM in a Pod's network namespace, two clients
on keep-alive connections from a client's namespace (what a plain Service or a NodePort leaves:
every request on an established connection goes to the same Pod), and kubelet's deletion with the
real `prestop`. Nothing tells those clients of the delete, so the replica never reads idle and the
drain runs to G - 5; the hook says why: connections from outside the Pod open since before the
delete. Root (namespaces, veth)."""

from __future__ import annotations

import json
import time

import pytest

from emulation.keep_alive import KeepAliveClient
from emulation.kubelet import delete_pod
from modeldrain.hook.exitcodes import ExitCode
from tests.containers.netns import enter_netns

from .link_local import pod_with_an_engine
from .prestop_run import NO_PROCESSES, PRESTOP

pytestmark = [pytest.mark.root, pytest.mark.slow]

GRACE_S = 20
REQUEST_S = 1.0  # each client's requests, back to back; the two are half a request apart


def test_keep_alive_clients_hold_the_replica_busy_to_g_minus_5_and_the_hook_says_why():
    with pod_with_an_engine() as (pair, port, engine):
        clients = []
        try:
            for _ in range(2):
                clients.append(KeepAliveClient(pair.pod_url_host, port, duration_s=REQUEST_S,
                                               in_thread=lambda: enter_netns(pair.client_netns)).start())
                time.sleep(REQUEST_S / 2)
            time.sleep(REQUEST_S)
            hook = [PRESTOP, "--proc-root", NO_PROCESSES, "--port", str(port), "--grace", str(GRACE_S)]
            report = pair.in_pod(lambda: delete_pod(engine, hook, grace_s=GRACE_S), timeout_s=GRACE_S + 30)
            deleted_at = report.t0
        finally:
            tallies = [client.stop() for client in clients]
    events = [json.loads(line) for line in report.hook_stderr.splitlines() if line.startswith("{")]
    finished = json.loads(report.hook_stdout.strip().splitlines()[-1])
    started = next(e for e in events if e["event"] == "drain_started")
    progress = [e for e in events if e["event"] == "progress"]
    # The replica never read idle: the drain ran to its deadline, G - 5, and SIGTERM came then.
    assert report.hook_exit_code == ExitCode.DEADLINE, (report.hook_stdout, report.hook_stderr)
    assert finished["outcome"] == "deadline" and GRACE_S - 5 <= finished["elapsed_s"] < GRACE_S - 4, finished
    assert not [e for e in events if e.get("verdict") == "idle"], events
    # Both clients kept their first connection and kept being answered on it after the delete, until SIGTERM.
    assert all(t.connections == 1 and t.completed_after(deleted_at + GRACE_S - 6) >= 1 for t in tallies), tallies
    assert sum(t.cut for t in tallies) >= 1, tallies  # what was in flight at SIGTERM (vLLM's SIGTERM aborts it)
    # The hook said why, at its start, in its progress lines and in its reason.
    assert started["outside_connections"] == 2 and started["outside_connections_from_before_delete"] == 2, started
    # (A progress line comes only when the in-flight count changes; two clients back to back hold it at 2.)
    assert all(e["outside_connections_from_before_delete"] == 2 for e in progress), progress
    assert "2 of them open since before the delete" in finished["reason"], finished
    print(json.dumps({"grace_s": GRACE_S, "hook_exit": report.hook_exit_code, "drain_elapsed_s": finished["elapsed_s"],
                      "sigterm_at_s": round(report.sigterm_at, 2),
                      "completed_after_delete": [t.completed_after(deleted_at) for t in tallies],
                      "cut": [t.cut for t in tallies], "reason": finished["reason"]}))
