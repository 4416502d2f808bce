"""A client that does not go away: completions back to back on one HTTP/1.1 keep-alive connection.

    client = KeepAliveClient("127.0.0.1", 8000, duration_s=1.0)
    client.start()
    ...                      # delete the Pod: nothing tells this client
    tally = client.stop()    # or it ends by itself when the connection fails
    tally.completed, tally.completed_after(t), tally.cut, tally.connections

What a client of a plain Service or a NodePort does: kube-proxy picked the replica when the
connection was made and keeps the established conntrack entry, so every request on it goes to
the same Pod, terminating or not, for as long as the connection is open; the engine closes only
an idle connection (vLLM: 5 s). LoadGenerator (emulation/load.py) is the other kind of client: a
new connection per request, which a router choosing a replica per request stands for.

When the connection fails the client stops (it does not reconnect: a reconnect through the
Service may reach another replica, which this emulation has none of). `in_thread` runs first in
the client's thread, before it connects (a test enters the client's network namespace there).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class KeepAliveTally:
    completed_at: list[float] = field(default_factory=list)  # monotonic time of each 200 answer
    cut: int = 0  # a request whose connection closed or reset before its whole answer
    other: list[str] = field(default_factory=list)  # any other answer (a status, a refused connect)
    connections: int = 0  # connections made: 1 while the first one holds

    @property
    def completed(self) -> int:
        return len(self.completed_at)

    def completed_after(self, at: float) -> int:
        return sum(1 for t in self.completed_at if t > at)


class KeepAliveClient:
    def __init__(self, host: str, port: int, *, duration_s: float = 1.0, timeout_s: float = 60.0,
                 in_thread: Callable[[], None] | None = None):
        self._host, self._port = host, port
        self._body = json.dumps({"duration_s": duration_s, "stream": False})
        self._timeout_s = timeout_s
        self._in_thread = in_thread
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="keep-alive-client", daemon=True)
        self.tally = KeepAliveTally()

    def start(self) -> "KeepAliveClient":
        self._thread.start()
        return self

    def stop(self, wait_s: float = 30.0) -> KeepAliveTally:
        """Stop after the request in flight; the tally once the thread has ended."""
        self._stopping.set()
        self._thread.join(wait_s)
        return self.tally

    def wait(self, wait_s: float) -> KeepAliveTally:
        """The tally once the client has ended by itself (its connection failed), or after wait_s."""
        self._thread.join(wait_s)
        return self.tally

    def _run(self) -> None:
        if self._in_thread is not None:
            self._in_thread()
        connection = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout_s)
        try:
            connection.connect()
        except OSError as exc:
            self.tally.other.append(f"connect: {exc}")
            return
        self.tally.connections = 1
        try:
            while not self._stopping.is_set():
                try:
                    connection.request("POST", "/v1/completions", body=self._body,
                                       headers={"Content-Type": "application/json"})
                    response = connection.getresponse()
                    response.read()
                except (OSError, http.client.HTTPException):
                    self.tally.cut += 1
                    return
                if response.status != 200:
                    self.tally.other.append(f"HTTP {response.status}")
                    return
                self.tally.completed_at.append(time.monotonic())
                if response.will_close:  # the engine said Connection: close: the client would reconnect
                    self.tally.other.append("closed by the engine after an answer")
                    return
        finally:
            connection.close()
