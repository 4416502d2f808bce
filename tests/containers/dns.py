"""The cluster DNS as the container tests have it: every name is unknown (NXDOMAIN).

The Pods have only a loopback interface, so no Pod can reach another, and no name should
resolve: as in a cluster after the Pod behind a name is deleted (a LeaderWorkerSet worker's
hook then finds its leader gone). Their containers have no /etc/resolv.conf (podman writes none
without a network), so glibc's resolver asks 127.0.0.1:53 in the Pod's own network; this
answers there, every question with NXDOMAIN. Without it the resolver would find nothing
listening and report a temporary failure, which a hook rightly waits out to its deadline.
"""

from __future__ import annotations

import socket
import struct
import threading

from .netns import call_in_netns

DNS_PORT = 53
HEADER = struct.Struct(">HHHHHH")  # id, flags, qdcount, ancount, nscount, arcount
# QR (a response), AA (authoritative), RA; RCODE 3: the name does not exist.
NXDOMAIN_FLAGS = 0x8000 | 0x0400 | 0x0080 | 3
RECURSION_DESIRED = 0x0100
POLL_S = 0.1


def nxdomain_answer(query: bytes) -> bytes | None:
    """The NXDOMAIN answer to a DNS query, its question echoed; None for what is not a query."""
    if len(query) < HEADER.size:
        return None
    ident, flags, qdcount, _, _, _ = HEADER.unpack_from(query)
    if flags & 0x8000 or qdcount != 1:
        return None  # a response, or not one question
    end = HEADER.size
    while end < len(query) and query[end] != 0:  # the name's labels, then a zero byte
        end += 1 + query[end]
    question = query[HEADER.size:end + 1 + 4]  # + QTYPE, QCLASS
    if end + 5 > len(query):
        return None
    return HEADER.pack(ident, NXDOMAIN_FLAGS | (flags & RECURSION_DESIRED), 1, 0, 0, 0) + question


class NxdomainServer:
    """Answers on 127.0.0.1:53 inside one Pod's network namespace until closed."""

    def __init__(self, netns_path: str):
        def bind() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.bind(("127.0.0.1", DNS_PORT))
            sock.settimeout(POLL_S)  # a closed socket does not wake a blocked recvfrom: poll
            return sock
        self._sock = call_in_netns(netns_path, bind)  # the socket stays in the Pod's namespace
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="pod-dns", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closing.is_set():
            try:
                query, peer = self._sock.recvfrom(4096)
            except TimeoutError:
                continue
            answer = nxdomain_answer(query)
            if answer is not None:
                self._sock.sendto(answer, peer)

    def close(self) -> None:
        self._closing.set()
        self._thread.join(5)
        self._sock.close()
