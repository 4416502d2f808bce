"""Where the engine's own processes listen, as the kernel says: not where its flags say it should.

A flag, an annotation or a `--config` value is what someone meant; the kernel's socket table is
what is. Each engine process's open descriptors (/proc/PID/fd) name its sockets by inode
(`socket:[N]`), and the TCP tables of that process's network namespace (/proc/PID/net/tcp{,6},
read by modeldrain/hook/kernel_sockets.py, bounded) give each inode's address, port and state: the
engine's listeners are its sockets in state LISTEN. Where the engine has several, the flags and
annotations choose among them (hook.config); a port named nowhere among them is not the engine's.

/proc does not show whether an IPv6 listener has IPV6_V6ONLY set, and an application may set it
either way whatever /proc/sys/net/ipv6/bindv6only says, so it is known only where the table shows
it: another socket listening on IPv4 at the same port. [::1] reaches a `::` listener either way,
so it is read there first; 127.0.0.1 comes after only while no other socket holds that port on
IPv4 (then 127.0.0.1 reaches the engine's dual-stack socket or is refused: never someone else).
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass

from modeldrain.hook.kernel_sockets import STATE_LISTEN, KernelSocket, KernelSocketError, sockets

__all__ = ["Listener", "ListenerError", "engine_listeners", "socket_inodes"]

# An engine process's descriptors read at most: vLLM's API server holds a few hundred (its model
# files, pipes, ZMQ sockets, one per connection). A process with more is not read (unknown), never
# read without a bound.
MAX_DESCRIPTORS = 65536
_SOCKET_LINK = "socket:["
_IPV4_ANY = bytes(4)
_IPV6_ANY = bytes(16)
IPV4_LOOPBACK_HOST = "127.0.0.1"
IPV6_LOOPBACK_HOST = "::1"


class ListenerError(Exception):
    """The engine's listeners cannot be read; the message says which and why, in one line."""


@dataclass(frozen=True)
class Listener:
    """One listening socket of an engine process. `address`: packed, 4 bytes (IPv4) or 16 (IPv6).
    `v6only`: for IPv6, True where the table shows another socket on the port's IPv4 side; None
    where it cannot be told (never False: /proc does not say)."""

    address: bytes
    port: int
    pid: str
    v6only: bool | None = None

    @property
    def family(self) -> int:
        return 4 if len(self.address) == 4 else 6

    @property
    def where(self) -> str:
        """ADDRESS:PORT as the log says it."""
        text = str(ipaddress.ip_address(self.address))
        return f"[{text}]:{self.port}" if self.family == 6 else f"{text}:{self.port}"

    def hosts(self) -> tuple[str, ...]:
        """Where this socket is read from inside the Pod, in order (module doc)."""
        if self.address == _IPV4_ANY:
            return (IPV4_LOOPBACK_HOST,)
        if self.address == _IPV6_ANY:
            return (IPV6_LOOPBACK_HOST,) if self.v6only else (IPV6_LOOPBACK_HOST, IPV4_LOOPBACK_HOST)
        return (str(ipaddress.ip_address(self.address)),)


def engine_listeners(proc_root: str, pids: list[str]) -> tuple[Listener, ...]:
    """The listening TCP sockets of the processes `pids`, sorted by port; raises ListenerError
    when a process's descriptors or its network namespace's tables cannot be read whole."""
    inodes: dict[int, str] = {}
    for pid in pids:
        inodes.update((inode, pid) for inode in socket_inodes(os.path.join(proc_root, pid)))
    if not inodes or not pids:
        return ()
    try:
        table = [s for s in sockets(os.path.join(proc_root, pids[0]), None) if s.state == STATE_LISTEN]
    except KernelSocketError as exc:
        raise ListenerError(str(exc)) from None
    return tuple(sorted((_listener(s, inodes[s.inode], table) for s in table if s.inode in inodes),
                        key=lambda listener: (listener.port, listener.family, listener.address)))


def _listener(own: KernelSocket, pid: str, table: list[KernelSocket]) -> Listener:
    v6only = None
    if own.local_address == _IPV6_ANY and any(
            other.local_port == own.local_port and len(other.local_address) == 4 and other.inode != own.inode
            for other in table):
        v6only = True  # another socket holds the port on IPv4: 127.0.0.1 there is not this one
    return Listener(own.local_address, own.local_port, pid, v6only)


def socket_inodes(process_dir: str, max_descriptors: int = MAX_DESCRIPTORS) -> set[int]:
    """The inodes of the sockets a process holds open (its /proc/PID/fd links), none once it has
    ended; raises ListenerError when they cannot be read (another user's) or are over the cap."""
    fd_dir = os.path.join(process_dir, "fd")
    found: set[int] = set()
    try:
        with os.scandir(fd_dir) as entries:
            for count, entry in enumerate(entries, 1):
                if count > max_descriptors:
                    raise ListenerError(f"{fd_dir} holds over {max_descriptors} descriptors")
                try:
                    link = os.readlink(entry.path)
                except OSError:
                    continue  # closed since it was listed
                if link.startswith(_SOCKET_LINK) and link.endswith("]") and link[len(_SOCKET_LINK):-1].isdigit():
                    found.add(int(link[len(_SOCKET_LINK):-1]))
    except FileNotFoundError:
        return set()  # the process has ended: it holds nothing
    except OSError as exc:
        raise ListenerError(f"{fd_dir} cannot be read: {exc.strerror or exc}") from None
    return found
