"""The well-behaved clients of the sidecar, timed: what the controller and kubelet's probes get.

Each request is one GET on a fresh connection (kubelet's probes never reuse one; the reference
controller, modeldrain/retirement/client.py, opens one per read), bounded by the client's own timeout. An
answer counts as a success only when it is a 200 within that timeout; anything else is a failure
of a named kind (a status, a timeout, a refused or reset connection), so a flood that locks the
clients out shows as failures, never as missing samples.
"""

from __future__ import annotations

import http.client
import socket
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Mapping

# kubelet's default probe timeoutSeconds.
PROBE_TIMEOUT_S = 1.0
# The controller waits for a fresh read: at most one in flight, the spacing and its own (the
# sidecar answers 504 past ~5 s), so a 10 s timeout only fails a sidecar that does not answer.
CONTROLLER_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Attempt:
    seconds: float  # from before the connect to the whole answer (or the failure)
    status: int | None  # None: no HTTP answer
    failure: str | None  # None for a 200; else "HTTP 503", "timeout", "refused", "reset", ...

    @property
    def ok(self) -> bool:
        return self.failure is None


def timed_get(port: int, path: str, headers: Mapping[str, str] | None = None,
              timeout_s: float = PROBE_TIMEOUT_S) -> tuple[Attempt, bytes]:
    """One GET on a new connection to 127.0.0.1:port; never raises for what the server does."""
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        connection.request("GET", path, headers=dict(headers or {}))
        response = connection.getresponse()
        body = response.read()
    except TimeoutError:
        return Attempt(time.perf_counter() - started, None, "timeout"), b""
    except ConnectionRefusedError:
        return Attempt(time.perf_counter() - started, None, "refused"), b""
    except (ConnectionError, http.client.HTTPException, socket.error) as exc:
        return Attempt(time.perf_counter() - started, None, f"reset ({type(exc).__name__})"), b""
    finally:
        connection.close()
    seconds = time.perf_counter() - started
    if seconds > timeout_s:
        return Attempt(seconds, response.status, "timeout"), body
    failure = None if response.status == 200 else f"HTTP {response.status}"
    return Attempt(seconds, response.status, failure), body


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def summarize(attempts: list[Attempt]) -> dict:
    """Success rate, and p50/p99 latency over every attempt (a failure counts with the time it
    took: a timeout at its bound), and the failures by kind."""
    seconds = sorted(a.seconds for a in attempts)
    failures: dict[str, int] = {}
    for a in attempts:
        if a.failure is not None:
            failures[a.failure] = failures.get(a.failure, 0) + 1
    ok = sum(1 for a in attempts if a.ok)
    return {
        "requests": len(attempts),
        "ok": ok,
        "success_rate": round(ok / len(attempts), 4) if attempts else None,
        "p50_ms": round(percentile(seconds, 0.50) * 1000, 1) if seconds else None,
        "p99_ms": round(percentile(seconds, 0.99) * 1000, 1) if seconds else None,
        "mean_ms": round(statistics.fmean(seconds) * 1000, 1) if seconds else None,
        "failures": failures,
    }


class PeriodicClient:
    """One client on a thread: a GET every `every_s` (the next starts on schedule, or at once if the
    last overran), until stopped."""

    def __init__(self, port: int, path: str, every_s: float, timeout_s: float,
                 headers: Mapping[str, str] | None = None) -> None:
        self._port, self._path, self._every_s, self._timeout_s = port, path, every_s, timeout_s
        self._headers = dict(headers or {})
        self.attempts: list[Attempt] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"client {path}", daemon=True)

    def start(self) -> PeriodicClient:
        self._thread.start()
        return self

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            attempt, _ = timed_get(self._port, self._path, self._headers, self._timeout_s)
            self.attempts.append(attempt)
            next_at = max(next_at + self._every_s, time.monotonic())
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> list[Attempt]:
        self._stop.set()
        self._thread.join(self._timeout_s + 5)
        return self.attempts
