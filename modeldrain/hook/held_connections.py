"""The engine port's connections from outside the Pod that were already open at the delete: why a
drain that never reads idle may be a client that never went away, not a long request.

The route wait protects routers that choose a replica per request. A client on a keep-alive
connection through a plain Service or a NodePort keeps sending on it after the delete (kube-proxy
keeps established conntrack entries; vLLM closes only idle connections), so the replica never
reads idle and the drain runs to its deadline (docs/configurations.md, "Which clients the route
wait protects"). The hook notes those connections at its start and, at each progress line, says
how many are open and how many of them were open at its start; a drain that ends at its deadline
with some still open says so in its reason.

"Outside the Pod": a peer that is not loopback and not the connection's own local address (an
in-Pod proxy dialling the Pod IP). The hook has no other list of the Pod's addresses; a peer it
cannot place is counted, since this is for people and never decides the drain. Behind a mesh's
proxy the engine's clients are the proxy's (from loopback) and are not seen here. A table that
cannot be read says so (None), never zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from modeldrain.hook.kernel_sockets import STATE_ESTABLISHED, KernelSocket, KernelSocketError, sockets

__all__ = ["HeldConnections"]

# This namespace's tables: /proc/net is the reading process's own network namespace, the Pod's.
NET_PROC_ROOT = "/proc"
_LOOPBACK_V4 = 127
_LOOPBACK_V6 = bytes(15) + b"\x01"


@dataclass(frozen=True)
class HeldCount:
    outside: int | None  # None: the tables could not be read (detail says why)
    from_before_delete: int | None  # of those, how many the hook's start saw already open
    detail: str

    def fields(self) -> dict[str, Any]:
        """As the log's lines carry it (drain_started, progress)."""
        return {"outside_connections": self.outside, "outside_connections_from_before_delete": self.from_before_delete}


def is_outside(s: KernelSocket) -> bool:
    remote = s.remote_address
    loopback = (len(remote) == 4 and remote[0] == _LOOPBACK_V4) or remote == _LOOPBACK_V6
    return not loopback and remote != s.local_address


Key = tuple[int, bytes, int]  # inode, peer address, peer port: one connection, not a reused inode


class HeldConnections:
    """The outside connections on the engine's port at the hook's start, then compared at each look."""

    def __init__(self, port: int | None, proc_root: str = NET_PROC_ROOT):
        self._port = port
        self._proc_root = proc_root
        self._at_start: frozenset[Key] | None = None
        self.at_start = self.look()

    def _keys(self) -> frozenset[Key]:
        assert self._port is not None
        return frozenset((s.inode, s.remote_address, s.remote_port) for s in sockets(self._proc_root, [self._port])
                         if s.state == STATE_ESTABLISHED and is_outside(s))

    def look(self) -> HeldCount:
        """The count now; never raises."""
        if self._port is None:
            return HeldCount(None, None, "no engine port to look at")
        try:
            now = self._keys()
        except KernelSocketError as exc:
            return HeldCount(None, None, f"connections unknown: {exc}")
        if self._at_start is None:
            self._at_start = now
        held = len(now & self._at_start)
        return HeldCount(len(now), held, f"{len(now)} connection(s) to port {self._port} from outside the Pod, "
                                         f"{held} of them open since before the delete")
