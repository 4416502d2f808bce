"""The established TCP connections and the listeners of this network namespace on given local ports: /proc/net/tcp{,6}.

drain-sidecar shares the Pod's network namespace, so these tables list every connection made to
the engine's port, from wherever. Readable by any user. They are read and checked line by line by
the programs' one bounded reader (modeldrain/hook/kernel_sockets.py, which the hook reads its listeners with):
a table that cannot be read, is cut off mid-line, is over its cap, or holds a line that is not the
kernel's format raises SocketTableError, so the count is unknown rather than short (a count that
reads as zero when it is not would let the controller delete a Pod with clients attached).
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass
from typing import Collection

from modeldrain.hook.kernel_sockets import MAX_TABLE_BYTES, STATE_ESTABLISHED, STATE_LISTEN, KernelSocketError, sockets

__all__ = ["Connection", "PortTable", "SocketTableError", "established", "port_table"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class SocketTableError(Exception):
    """A socket table that cannot be trusted; the message says which and why, in one line."""


@dataclass(frozen=True)
class Connection:
    """One established connection whose local end is one of the ports asked for."""

    local: IPAddress
    local_port: int
    remote: IPAddress  # a v4-mapped IPv6 peer (::ffff:a.b.c.d) is given as its IPv4 address
    remote_port: int
    inode: int


@dataclass(frozen=True)
class PortTable:
    """One read of the tables: the established connections on the ports asked for, and which of
    those ports have a listening socket (a mesh proxy's is how a mesh is seen: connections.py)."""

    established: list[Connection]
    listening: frozenset[int]


def port_table(proc_root: str, ports: Collection[int], max_bytes: int = MAX_TABLE_BYTES) -> PortTable:
    """The established connections and the listeners on `ports`, IPv4 and IPv6, from one read of
    each table; raises SocketTableError."""
    try:
        found = sockets(proc_root, ports, max_bytes)
    except KernelSocketError as exc:
        raise SocketTableError(str(exc)) from None
    return PortTable(
        [Connection(_address(s.local_address), s.local_port, _address(s.remote_address), s.remote_port, s.inode)
         for s in found if s.state == STATE_ESTABLISHED],
        frozenset(s.local_port for s in found if s.state == STATE_LISTEN))


def established(proc_root: str, ports: Collection[int], max_bytes: int = MAX_TABLE_BYTES) -> list[Connection]:
    """Every established connection on `ports`, IPv4 and IPv6; raises SocketTableError."""
    return port_table(proc_root, ports, max_bytes).established


# A Pod's connections come from few distinct peers (loopback, a node, a handful of clients): each
# decoded once, a table of thousands of sockets costs little more than reading it.
ADDRESS_CACHE_SIZE = 4096


@functools.lru_cache(maxsize=ADDRESS_CACHE_SIZE)
def _address(packed: bytes) -> IPAddress:
    return ipaddress.ip_address(packed)
