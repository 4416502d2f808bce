"""Who may hold a GET /v1/drain call: a share per source network, and a total of its own.

The route needs no token (docs/sidecar-api.md, "Threat model"), so anyone who reaches the port
can open drain calls, and kubelet's call (a 429 or 503 there is a SIGTERM at once: kubelet
ignores the status) cannot be told from a stranger's: strangers routed through the node share
its address (NodePort, SNAT'd load balancers, host-network Pods), and a User-Agent is no identity.
So no rule here may turn a call away for what another caller could also look like. Instead:

- a waiting drain call no longer counts against --max-connections (modeldrain/sidecar/site.py): the
  connections kubelet's own call and probes need stay free whatever the drain calls hold;
- each source network (an IPv4 address; an IPv6 /64, the smallest block a host is given, so one
  host's many addresses count once) may hold as many drain calls as --max-connections;
- all drain calls together may hold DRAIN_CALLS_PER_CONNECTION times --max-connections.

Hence the bound the threat model states and tests/sidecar/test_drain_job.py holds: callers that
hold fewer than --max-connections drain calls at once, from anywhere (kubelet's own address
included), can never get kubelet's call refused; doing it takes --max-connections calls from
kubelet's own network, or DRAIN_CALLS_PER_CONNECTION times that from several. No admitted call
is ever shortened or ended by another (modeldrain/sidecar/drain_job.py).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

__all__ = ["DrainAdmission", "Refusal", "drain_call_cap", "source_network"]

# All drain calls together, per --max-connections: 256 at the default 64. Each holds a socket and
# a thread that sleeps between shared reads (the engine sees at most ten reads a second however
# many wait) and some memory: the cap is what bounds the sidecar's threads, sockets and memory.
DRAIN_CALLS_PER_CONNECTION = 4
# How many bits of an IPv6 source name one network: a /64 is the smallest block a host is given
# (SLAAC, a Pod's or a node's range), and the host may use any address in it.
IPV6_NETWORK_BITS = 64


def drain_call_cap(max_connections: int) -> int:
    """How many drain calls may wait at once, in all."""
    return max_connections * DRAIN_CALLS_PER_CONNECTION


def source_network(source: str) -> str:
    """The network a caller's address counts in: an IPv4 address (an IPv4-mapped IPv6 address is
    the IPv4 one), an IPv6 /64; anything else (no address known) counts as itself."""
    try:
        address = ipaddress.ip_address(source.split("%", 1)[0])
    except ValueError:
        return source
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, IPV6_NETWORK_BITS), strict=False))
    return str(address)


@dataclass(frozen=True)
class Refusal:
    """Why a drain call is turned away, for the 429's message (it names no address)."""

    message: str


class DrainAdmission:
    """Counts the drain calls waiting now, per source network and in all."""

    def __init__(self, total_cap: int, per_network_cap: int):
        if total_cap < 1 or per_network_cap < 1:
            raise ValueError("the caps must be at least 1")
        self.total_cap = total_cap
        self.per_network_cap = per_network_cap
        self._by_network: dict[str, int] = {}
        self.waiting = 0

    def admit(self, source: str) -> Refusal | None:
        """Take a place for `source`, or say why not (nothing is taken then)."""
        network = source_network(source)
        held = self._by_network.get(network, 0)
        if held >= self.per_network_cap:
            return Refusal(f"{self.per_network_cap} drain calls from this address's network already wait")
        if self.waiting >= self.total_cap:
            return Refusal(f"{self.total_cap} drain calls already wait")
        self._by_network[network] = held + 1
        self.waiting += 1
        return None

    def release(self, source: str) -> None:
        network = source_network(source)
        held = self._by_network.get(network, 0)
        if held <= 0:
            raise RuntimeError("released a drain call that was never admitted")  # a bug, never input
        if held == 1:
            del self._by_network[network]
        else:
            self._by_network[network] = held - 1
        self.waiting -= 1

    def held_by(self, source: str) -> int:
        """The drain calls waiting from `source`'s network."""
        return self._by_network.get(source_network(source), 0)
