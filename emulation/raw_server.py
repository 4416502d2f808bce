"""A scripted TCP server on 127.0.0.1 (or ::1): real sockets, the bytes a test or a bench figure chooses.

The programs under test read it as they read an engine. Each connection is answered on its own
thread, after the request's head arrived (unless told not to wait), by the responder set at that
moment: a figure that serves several bodies in turn to one long-running program (the sidecar)
switches it between reads. Tests and bench share it, so what a test proves of a hostile answer is
what the bench counts.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from typing import Callable

Responder = Callable[[socket.socket], object]

# How long a connection may take to send its request head: a client that sends none is not a
# reader this server serves.
REQUEST_WAIT_S = 10.0
# Floods open connections faster than the accept thread takes them.
BACKLOG = 128


class RawServer:
    """Answers every connection with the responder on its own thread; `requests` holds what each
    connection sent before its answer."""

    def __init__(self, respond: Responder, tls_context: ssl.SSLContext | None = None,
                 wait_for_request: bool = True, host: str = "127.0.0.1") -> None:
        self._respond = respond
        self._wait_for_request = wait_for_request
        self._tls = tls_context
        self._lock = threading.Lock()
        # `host`: "::1" for an engine bound to IPv6 loopback alone.
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.create_server((host, 0), family=family, backlog=BACKLOG)
        self.port: int = self._sock.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []
        self._closed = threading.Event()
        self._acceptor = threading.Thread(target=self._serve, name="raw-server", daemon=True)
        self._acceptor.start()

    def set(self, respond: Responder) -> None:
        """Answer the connections from now on with `respond`."""
        with self._lock:
            self._respond = respond

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), name="raw-server-conn", daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            if self._tls is not None:
                conn = self._tls.wrap_socket(conn, server_side=True)
            conn.settimeout(REQUEST_WAIT_S)
            data = b""
            while self._wait_for_request and b"\r\n\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
            with self._lock:
                self.requests.append(data)
                respond = self._respond
            respond(conn)
        except OSError:
            pass  # the reader gave up first (its deadline): what hostile answers provoke
        finally:
            conn.close()

    def close(self) -> None:
        """Stop listening: a connect after this is refused. (Closing alone would not do it: the
        accept blocked in the other thread keeps the listening socket open.)"""
        self._closed.set()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept
        except OSError:
            pass  # already shut down
        self._acceptor.join(timeout=REQUEST_WAIT_S)
        self._sock.close()

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def http_response(body: bytes, status: str = "200 OK", content_type: str = "text/plain; version=0.0.4") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n").encode() + body


def canned(payload: bytes) -> Responder:
    """Send `payload` and close."""
    return lambda conn: conn.sendall(payload)


def drip(payload: bytes, every_s: float) -> Responder:
    """Send `payload` a byte at a time, `every_s` apart."""
    def respond(conn: socket.socket) -> None:
        for i in range(len(payload)):
            conn.sendall(payload[i : i + 1])
            time.sleep(every_s)
    return respond


def hang(conn: socket.socket) -> None:
    """Answer nothing for longer than any reader waits."""
    time.sleep(30)
