"""Who may hold a GET /v1/drain call: a share per source address, and a total below the connection cap.

The route needs no token (docs/sidecar-api.md, "Threat model"), so anyone who reaches the port
can open drain calls. A single cap shared by everyone lets a stranger fill it and turn kubelet's
call away (a 429, which kubelet ignores: SIGTERM at once). So each source address holds at most
its own share, and all of them together at most a total that leaves the connection cap room for
everyone else: a flood from one address, or a few, can never reach kubelet's share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# GET /v1/drain needs no token (docs/sidecar-api.md, "Threat model"), so who may hold a drain call
# is bounded per source address and in all. kubelet calls once per container whose preStop is the
# httpGet (one in every manifest here), from its node's address, and may repeat a call (its
# delivery is at-least-once): 4 per address leaves it room. A stranger past its address's share
# gets 429 at once, and never takes the share of another address, kubelet's included.
MAX_DRAIN_CALLS_PER_SOURCE = 4
# Drain calls hold their connections while they wait, and a connection running a request is
# never evicted at the cap (modeldrain/sidecar/site.py). So drain calls may hold at most this share of
# --max-connections (48 of the default 64): the rest stay for the controller, the probes, and
# the idle connections a newcomer evicts. With the defaults, turning kubelet's call away takes
# 12 source addresses each holding 4 calls at once.
DRAIN_SHARE_OF_CONNECTIONS = 0.75


def drain_call_cap(max_connections: int) -> int:
    """How many drain calls may wait at once, given --max-connections: its share, at least one."""
    return max(1, math.floor(max_connections * DRAIN_SHARE_OF_CONNECTIONS))


@dataclass(frozen=True)
class Refusal:
    """Why a drain call is turned away, for the 429's message (it names no address)."""

    message: str


class DrainAdmission:
    """Counts the drain calls waiting now, per source address and in all."""

    def __init__(self, total_cap: int, per_source_cap: int = MAX_DRAIN_CALLS_PER_SOURCE):
        if total_cap < 1 or per_source_cap < 1:
            raise ValueError("the caps must be at least 1")
        self.total_cap = total_cap
        self.per_source_cap = per_source_cap
        self._by_source: dict[str, int] = {}
        self.waiting = 0

    def admit(self, source: str) -> Refusal | None:
        """Take a place for `source`, or say why not (nothing is taken then)."""
        held = self._by_source.get(source, 0)
        if held >= self.per_source_cap:
            return Refusal(f"{self.per_source_cap} drain calls from this address already wait")
        if self.waiting >= self.total_cap:
            return Refusal(f"{self.total_cap} drain calls already wait")
        self._by_source[source] = held + 1
        self.waiting += 1
        return None

    def release(self, source: str) -> None:
        held = self._by_source.get(source, 0)
        if held <= 0:
            raise RuntimeError("released a drain call that was never admitted")  # a bug, never input
        if held == 1:
            del self._by_source[source]
        else:
            self._by_source[source] = held - 1
        self.waiting -= 1

    def held_by(self, source: str) -> int:
        return self._by_source.get(source, 0)
