"""What the hook costs a Pod: start-up to its first read, peak memory, size on disk.

For each executable (the bundle dist/prestop, the console script .venv/bin/prestop), runs a whole
drain against a raw listening socket that answers every read with vLLM's real idle exposition
(47 KB), with --route-wait 0 so the first read comes as soon as the hook can make it:

- exec to first request: from just before the exec to the first request's bytes arriving at the
  socket, on this process's monotonic clock;
- exec to first log line: the hook's own `drain_started` elapsed_s (it counts from the kernel's
  record of the outermost process's start);
- peak RSS: `/usr/bin/time -v`'s maximum resident set size (the largest single process), in
  separate runs so the timing runs carry no wrapper; and the sum of VmHWM over every process of
  the exec (the bundle is three: staticx's launcher, PyInstaller's bootloader, Python), sampled
  when the second read arrives.

Runs alternate between the executables so drift on the machine falls on both alike.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.costs import process
from bench.costs.process import GNU_TIME, ExecutableRuns, max_rss_kib, session_sum_kib
from bench.paths import VLLM_IDLE_SCRAPE

# Short poll spacing: the drain (two idle reads) ends ~0.2 s after the first read.
INTERVAL_S = 0.2
# A run that has not finished in this long is broken, not slow.
RUN_TIMEOUT_S = 30.0
# What the console script imports beyond the standard library: what an image must carry for it.
PRESTOP_PACKAGES = ("modeldrain.hook", "prometheus_client")


class RawMetricsSocket:
    """A bare listening socket: notes when each run's first request arrives, answers idle."""

    def __init__(self) -> None:
        self._body = VLLM_IDLE_SCRAPE.read_bytes()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._arrivals: list[float] = []
        self._session: tuple[int, int | None] | None = None  # (session id, pid to leave out)
        self.session_hwm_kib = 0
        threading.Thread(target=self._serve, name="raw-metrics", daemon=True).start()

    def expect(self, session_id: int, exclude_pid: int | None) -> None:
        with self._lock:
            self._arrivals = []
            self._session = (session_id, exclude_pid)
            self.session_hwm_kib = 0

    def first_arrival(self) -> float | None:
        with self._lock:
            return self._arrivals[0] if self._arrivals else None

    def _serve(self) -> None:
        while True:
            connection, _ = self._listener.accept()
            with connection:
                data = b""
                connection.settimeout(5.0)
                try:
                    while b"\r\n\r\n" not in data:
                        chunk = connection.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                        if len(data) == len(chunk):  # the request's first bytes
                            with self._lock:
                                self._arrivals.append(time.monotonic())
                    with self._lock:
                        reads, session = len(self._arrivals), self._session
                    if reads == 2 and session is not None:  # every process is up and has parsed a body
                        self.session_hwm_kib = session_sum_kib(*session, "VmHWM")
                    head = (f"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                            f"Content-Length: {len(self._body)}\r\nConnection: close\r\n\r\n").encode()
                    connection.sendall(head + self._body)
                except OSError:
                    continue


@dataclass
class PrestopRuns(ExecutableRuns):
    first_request_s: list[float] = field(default_factory=list)
    first_log_s: list[float] = field(default_factory=list)


def _drain_argv(path: str, port: int) -> list[str]:
    return [path, "--grace", "30", "--port", str(port), "--engine", "vllm", "--quiet", "--route-wait", "0",
            "--interval", str(INTERVAL_S)]


def _first_log_s(stderr: str) -> float | None:
    for line in stderr.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "drain_started":
            return float(event["elapsed_s"])
    return None


def _timed_run(runs: PrestopRuns, server: RawMetricsSocket, env: dict) -> None:
    started = time.monotonic()
    process = subprocess.Popen(_drain_argv(runs.path, server.port), env=env, start_new_session=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    server.expect(process.pid, None)
    _, err = process.communicate(timeout=RUN_TIMEOUT_S)
    arrival = server.first_arrival()
    first_log = _first_log_s(err.decode(errors="replace"))
    if process.returncode != 0 or arrival is None or first_log is None:
        runs.failures.append(f"exit {process.returncode}: {err.decode(errors='replace')[-300:]}")
        return
    runs.first_request_s.append(arrival - started)
    runs.first_log_s.append(first_log)


def _memory_run(runs: PrestopRuns, server: RawMetricsSocket, env: dict, time_file: Path) -> None:
    argv = [str(GNU_TIME), "-v", "-o", str(time_file), *_drain_argv(runs.path, server.port)]
    process = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    server.expect(process.pid, process.pid)  # the session, less /usr/bin/time itself
    process.wait(timeout=RUN_TIMEOUT_S)
    peak_kib = max_rss_kib(time_file)
    if process.returncode != 0 or peak_kib is None:
        runs.failures.append(f"/usr/bin/time run: exit {process.returncode}")
        return
    runs.max_rss_kib.append(peak_kib)
    if server.session_hwm_kib:
        runs.session_hwm_kib.append(server.session_hwm_kib)


def measure(executables: dict[str, Path], runs: int) -> dict:
    """`executables`: name -> path. Returns the raw samples and the footprint of each."""
    server = RawMetricsSocket()
    return process.measure(PrestopRuns, executables, runs, tmp_prefix="bench-prestop",
                           timed=lambda r, env: _timed_run(r, server, env),
                           memory=lambda r, env, report: _memory_run(r, server, env, report),
                           version_flag="version", packages=PRESTOP_PACKAGES, interval_s=INTERVAL_S)
