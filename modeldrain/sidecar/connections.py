"""How many clients outside the Pod hold a connection to the port the Service targets: the count a
router-less retirement waits to see at zero.

Spec "Retirement protocol": without spec.router, removing the Service endpoint does not prove the
connections clients made through it have ended. The Pod's network namespace knows: its socket
tables (modeldrain/sidecar/socket_table.py) list every established connection on the port, and the Pod's own
addresses (modeldrain/sidecar/pod_addresses.py) say which peers are inside the Pod (the hook, the sidecar's
reads, an in-Pod proxy). Peers are never excluded by any other address: a client SNAT'd to the
node's address (NodePort, a load balancer with externalTrafficPolicy Cluster) looks like kubelet.

How many of them carried data recently comes from inet_diag (modeldrain/sidecar/sock_diag.py) when the
kernel gives it; it is for people and messages only, since a long non-streaming request moves no
data either. A table that cannot be read makes the count None, with the reason: unknown holds the
controller, it never reads as zero.

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
from modeldrain.sidecar.sock_diag import DataAge, SockDiagError, data_ages
from modeldrain.sidecar.socket_table import Connection, SocketTableError, port_table

__all__ = ["ConnectionCount", "ConnectionWatch", "RECENT_DATA_WINDOW_S", "count_connections", "outside", "recent"]

# "Carried data recently": within this long. The controller reads about every 1.1 s, so 2 s covers
# the gap between two of its rounds; an idle keep-alive ages past it and stays counted as open.
RECENT_DATA_WINDOW_S = 2.0


@dataclass(frozen=True)
class ConnectionCount:
    ports: tuple[int, ...]
    established: int | None  # from peers outside the Pod; None: the tables could not be read
    recent_data: int | None  # of those, how many moved data within recent_window_s; None: not known
    recent_window_s: float
    scanned_monotonic_s: float  # when the scan started, on the sidecar's monotonic clock
    duration_ms: float
    detail: str


def outside(connections: Collection[Connection], own: Collection[Network]) -> list[Connection]:
    """The connections whose peer is not one of the Pod's own addresses (loopback included)."""
    return [c for c in connections if not any(c.remote in network for network in own)]


def recent(connections: Collection[Connection], ages: dict[int, DataAge], window_s: float) -> int | None:
    """How many moved data within window_s; None when one of them is not in the dump."""
    window_ms = window_s * 1000.0
    if any(c.inode not in ages for c in connections):
        return None
    return sum(1 for c in connections if ages[c.inode].since_data_ms < window_ms)


def count_connections(proc_root: str, ports: Collection[int], *, recent_window_s: float = RECENT_DATA_WINDOW_S,
                      ages: Callable[[], dict[int, DataAge]] = data_ages,
                      clock: Callable[[], float] = time.monotonic) -> ConnectionCount:
    """One scan: the tables, then the dump when any outside connection is open. Blocking; never raises."""
    started_s = clock()
    ordered = tuple(sorted(set(ports)))

    def done(count: int | None, recent_count: int | None, detail: str) -> ConnectionCount:
        return ConnectionCount(ordered, count, recent_count, recent_window_s, round(started_s, 6),
                               round((clock() - started_s) * 1000.0, 3), detail)

    try:
        own = own_networks(proc_root)
        table = port_table(proc_root, ordered + MESH_PORTS)
    except (PodAddressError, SocketTableError) as exc:
        return done(None, None, f"count unknown: {exc}")
    views = seen_meshes(table, ordered, own)
    relayed = {c.inode for view in views for c in view.relays}  # a mesh's own upstream connection is no client
    found = [c for c in outside([c for c in table.established if c.local_port in ordered], own)
             if c.inode not in relayed]
    direct = len(found)
    meshes: list[str] = []
    for view in views:
        held = view.held
        if held is None:
            return done(None, None, f"count unknown: {view.mesh.name}'s proxy is in the Pod ({view.evidence}) but "
                                    f"not its inbound listener on {view.mesh.inbound_port}: the clients it relays "
                                    "cannot be counted")
        found += held
        meshes.append(f"{len(held)} through {view.mesh.name}'s proxy ({view.evidence})")
    if not found:
        via = f", directly or through a mesh proxy ({'; '.join(meshes)})" if meshes else ""
        return done(0, 0, f"no established connection from outside the Pod{via}")
    try:
        recent_count = recent(found, ages(), recent_window_s)
        why = "" if recent_count is not None else "; a connection was not in the inet_diag dump"
    except SockDiagError as exc:
        recent_count, why = None, f"; when each last moved data is not known ({exc})"
    said = f", {recent_count} of them moved data in the last {recent_window_s:g} s" if recent_count is not None else why
    via = f" ({direct} directly; {'; '.join(meshes)})" if meshes else ""
    return done(len(found), recent_count, f"{len(found)} established from outside the Pod{via}{said}")


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
