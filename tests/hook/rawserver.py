"""A one-behaviour TCP server on 127.0.0.1 for reader tests: real sockets, scripted bytes."""

from __future__ import annotations

import socket
import threading
import time


class RawServer:
    """Answers every connection with `respond(conn)` on its own thread."""

    def __init__(self, respond, tls_context=None, wait_for_request=True):
        self._respond = respond
        self._wait_for_request = wait_for_request
        self._tls = tls_context
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []  # what each connection sent before the answer
        self._closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        try:
            if self._tls is not None:
                conn = self._tls.wrap_socket(conn, server_side=True)
            conn.settimeout(10)
            data = b""
            while self._wait_for_request and b"\r\n\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
            self.requests.append(data)
            self._respond(conn)
        except OSError:
            pass  # the client gave up (that is what several tests provoke)
        finally:
            conn.close()

    def close(self):
        self._closed.set()
        self._sock.close()


def http_response(body: bytes, status: str = "200 OK", content_type: str = "text/plain; version=0.0.4") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n").encode() + body


def drip(payload: bytes, every_s: float):
    def respond(conn):
        for i in range(len(payload)):
            conn.sendall(payload[i : i + 1])
            time.sleep(every_s)
    return respond


def canned(payload: bytes):
    return lambda conn: conn.sendall(payload)


def hang(conn):
    time.sleep(30)
