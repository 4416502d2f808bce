"""A service mesh's proxy in the Pod, seen from the kernel's tables, and the clients it holds.

Behind Istio's or Linkerd's sidecar, a client connects to the mesh proxy's inbound listener (the
Pod's iptables redirect every inbound port to it), and the proxy connects to the engine from
loopback: Istio from 127.0.0.6 (its inbound passthrough source, ::6 in IPv6), Linkerd from
127.0.0.1. The engine's port then lists no connection from outside the Pod while clients are
connected, and a count of the engine's port alone would read a confident zero.

The rule (docs/layouts.md, "A service mesh"): a mesh is in the Pod when its inbound or outbound
listener listens in the Pod's namespace (Istio 15006 / 15001, Linkerd 4143 / 4140), or when the
engine's port has a connection from Istio's passthrough source. The clients it holds are the
connections its inbound listener has from outside the Pod, or, when more, the proxy's upstream
connections to the engine from 127.0.0.6 (each one carries some outside client's request; Linkerd's
come from 127.0.0.1, which in-Pod readers use too, so only its listener counts). A mesh seen whose
inbound listener is not there (another capture port, a proxy still starting) makes the count
unknown: what it relays cannot be counted, and that is never zero.

A REDIRECT keeps the client's address and rewrites the port, so a connection to the inbound
listener does not say which of the Pod's ports it was for: calls to drain-sidecar's port through
the mesh count too, which is why docs/layouts.md has port 8490 excluded from the mesh's capture.
In TPROXY mode the proxy's accepted socket keeps the engine's port and counts as a direct client.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Collection

from modeldrain.sidecar.pod_addresses import Network
from modeldrain.sidecar.socket_table import Connection, PortTable

__all__ = ["MESH_PORTS", "seen_meshes"]


@dataclass(frozen=True)
class Mesh:
    name: str
    inbound_port: int  # where the Pod's inbound connections are redirected
    outbound_port: int  # where the Pod's outbound connections are redirected
    relay_sources: tuple[Network, ...]  # the proxy's own source for its connections to the app, when only it uses one


ISTIO = Mesh("Istio", 15006, 15001, (ipaddress.ip_network("127.0.0.6/32"), ipaddress.ip_network("::6/128")))
LINKERD = Mesh("Linkerd", 4143, 4140, ())
MESHES = (ISTIO, LINKERD)
MESH_PORTS = tuple(sorted({port for mesh in MESHES for port in (mesh.inbound_port, mesh.outbound_port)}))


@dataclass(frozen=True)
class MeshView:
    """One mesh seen in the Pod: why it is taken to be there, and what it holds."""

    mesh: Mesh
    evidence: str
    inbound: list[Connection] | None  # outside connections on its inbound listener; None: no such listener
    relays: list[Connection]  # its upstream connections to the service ports

    @property
    def held(self) -> list[Connection] | None:
        """The larger of the two views of its clients; None when they cannot be counted."""
        if self.inbound is None:
            return None
        return self.inbound if len(self.inbound) >= len(self.relays) else self.relays


def seen_meshes(table: PortTable, service_ports: Collection[int], own: Collection[Network]) -> list[MeshView]:
    """Every mesh whose listener or relays the table shows. A mesh whose port is one of the service
    ports is not looked for: that port is the engine's."""
    views = []
    for mesh in MESHES:
        if {mesh.inbound_port, mesh.outbound_port} & set(service_ports):
            continue
        relays = [c for c in table.established if c.local_port in service_ports
                  and any(c.remote in network for network in mesh.relay_sources)]
        listening = sorted({mesh.inbound_port, mesh.outbound_port} & table.listening)
        evidence = [f"a listener on {', '.join(map(str, listening))}"] if listening else []
        if relays:
            evidence.append(f"{len(relays)} connection(s) to the engine's port from {relays[0].remote}")
        if not evidence:
            continue
        inbound = None
        if mesh.inbound_port in table.listening:
            inbound = [c for c in table.established if c.local_port == mesh.inbound_port
                       and not any(c.remote in network for network in own)]
        views.append(MeshView(mesh, " and ".join(evidence), inbound, relays))
    return views
