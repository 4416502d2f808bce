"""The established TCP connections of this network namespace on given local ports: /proc/net/tcp{,6}.

drain-sidecar shares the Pod's network namespace, so these tables list every connection made to
the engine's port, from wherever. Readable by any user. Every line is checked: a table that cannot
be read, is cut off mid-line, is over its cap, or holds a line that is not the kernel's format
raises SocketTableError, so the count is unknown rather than short (a count that reads as zero
when it is not would let the controller delete a Pod with clients attached).
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import sys
from dataclasses import dataclass
from typing import Collection

from modeldrain.hook.files import FileTooLargeError, SmallFileError, read_small_file

# The kernel's table header starts so; anything else is not the table we know.
HEADER_START = "sl"
STATE_ESTABLISHED = "01"
# /proc/net/tcp lines are 150 bytes, tcp6 lines 178: 8 MiB holds ~47,000 sockets per family, far
# past a Pod serving one engine, and parses in well under a second off the event loop. A larger
# table gives no count rather than an unbounded read.
MAX_TABLE_BYTES = 8 * 1024 * 1024
# (file under net/, address bytes, may be absent): a kernel booted without IPv6 has no tcp6 table,
# and then no IPv6 connection exists; a missing IPv4 table is no /proc/net at all.
TABLES = (("tcp", 4, False), ("tcp6", 16, True))

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


def established(proc_root: str, ports: Collection[int], max_bytes: int = MAX_TABLE_BYTES) -> list[Connection]:
    """Every established connection on `ports`, IPv4 and IPv6; raises SocketTableError."""
    found: list[Connection] = []
    for name, address_bytes, optional in TABLES:
        path = os.path.join(proc_root, "net", name)
        if optional and not os.path.exists(path) and os.path.isdir(os.path.dirname(path)):
            continue
        found.extend(_table(path, _read(path, max_bytes), address_bytes, frozenset(ports)))
    return found


def read_kernel_table(path: str, max_bytes: int, error: type[Exception]) -> str:
    """A /proc/net table as text, read by the programs' one bounded small-file reader (never held
    by a FIFO, never more than `max_bytes`), then ASCII as the kernel writes it; `error` names the
    module whose table it is (the socket table, the Pod's addresses)."""
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


def _read(path: str, max_bytes: int) -> str:
    return read_kernel_table(path, max_bytes, SocketTableError)


def _line_pattern(address_bytes: int) -> re.Pattern[str]:
    """The kernel's line: sl, local and remote endpoints, st, tx:rx, tr:when, retrnsmt, uid, timeout,
    inode, then its extras. Checked whole, so a line that is not one is seen, not skipped."""
    address = f"[0-9A-F]{{{2 * address_bytes}}}"
    return re.compile(rf" *\d+: ({address}):([0-9A-F]{{4}}) ({address}):([0-9A-F]{{4}}) ([0-9A-F]{{2}}) "
                      r"[0-9A-F]{8}:[0-9A-F]{8} [0-9A-F]{2}:[0-9A-F]{8} [0-9A-F]{8} +\d+ +\d+ (\d+)(?: [ -~]*)?")


_PATTERNS = {address_bytes: _line_pattern(address_bytes) for _, address_bytes, _ in TABLES}


def _table(path: str, text: str, address_bytes: int, ports: frozenset[int]) -> list[Connection]:
    if not text.endswith("\n"):
        raise SocketTableError(f"{path} is empty or cut off mid-line")
    lines = text.split("\n")[:-1]
    if not lines[0].lstrip().startswith(HEADER_START):
        raise SocketTableError(f"{path} does not start with the kernel's header")
    pattern = _PATTERNS[address_bytes]
    found = []
    for number, line in enumerate(lines[1:], 2):
        match = pattern.fullmatch(line)
        if match is None:
            raise SocketTableError(f"{path} line {number} is not a socket: {line[:80]!r}")
        local_hex, local_port_hex, remote_hex, remote_port_hex, state, inode = match.groups()
        local_port = int(local_port_hex, 16)
        if state != STATE_ESTABLISHED or local_port not in ports:
            continue
        found.append(Connection(_address(local_hex), local_port, _address(remote_hex), int(remote_port_hex, 16),
                                int(inode)))
    return found


# A Pod's connections come from few distinct peers (loopback, a node, a handful of clients): decoded
# once each, a table of thousands of sockets costs little more than reading it.
ADDRESS_CACHE_SIZE = 4096


@functools.lru_cache(maxsize=ADDRESS_CACHE_SIZE)
def _address(text: str) -> IPAddress:
    raw = bytes.fromhex(text)
    if sys.byteorder == "little":  # each 32-bit word is printed in the kernel's byte order
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    if len(raw) == 4:
        return ipaddress.IPv4Address(raw)
    address = ipaddress.IPv6Address(raw)
    return address.ipv4_mapped or address
