"""What drain-sidecar costs a Pod at start: exec to listening, memory, size on disk.

For each executable (the static bundle dist/drain-sidecar, the console script
.venv/bin/drain-sidecar), starts the sidecar on a free loopback port, its engine a port nothing
listens on (`--engine vllm`: it reads nothing until asked):

- exec to listening: from just before the exec until a TCP connect to its port succeeds, polled
  every 2 ms on this process's monotonic clock (then SIGINT: it stops at once);
- exec to first answer: until `GET /healthz` first answers 200, polled the same way;
- peak RSS: `/usr/bin/time -v`'s maximum resident set size (the largest single process), in
  separate runs so the timing runs carry no wrapper; and, in the same runs, the sum of VmHWM
  over every process of the exec (the bundle is three: staticx's launcher, PyInstaller's
  bootloader, Python) and of their proportional set size, 1 s after it listens;
- unpacked: what the bundle writes into TMPDIR at every start (it counts against a Memory
  emptyDir, and the volume at /tmp must hold it).

Runs alternate between the executables so drift on the machine falls on both alike.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.costs import process
from bench.costs.process import GNU_TIME, ExecutableRuns, max_rss_kib, session_sum_kib, tree_bytes

POLL_S = 0.002
SETTLE_S = 1.0  # after listening: the start-up's transient memory is past
RUN_TIMEOUT_S = 30.0
# What the console script imports beyond the standard library: what an image must carry for it.
SIDECAR_PACKAGES = ("modeldrain.hook", "modeldrain.sidecar", "aiohttp", "uvloop", "prometheus_client", "multidict", "yarl",
                    "frozenlist", "aiosignal", "propcache", "aiohappyeyeballs", "attr", "attrs", "idna")

@dataclass
class SidecarRuns(ExecutableRuns):
    listening_s: list[float] = field(default_factory=list)
    first_answer_s: list[float] = field(default_factory=list)
    session_pss_kib: list[int] = field(default_factory=list)
    unpacked_bytes: list[int] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _argv(path: str, port: int, engine_port: int) -> list[str]:
    return [path, "--listen", f"127.0.0.1:{port}", "--engine", "vllm", "--port", str(engine_port)]


def _connects(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _healthy(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def _wait_for(condition, process: subprocess.Popen, started: float) -> float | None:
    while time.monotonic() - started < RUN_TIMEOUT_S:
        if condition():
            return time.monotonic() - started
        if process.poll() is not None:
            return None
        time.sleep(POLL_S)
    return None


def _stop(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGINT)  # the whole exec; SIGINT: no linger
        process.wait(timeout=RUN_TIMEOUT_S)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _timed_run(runs: SidecarRuns, env: dict) -> None:
    port, engine_port = _free_port(), _free_port()
    started = time.monotonic()
    process = subprocess.Popen(_argv(runs.path, port, engine_port), env=env, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        listening = _wait_for(lambda: _connects(port), process, started)
        answered = _wait_for(lambda: _healthy(port), process, started) if listening is not None else None
    finally:
        _stop(process)
    if listening is None or answered is None:
        runs.failures.append(f"timed run: not listening (exit {process.returncode})")
        return
    runs.listening_s.append(listening)
    runs.first_answer_s.append(answered)


def _memory_run(runs: SidecarRuns, env: dict, time_file: Path) -> None:
    port, engine_port = _free_port(), _free_port()
    argv = [str(GNU_TIME), "-v", "-o", str(time_file), *_argv(runs.path, port, engine_port)]
    started = time.monotonic()
    process = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        if _wait_for(lambda: _connects(port), process, started) is None:
            runs.failures.append(f"memory run: not listening (exit {process.poll()})")
            return
        time.sleep(SETTLE_S)
        # The session, less /usr/bin/time itself.
        runs.session_hwm_kib.append(session_sum_kib(process.pid, process.pid, "VmHWM"))
        runs.session_pss_kib.append(session_sum_kib(process.pid, process.pid, "Pss", source="smaps_rollup"))
        runs.unpacked_bytes.append(tree_bytes(Path(env["TMPDIR"])))
    finally:
        _stop(process)  # /usr/bin/time ignores SIGINT and reports once its child has exited
    peak_kib = max_rss_kib(time_file)
    if peak_kib is None:
        runs.failures.append(f"/usr/bin/time run: exit {process.returncode}, no report")
        return
    runs.max_rss_kib.append(peak_kib)


def measure(executables: dict[str, Path], runs: int) -> dict:
    """`executables`: name -> path. Returns the raw samples and the footprint of each."""
    return process.measure(SidecarRuns, executables, runs, tmp_prefix="bench-sidecar", timed=_timed_run,
                           memory=_memory_run, version_flag="--version", packages=SIDECAR_PACKAGES)
