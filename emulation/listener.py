"""The engine's listening socket, which misbehaviour and SIGTERM open and close at run time.

Closing it stops new connections (they are refused) and leaves established ones alone, as a real
process that closes its listener does; reopening binds the same port again.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path
from typing import Callable


def server_tls_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


# vLLM --host :: (uvicorn) binds one socket that takes IPv6 and IPv4 (v4-mapped) alike; asyncio
# would set IPV6_V6ONLY on it, and loopback IPv4 reads (the hook's, the sidecar's) would be refused.
DUAL_STACK_HOST = "::"


def _dual_stack(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    sock.bind(("::", port))
    sock.listen(socket.SOMAXCONN)
    sock.setblocking(False)
    return sock


class Listener:
    def __init__(self, protocol_factory: Callable[[], asyncio.Protocol], host: str, port: int,
                 tls: ssl.SSLContext | None):
        self._factory = protocol_factory
        self._host = host
        self._port = port
        self._tls = tls
        self._server: asyncio.AbstractServer | None = None

    @property
    def port(self) -> int:
        """The bound port (the one picked when asked for 0), kept across close and reopen."""
        return self._port

    @property
    def is_open(self) -> bool:
        return self._server is not None

    async def open(self) -> int:
        if self._server is None:
            loop = asyncio.get_running_loop()
            if self._host == DUAL_STACK_HOST:
                self._server = await loop.create_server(self._factory, sock=_dual_stack(self._port), ssl=self._tls)
            else:
                self._server = await loop.create_server(
                    self._factory, self._host, self._port, ssl=self._tls, reuse_address=True)
            self._port = self._server.sockets[0].getsockname()[1]
        return self._port

    def close(self) -> None:
        """Stop accepting: from now on connections are refused. Established ones are untouched."""
        if self._server is not None:
            self._server.close()
            self._server = None
