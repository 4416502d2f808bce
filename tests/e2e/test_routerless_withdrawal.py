"""Scale-down without a router, for real: a Pod's network namespace (engine emulator on `::`, drain-sidecar)
and a client's, joined by a link-local-only veth pair. The sidecar counts the client's keep-alive
connections; once the client stops, the engine closes them (5 s, as vLLM) and the retirement
completes; a client that keeps sending holds it to the 30 s withdrawal budget; probes and a
Prometheus-style scrape from the client's address are transient. Root (namespaces, veth)."""

from __future__ import annotations

import http.client
import json
import threading
import time

import pytest

from modeldrain.retirement import client as retirement
from tests.sidecar.contract import assert_work
from tests.sidecar.sidecar_process import SidecarProcess

from .link_local import pod_with_an_engine

pytestmark = [pytest.mark.root, pytest.mark.slow]

POD = retirement.ExpectedPod("team-a", "llm-0", "uid-llm-0")
KEEP_ALIVES = 3


@pytest.fixture(scope="module")
def pod():
    with pod_with_an_engine() as (pair, port, engine):
        sidecar = pair.in_pod(lambda: SidecarProcess(
            "--port", str(port), "--engine", "vllm",
            env={"POD_NAMESPACE": POD.namespace, "POD_NAME": POD.name, "POD_UID": POD.uid}).start())
        try:
            yield pair, engine, sidecar
        finally:
            sidecar.stop()


def _work(pair, sidecar) -> dict:
    return pair.in_pod(lambda: assert_work(sidecar.work()))


def _keep_alive(pair, engine, path="/health"):
    """A client connection that has had one answer and stays open (HTTP/1.1 keep-alive)."""
    connection = pair.in_client(lambda: _connect(pair, engine))
    _get(connection, path)
    return connection


def _connect(pair, engine):
    connection = http.client.HTTPConnection(pair.pod_url_host, engine.port, timeout=10)
    connection.connect()
    return connection


def _get(connection, path="/health") -> None:
    connection.request("GET", path)
    response = connection.getresponse()
    response.read()
    assert response.status == 200


def _retire(pair, sidecar, budget_s=60.0):
    member = retirement.MemberEndpoint(sidecar.base_url, POD)
    rounds = []
    started_at = time.monotonic()
    decision = pair.in_pod(lambda: retirement.retire([member], budget_s=budget_s, router=False,
                                                     on_round=lambda at_s, d: rounds.append((at_s, d.reason.value))),
                           timeout_s=budget_s + 30)
    return decision, time.monotonic() - started_at, rounds


def test_idle_keep_alives_are_counted_then_closed_by_the_engine_and_the_retirement_completes(pod):
    pair, engine, sidecar = pod
    connections = [_keep_alive(pair, engine) for _ in range(KEEP_ALIVES)]
    last_response_at = time.monotonic()
    seen = _work(pair, sidecar)["connections"]
    assert seen["established"] == KEEP_ALIVES, seen  # the sidecar's own loopback read is not counted
    assert engine.port in seen["ports"]  # (this machine's /proc may show another engine's --port too)
    # The client stops sending; the endpoint is gone. The engine closes each idle keep-alive 5 s after its answer.
    decision, elapsed_s, rounds = _retire(pair, sidecar)
    since_last_s = time.monotonic() - last_response_at
    assert decision.verdict is retirement.RetirementVerdict.DELETE, (decision, rounds)
    assert ("connected" in {r for _, r in rounds}) and rounds[-1][1] == "idle_twice", rounds
    # Timing is the behaviour: 5 s of keep-alive, then three rounds; generous for a loaded machine.
    assert 5.0 <= since_last_s <= 25.0, (since_last_s, rounds)
    for connection in connections:
        assert connection.sock.recv(1) == b""  # closed by the engine, not by the client
        connection.close()
    print(json.dumps({"withdrawn_and_deleted_after_last_response_s": round(since_last_s, 2),
                      "retirement_s": round(elapsed_s, 2), "rounds": len(rounds)}))


def test_a_client_that_keeps_sending_holds_the_retirement_to_the_withdrawal_budget(pod):
    pair, engine, sidecar = pod
    connection = _keep_alive(pair, engine)
    stop = threading.Event()
    sent = []

    def keep_sending():
        while not stop.wait(0.5):
            _get(connection, "/health")
            sent.append(time.monotonic())
    sender = threading.Thread(target=keep_sending, daemon=True)
    sender.start()
    try:
        decision, elapsed_s, rounds = _retire(pair, sidecar)
    finally:
        stop.set()
        sender.join(5)
        connection.close()
    assert decision.verdict is retirement.RetirementVerdict.ABORT and decision.reason is retirement.Reason.CONNECTED, decision
    assert 30.0 <= elapsed_s <= 40.0, elapsed_s
    assert len(sent) > 40  # the client really kept sending throughout


def test_probes_and_a_scrape_from_outside_the_pod_are_transient(pod):
    """Kubelet's probes (a connection each, closed) and a Prometheus scrape on the engine's port (a
    keep-alive the engine closes 5 s later) come from the client's address here, as they would from
    the node's: they are counted while open, never excluded, and cannot hold the retirement for long."""
    pair, engine, sidecar = pod
    stop = threading.Event()
    probes = []
    scrape = {"connection": None, "count": 0}

    def probe_and_scrape():
        next_scrape_at = time.monotonic()
        while not stop.wait(1.0):
            probe = pair.in_client(lambda: _connect(pair, engine))
            probe.request("GET", "/health", headers={"Connection": "close"})  # kubelet's httpGet closes
            probe.getresponse().read()
            probe.close()
            probes.append(time.monotonic())
            if time.monotonic() >= next_scrape_at:  # every 10 s, on a kept-alive connection
                if scrape["connection"] is None or scrape["connection"].sock is None:
                    scrape["connection"] = pair.in_client(lambda: _connect(pair, engine))
                try:
                    _get(scrape["connection"], "/metrics")
                except (OSError, http.client.HTTPException):  # the engine closed it: reconnect, as Prometheus does
                    scrape["connection"] = pair.in_client(lambda: _connect(pair, engine))
                    _get(scrape["connection"], "/metrics")
                scrape["count"] += 1
                next_scrape_at += 10.0
    traffic = threading.Thread(target=probe_and_scrape, daemon=True)
    traffic.start()
    try:
        time.sleep(1.5)  # a scrape's keep-alive is open now, from the same address as any client
        assert _work(pair, sidecar)["connections"]["established"] >= 1
        decision, elapsed_s, rounds = _retire(pair, sidecar)
    finally:
        stop.set()
        traffic.join(10)
        if scrape["connection"] is not None:
            scrape["connection"].close()
    assert decision.verdict is retirement.RetirementVerdict.DELETE, (decision, rounds)
    assert elapsed_s < retirement.WITHDRAWAL_BUDGET_S, (elapsed_s, rounds)
    assert len(probes) >= elapsed_s / 2 and scrape["count"] >= 1
