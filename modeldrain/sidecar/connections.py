"""How many clients outside the Pod hold a connection to the port the Service targets: the count a
router-less retirement waits to see at zero.

Spec "Retirement protocol": without spec.router, removing the Service endpoint does not prove the
connections clients made through it have ended. The Pod's network namespace knows: its socket
tables (modeldrain/sidecar/socket_table.py) list every established connection on the port, and the Pod's own
addresses (modeldrain/sidecar/pod_addresses.py) say which peers are inside the Pod (the hook, the sidecar's
reads, an in-Pod proxy). Peers are never excluded by any other address: a client SNAT'd to the
node's address (NodePort, a load balancer with externalTrafficPolicy Cluster) looks like kubelet.

A table that cannot be read makes the count None, with the reason: unknown holds the controller,
it never reads as zero. Whether a connection carries data is not asked: no decision could use it,
since a long non-streaming request moves no data either.

Behind a service mesh's sidecar the clients are connected to the mesh proxy, not to the engine
(modeldrain/sidecar/mesh.py): the count adds what the proxy's inbound listener holds, and is
unknown when a mesh is seen whose inbound listener is not.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Collection

from modeldrain.sidecar.daemon_thread import run_in_daemon_thread
from modeldrain.sidecar.mesh import MESH_PORTS, seen_meshes
from modeldrain.sidecar.pod_addresses import Network, PodAddressError, own_networks
from modeldrain.sidecar.socket_table import Connection, SocketTableError, port_table

__all__ = ["ConnectionCount", "ConnectionWatch", "count_connections", "outside"]


@dataclass(frozen=True)
class ConnectionCount:
    ports: tuple[int, ...]
    established: int | None  # from peers outside the Pod; None: the tables could not be read
    scanned_monotonic_s: float  # when the scan started, on the sidecar's monotonic clock
    duration_ms: float
    detail: str


def outside(connections: Collection[Connection], own: Collection[Network]) -> list[Connection]:
    """The connections whose peer is not one of the Pod's own addresses (loopback included)."""
    return [c for c in connections if not any(c.remote in network for network in own)]


def count_connections(proc_root: str, ports: Collection[int], *,
                      clock: Callable[[], float] = time.monotonic) -> ConnectionCount:
    """One scan of the tables. Blocking; never raises."""
    started_s = clock()
    ordered = tuple(sorted(set(ports)))

    def done(count: int | None, detail: str) -> ConnectionCount:
        return ConnectionCount(ordered, count, round(started_s, 6), round((clock() - started_s) * 1000.0, 3), detail)

    try:
        own = own_networks(proc_root)
        table = port_table(proc_root, ordered + MESH_PORTS)
    except (PodAddressError, SocketTableError) as exc:
        return done(None, f"count unknown: {exc}")
    views = seen_meshes(table, ordered, own)
    relayed = {c.inode for view in views for c in view.relays}  # a mesh's own upstream connection is no client
    found = [c for c in outside([c for c in table.established if c.local_port in ordered], own)
             if c.inode not in relayed]
    direct = len(found)
    meshes: list[str] = []
    for view in views:
        held = view.held
        if held is None:
            return done(None, f"count unknown: {view.mesh.name}'s proxy is in the Pod ({view.evidence}) but "
                              f"not its inbound listener on {view.mesh.inbound_port}: the clients it relays "
                              "cannot be counted")
        found += held
        meshes.append(f"{len(held)} through {view.mesh.name}'s proxy ({view.evidence})")
    if not found:
        via = f", directly or through a mesh proxy ({'; '.join(meshes)})" if meshes else ""
        return done(0, f"no established connection from outside the Pod{via}")
    via = f" ({direct} directly; {'; '.join(meshes)})" if meshes else ""
    return done(len(found), f"{len(found)} established from outside the Pod{via}")


class ConnectionWatch:
    """The scan, run off the event loop (a daemon thread, as the engine read is)."""

    def __init__(self, proc_root: str, ports: Collection[int]):
        self._proc_root = proc_root
        self._ports = tuple(ports)

    @property
    def ports(self) -> tuple[int, ...]:
        return self._ports

    async def scan(self) -> ConnectionCount:
        return await run_in_daemon_thread(lambda: count_connections(self._proc_root, self._ports),
                                          "connection-scan")
