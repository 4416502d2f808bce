"""Clients behind a service mesh's sidecar, for real: a Pod's network namespace (engine emulator,
drain-sidecar, a stand-in mesh proxy: emulation/mesh_proxy.py) and a client's, joined by a
link-local veth pair. The clients dial the proxy's inbound listener and the proxy dials the engine
from loopback (Istio: 127.0.0.6), so the engine's port sees no client from outside the Pod; the
sidecar's count must still see them (modeldrain/sidecar/mesh.py). Root (namespaces, veth)."""

from __future__ import annotations

import http.client

import pytest

from emulation.mesh_proxy import MeshProxyProcess
from modeldrain.sidecar.socket_table import established
from tests.sidecar.contract import assert_work
from tests.sidecar.sidecar_process import SidecarProcess

from .link_local import pod_with_an_engine

pytestmark = [pytest.mark.root, pytest.mark.slow]

CLIENTS = 3


@pytest.fixture(scope="module")
def pod():
    with pod_with_an_engine() as (pair, port, engine):
        sidecar = pair.in_pod(lambda: SidecarProcess("--port", str(port), "--engine", "vllm").start())
        try:
            yield pair, engine, sidecar
        finally:
            sidecar.stop()


def _client(pair, port):
    """A keep-alive client through the proxy: one answer, the connection left open."""
    def connect():
        connection = http.client.HTTPConnection(pair.pod_url_host, port, timeout=10)
        connection.request("GET", "/health")
        response = connection.getresponse()
        response.read()
        assert response.status == 200
        return connection
    return pair.in_client(connect)


@pytest.mark.parametrize("mesh, inbound, source", [("istio", 15006, "127.0.0.6"), ("linkerd", 4143, "127.0.0.1")])
def test_clients_connected_through_a_mesh_proxy_are_counted(pod, mesh, inbound, source):
    pair, engine, sidecar = pod
    proxy = pair.in_pod(lambda: MeshProxyProcess(mesh, engine.port, die_with_parent=False).start())
    try:
        before = pair.in_pod(lambda: assert_work(sidecar.work()))["connections"]
        assert before["established"] == 0 and mesh.capitalize() in before["detail"], before
        clients = [_client(pair, inbound) for _ in range(CLIENTS)]
        # What the engine's port sees: the proxy's relays, all from loopback, none from outside the Pod.
        relays = pair.in_pod(lambda: [str(c.remote) for c in established(f"/proc/{pair.pod_holder.pid}",
                                                                         [engine.port])])
        assert relays.count(source) == CLIENTS, relays
        seen = pair.in_pod(lambda: assert_work(sidecar.work()))["connections"]
        assert seen["established"] == CLIENTS and seen["free_since_seq"] is None, seen
        assert f"{CLIENTS} through {mesh.capitalize()}'s proxy" in seen["detail"], seen
        for client in clients:
            client.close()
    finally:
        pair.in_pod(proxy.stop)


def test_a_mesh_proxy_listening_elsewhere_makes_the_count_unknown(pod):
    """Istio's outbound listener is there, its inbound one is on a port the sidecar does not know:
    the relayed clients cannot be counted, and the answer says so rather than zero."""
    pair, engine, sidecar = pod
    proxy = pair.in_pod(lambda: MeshProxyProcess("istio", engine.port, "--inbound-port", "15106",
                                                           die_with_parent=False).start())
    try:
        client = _client(pair, 15106)
        seen = pair.in_pod(lambda: assert_work(sidecar.work()))["connections"]
        assert seen["established"] is None and "inbound listener on 15006" in seen["detail"], seen
        client.close()
    finally:
        pair.in_pod(proxy.stop)
