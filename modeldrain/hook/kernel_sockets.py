"""The kernel's TCP socket tables of this network namespace (/proc/net/tcp, /proc/net/tcp6), bounded.

Both programs run in the Pod's network namespace, so these tables list every socket on the
engine's port, from wherever its peer is. The hook reads the listening sockets
(modeldrain/hook/listeners.py: where the engine really serves) and the established connections
open since before the delete (modeldrain/hook/held_connections.py); the sidecar reads the
established connections it counts (modeldrain/sidecar/socket_table.py) and the Pod's addresses
(modeldrain/sidecar/pod_addresses.py, with read_kernel_table). Every line is checked: a table
that cannot be read, is cut off mid-line, is over its cap, or holds a line that is not the
kernel's format raises KernelSocketError, so what it says is unknown rather than short.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from dataclasses import dataclass
from typing import Collection

from modeldrain.hook.files import FileTooLargeError, SmallFileError, read_small_file

__all__ = ["KernelSocket", "KernelSocketError", "MAX_TABLE_BYTES", "STATE_ESTABLISHED", "STATE_LISTEN",
           "read_kernel_table", "sockets"]

# The kernel's table header starts so; anything else is not the table we know.
HEADER_START = "sl"
# The kernel's TCP states (include/net/tcp_states.h), as the table prints them.
STATE_ESTABLISHED = 0x01
STATE_LISTEN = 0x0A
# /proc/net/tcp lines are 150 bytes, tcp6 lines 178: 8 MiB holds ~47,000 sockets per family, far
# past a Pod serving one engine, and parses in well under a second. A larger table is unknown,
# never read unbounded.
MAX_TABLE_BYTES = 8 * 1024 * 1024
# (file under net/, address bytes, may be absent): a kernel booted without IPv6 has no tcp6 table,
# and then no IPv6 connection exists; a missing IPv4 table is no /proc/net at all.
TABLES = (("tcp", 4, False), ("tcp6", 16, True))
# An IPv4 peer of a dual-stack listener shows in tcp6 as ::ffff:a.b.c.d.
_V4_MAPPED_PREFIX = bytes(10) + b"\xff\xff"


class KernelSocketError(Exception):
    """A socket table that cannot be trusted; the message says which and why, in one line."""


@dataclass(frozen=True)
class KernelSocket:
    """One socket whose local end is one of the ports asked for. Addresses are packed bytes (4 for
    IPv4, 16 for IPv6); a v4-mapped IPv6 address (::ffff:a.b.c.d) is given as its 4 IPv4 bytes."""

    local_address: bytes
    local_port: int
    remote_address: bytes
    remote_port: int
    state: int
    tx_queue: int  # bytes written and not yet acknowledged by the peer (write_seq - snd_una)
    inode: int


def read_kernel_table(path: str, max_bytes: int, error: type[Exception]) -> str:
    """A /proc/net table as text, read by the programs' one bounded small-file reader (never held
    by a FIFO, never more than `max_bytes`), then ASCII as the kernel writes it; `error` names the
    module whose table it is (the socket tables, the Pod's addresses)."""
    try:
        raw = read_small_file(path, max_bytes)
    except FileTooLargeError:
        raise error(f"{path} is over {max_bytes} bytes") from None
    except SmallFileError as exc:
        raise error(str(exc)) from None
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError:
        raise error(f"{path} is not ASCII") from None


def sockets(proc_root: str, ports: Collection[int] | None, max_bytes: int = MAX_TABLE_BYTES) -> list[KernelSocket]:
    """Every socket on `ports` (None: on any port), in any state, IPv4 and IPv6; raises
    KernelSocketError. `proc_root` may be one process's directory (/proc/PID): its tables are those
    of that process's network namespace."""
    found: list[KernelSocket] = []
    wanted = None if ports is None else frozenset(ports)
    for name, address_bytes, optional in TABLES:
        path = os.path.join(proc_root, "net", name)
        if optional and not os.path.exists(path) and os.path.isdir(os.path.dirname(path)):
            continue
        found.extend(parse_table(path, read_kernel_table(path, max_bytes, KernelSocketError), address_bytes, wanted))
    return found


def _line_pattern(address_bytes: int) -> re.Pattern[str]:
    """The kernel's line: sl, local and remote endpoints, st, tx:rx, tr:when, retrnsmt, uid, timeout,
    inode, then its extras. Checked whole, so a line that is not one is seen, not skipped."""
    address = f"[0-9A-F]{{{2 * address_bytes}}}"
    return re.compile(rf" *\d+: ({address}):([0-9A-F]{{4}}) ({address}):([0-9A-F]{{4}}) ([0-9A-F]{{2}}) "
                      r"([0-9A-F]{8}):[0-9A-F]{8} [0-9A-F]{2}:[0-9A-F]{8} [0-9A-F]{8} +\d+ +\d+ (\d+)(?: [ -~]*)?")


_PATTERNS = {address_bytes: _line_pattern(address_bytes) for _, address_bytes, _ in TABLES}


def parse_table(path: str, text: str, address_bytes: int, ports: frozenset[int] | None) -> list[KernelSocket]:
    """The sockets of one table's text whose local port is in `ports` (None: every one); raises
    KernelSocketError."""
    if not text.endswith("\n"):
        raise KernelSocketError(f"{path} is empty or cut off mid-line")
    lines = text.split("\n")[:-1]
    if not lines[0].lstrip().startswith(HEADER_START):
        raise KernelSocketError(f"{path} does not start with the kernel's header")
    pattern = _PATTERNS[address_bytes]
    found = []
    for number, line in enumerate(lines[1:], 2):
        match = pattern.fullmatch(line)
        if match is None:
            raise KernelSocketError(f"{path} line {number} is not a socket: {line[:80]!r}")
        local_hex, local_port_hex, remote_hex, remote_port_hex, state, tx_queue, inode = match.groups()
        local_port = int(local_port_hex, 16)
        if ports is not None and local_port not in ports:
            continue
        found.append(KernelSocket(_address(local_hex), local_port, _address(remote_hex), int(remote_port_hex, 16),
                                  int(state, 16), int(tx_queue, 16), int(inode)))
    return found


# A Pod's connections come from few distinct peers (loopback, a node, a handful of clients): decoded
# once each, a table of thousands of sockets costs little more than reading it.
ADDRESS_CACHE_SIZE = 4096


@functools.lru_cache(maxsize=ADDRESS_CACHE_SIZE)
def _address(text: str) -> bytes:
    raw = bytes.fromhex(text)
    if sys.byteorder == "little":  # each 32-bit word is printed in the kernel's byte order
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return _unmapped(raw)


def _unmapped(raw: bytes) -> bytes:
    return raw[12:] if len(raw) == 16 and raw.startswith(_V4_MAPPED_PREFIX) else raw
