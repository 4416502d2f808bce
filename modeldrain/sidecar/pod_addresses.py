"""The Pod's own addresses, read from the kernel: /proc/net/fib_trie (IPv4) and /proc/net/if_inet6 (IPv6).

A connection from one of them comes from inside the Pod (the hook, the sidecar's own reads, an
in-Pod proxy dialling the Pod IP) and is not a client the Service sent. They are read from the
namespace's own tables, not from an environment variable: a Pod may have several addresses (dual
stack, link-local), and an environment variable cannot be checked against what the kernel routes.
Loopback is always the Pod's own, whatever the tables say.
"""

from __future__ import annotations

import ipaddress
import os

from modeldrain.hook.kernel_sockets import read_kernel_table

__all__ = ["Network", "PodAddressError", "own_networks"]

# fib_trie marks an address of this host as "/<prefix> host LOCAL" under the line that names it.
FIB_LOCAL_SUFFIX = "host LOCAL"
MAX_TABLE_BYTES = 1024 * 1024  # a Pod has a handful of addresses; a larger file is not one of these

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class PodAddressError(Exception):
    """The address tables cannot be read or trusted; the message says why, in one line."""


def own_networks(proc_root: str) -> tuple[Network, ...]:
    """Loopback, every local IPv4 address or range, and every IPv6 address of the namespace."""
    found: list[Network] = list(LOOPBACK)
    found += _fib_local(os.path.join(proc_root, "net", "fib_trie"))
    found += _if_inet6(os.path.join(proc_root, "net", "if_inet6"))
    return tuple(dict.fromkeys(found))


def _read(path: str) -> str:
    text = read_kernel_table(path, MAX_TABLE_BYTES, PodAddressError)
    if text and not text.endswith("\n"):
        raise PodAddressError(f"{path} is cut off mid-line")
    return text


def _fib_local(path: str) -> list[Network]:
    found: list[Network] = []
    address: str | None = None
    for number, line in enumerate(_read(path).splitlines(), 1):
        text = line.strip()
        if text.startswith("|-- "):
            address = text[4:]
        elif text.startswith("/") and text.endswith(FIB_LOCAL_SUFFIX):
            prefix = text[1:].split(" ", 1)[0]
            try:
                if address is None:
                    raise ValueError("no address above it")
                found.append(ipaddress.IPv4Network(f"{address}/{prefix}", strict=False))
            except ValueError as exc:
                raise PodAddressError(f"{path} line {number} is not a local address: {exc}") from None
    if not found:
        raise PodAddressError(f"{path} lists no local address (not even loopback)")
    return found


def _if_inet6(path: str) -> list[Network]:
    found: list[Network] = []
    # A kernel without IPv6 has no file: no IPv6 address is then the Pod's, and no IPv6 peer connects.
    if not os.path.exists(path):
        return found
    for number, line in enumerate(_read(path).splitlines(), 1):
        fields = line.split()
        try:
            if len(fields) != 6 or len(fields[0]) != 32:
                raise ValueError(f"{len(fields)} fields")
            found.append(ipaddress.IPv6Network((bytes.fromhex(fields[0]), 128)))
        except ValueError as exc:
            raise PodAddressError(f"{path} line {number} is not an address: {exc}") from None
    return found
