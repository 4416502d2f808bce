"""A scripted engine listener on 127.0.0.1: real sockets, the bytes a figure chooses, switchable.

The programs under test read it as they read an engine. Each connection is answered on its own
thread, after the request's head arrived, by the responder set at that moment; the figures that
serve several bodies in turn to one long-running program (the sidecar) switch it between reads.
"""

from __future__ import annotations

import socket
import threading
from typing import Callable

Responder = Callable[[socket.socket], None]

# How long a connection may take to send its request head: a client that sends none is not a
# reader this server serves.
REQUEST_WAIT_S = 10.0


def canned(payload: bytes) -> Responder:
    """Send `payload` and close."""
    return lambda conn: conn.sendall(payload)


class ScriptedServer:
    def __init__(self, respond: Responder) -> None:
        self._respond = respond
        self._lock = threading.Lock()
        self._sock = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port: int = self._sock.getsockname()[1]
        self.requests = 0
        self._closed = threading.Event()
        threading.Thread(target=self._serve, name="scripted-server", daemon=True).start()

    def set(self, respond: Responder) -> None:
        with self._lock:
            self._respond = respond

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._handle, args=(conn,), name="scripted-conn", daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(REQUEST_WAIT_S)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
            with self._lock:
                self.requests += 1
                respond = self._respond
            respond(conn)
        except OSError:
            pass  # the reader gave up first (its deadline): what hostile answers provoke
        finally:
            conn.close()

    def close(self) -> None:
        self._closed.set()
        self._sock.close()

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
