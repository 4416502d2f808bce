"""What an engine's port still owes its clients: the bytes it has written and a client has not yet
acknowledged (tx_queue in the kernel's socket tables).

A stream's tail still going out to a slow reader after vLLM's gauges read zero, which
bench/engines/stream_tail.py, its one reader, measures. The hook does not wait on it: vLLM's SIGTERM
lets such a tail go out (measured, docs/engines.md), so waiting would only hold the replica longer.
The tables are read by the programs' one bounded reader (modeldrain/hook/kernel_sockets.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection

from modeldrain.hook.kernel_sockets import MAX_TABLE_BYTES, STATE_ESTABLISHED, sockets

# The kernel's TCP states (include/net/tcp_states.h) in which bytes the engine wrote can still be
# owed to a client: the engine still holds the socket (ESTABLISHED, CLOSE_WAIT), or has closed it
# and the kernel still delivers its tail (FIN_WAIT1, CLOSING, LAST_ACK). LISTEN, SYN_RECV, FIN_WAIT2
# and TIME_WAIT owe nothing.
STATE_FIN_WAIT1 = 0x04
STATE_CLOSE_WAIT = 0x08
STATE_LAST_ACK = 0x09
STATE_CLOSING = 0x0B
OWING_STATES = frozenset({STATE_ESTABLISHED, STATE_CLOSE_WAIT, STATE_FIN_WAIT1, STATE_CLOSING, STATE_LAST_ACK})


@dataclass(frozen=True)
class Unsent:
    """Unacknowledged bytes, on how many sockets."""

    bytes: int
    sockets: int


def unsent_bytes(proc_root: str, ports: Collection[int], max_bytes: int = MAX_TABLE_BYTES) -> Unsent:
    """The bytes the engine's `ports` have written and their clients not yet acknowledged, in the
    states that still owe them (OWING_STATES); raises KernelSocketError."""
    owing = [s for s in sockets(proc_root, ports, max_bytes) if s.state in OWING_STATES and s.tx_queue > 0]
    return Unsent(sum(s.tx_queue for s in owing), len(owing))
