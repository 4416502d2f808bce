"""When each established TCP socket of this network namespace last carried data: NETLINK_SOCK_DIAG.

/proc/net/tcp says which connections exist, not whether they are in use. The kernel's inet_diag
dump answers with each socket's tcp_info, whose tcpi_last_data_recv and tcpi_last_data_sent are the
milliseconds since data last moved each way. The dump needs no privilege for the sockets of one's
own network namespace (it is what `ss -ti` reads as any user). Standard library only: one netlink
socket, one dump per family, parsed with struct.

What it cannot tell: a connection waiting on a long non-streaming response moves no data either,
so "no data recently" is never read as "no request" (the engine's gauges say that).
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass

__all__ = ["DataAge", "SockDiagError", "data_ages"]

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300  # NLM_F_ROOT | NLM_F_MATCH
NLMSG_ERROR = 2
NLMSG_DONE = 3
INET_DIAG_INFO = 2  # the rtattr carrying struct tcp_info
TCP_ESTABLISHED = 1

_NLMSGHDR = struct.Struct("=IHHII")
# inet_diag_req_v2: family, protocol, ext, pad, states; then inet_diag_sockid (48 bytes, zero: all).
_REQ = struct.Struct("=BBBxI48x")
# inet_diag_msg: family, state, timer, retrans; sockid (sport, dport big-endian, src, dst, if,
# cookie); expires, rqueue, wqueue, uid, inode.
_MSG = struct.Struct("=BBBB2H16s16sI8sIIIII")
_RTATTR = struct.Struct("=HH")
# struct tcp_info: tcpi_last_data_sent at byte 44, tcpi_last_data_recv at byte 52 (linux/tcp.h).
_LAST_DATA_SENT = struct.Struct("=I")
LAST_DATA_SENT_OFFSET = 44
LAST_DATA_RECV_OFFSET = 52
_TCP_INFO_MIN_BYTES = LAST_DATA_RECV_OFFSET + 4

# One dump's receive buffer; the kernel fills each recv with as many messages as fit.
RECV_BYTES = 64 * 1024
# A bound on the dump: a namespace with more established sockets than this gives no answer
# rather than an unbounded parse (a Pod serving one engine has hundreds, not tens of thousands).
MAX_SOCKETS = 65_536
# A dump that has not finished in this long is abandoned (the kernel answers in milliseconds).
TIMEOUT_S = 1.0


class SockDiagError(Exception):
    """The dump could not be made or read; the message says why, in one line."""


@dataclass(frozen=True)
class DataAge:
    """Milliseconds since the socket last received and last sent data."""

    since_recv_ms: int
    since_sent_ms: int

    @property
    def since_data_ms(self) -> int:
        return min(self.since_recv_ms, self.since_sent_ms)


def data_ages(*, max_sockets: int = MAX_SOCKETS, timeout_s: float = TIMEOUT_S) -> dict[int, DataAge]:
    """Socket inode -> DataAge for every established TCP socket (IPv4 and IPv6) of this namespace."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, NETLINK_SOCK_DIAG)
    except OSError as exc:
        raise SockDiagError(f"no NETLINK_SOCK_DIAG socket: {exc.strerror or exc}") from None
    ages: dict[int, DataAge] = {}
    try:
        sock.settimeout(timeout_s)
        for seq, family in enumerate((socket.AF_INET, socket.AF_INET6), 1):
            _dump(sock, family, seq, ages, max_sockets)
    except (OSError, struct.error) as exc:
        raise SockDiagError(f"inet_diag dump failed: {exc}") from None
    finally:
        sock.close()
    return ages


def _dump(sock: socket.socket, family: int, seq: int, ages: dict[int, DataAge], max_sockets: int) -> None:
    request = _REQ.pack(family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), 1 << TCP_ESTABLISHED)
    header = _NLMSGHDR.pack(_NLMSGHDR.size + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq,
                            0)
    sock.sendto(header + request, (0, 0))
    while True:
        data = sock.recv(RECV_BYTES)
        if not data:
            raise SockDiagError("the netlink socket closed mid-dump")
        offset = 0
        while offset + _NLMSGHDR.size <= len(data):
            length, kind, _flags, got_seq, _pid = _NLMSGHDR.unpack_from(data, offset)
            if length < _NLMSGHDR.size or offset + length > len(data):
                raise SockDiagError(f"a netlink message of {length} bytes does not fit its datagram")
            if got_seq == seq:
                if kind == NLMSG_DONE:
                    return
                if kind == NLMSG_ERROR:
                    (code,) = struct.unpack_from("=i", data, offset + _NLMSGHDR.size)
                    raise SockDiagError(f"the kernel refused the dump: {os.strerror(-code)}")
                if kind == SOCK_DIAG_BY_FAMILY:
                    inode, age = _message(data, offset + _NLMSGHDR.size, offset + length)
                    if age is not None:
                        ages[inode] = age
                        if len(ages) > max_sockets:
                            raise SockDiagError(f"over {max_sockets} established sockets in the namespace")
            offset += (length + 3) & ~3


def _message(data: bytes, start: int, end: int) -> tuple[int, DataAge | None]:
    """One inet_diag_msg: its inode and, when its tcp_info came with it, the data ages."""
    fields = _MSG.unpack_from(data, start)
    inode = fields[-1]
    offset = start + _MSG.size
    while offset + _RTATTR.size <= end:
        length, kind = _RTATTR.unpack_from(data, offset)
        if length < _RTATTR.size:
            break
        if kind == INET_DIAG_INFO and length - _RTATTR.size >= _TCP_INFO_MIN_BYTES:
            info = offset + _RTATTR.size
            (sent,) = _LAST_DATA_SENT.unpack_from(data, info + LAST_DATA_SENT_OFFSET)
            (recv,) = _LAST_DATA_SENT.unpack_from(data, info + LAST_DATA_RECV_OFFSET)
            return inode, DataAge(since_recv_ms=recv, since_sent_ms=sent)
        offset += (length + 3) & ~3
    return inode, None
