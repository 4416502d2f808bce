"""/proc/net/tcp{,6} as the kernel writes them, for the tests of the tables' readers (the hook's
kernel_sockets and the sidecar's connection count): one writer, so both read the same format."""

from __future__ import annotations

import ipaddress
import sys

HEADER4 = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode"
           "                                                     \n")
HEADER6 = ("  sl  local_address                         remote_address                        st tx_queue "
           "rx_queue tr tm->when retrnsmt   uid  timeout inode\n")


def hex_address(address: str) -> str:
    raw = ipaddress.ip_address(address).packed
    if sys.byteorder == "little":
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return raw.hex().upper()


def line(sl: int, local: str, local_port: int, remote: str, remote_port: int, state: str = "01",
         tx_queue: int = 0, inode: int = 1000) -> str:
    """A line as the kernel writes it (net/ipv4/tcp_ipv4.c, net/ipv6/tcp_ipv6.c)."""
    return (f"{sl:4d}: {hex_address(local)}:{local_port:04X} {hex_address(remote)}:{remote_port:04X} {state} "
            f"{tx_queue:08X}:00000000 00:00000000 00000000  1000        0 {inode} 1 0000000000000000 20 4 30 10 -1\n")
