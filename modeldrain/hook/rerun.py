"""Whether an earlier run of this hook in the same container started and never finished.

kubelet runs a container's preStop again when it restarts mid-drain: the new kubelet begins the
Pod's termination from scratch, with the full grace, and the runtime has killed the first exec
(containerd kills an exec whose caller went away). The second run need not wait the route wait
again where the first already served it (routers learned of the delete then), and its log says
it is a rerun and when the first began, so the first run's timeline, which never reached
`drain_finished`, does not look unfinished without a reason.

Each run writes a small marker into $TMPDIR at its start and removes it at its end; a marker
still there from a run that started less than its grace ago, in the same container, is that
earlier run. "The same container" is what both of kubelet's execs share and no other hook has:
the PID namespace and the start of its PID 1, the exec's parent (outside the container: 0), the
command line and the engine (or leader) it reads. A marker that cannot be written costs only
this (a second run then waits its route wait again) and is said once as a warning.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from dataclasses import dataclass
from typing import Callable

from modeldrain.hook.clock import exec_root_pid, parent_pid, process_start_boottime

__all__ = ["FirstRun", "RunMarker", "begin", "container_key", "finish"]

MARKER_PREFIX = "prestop-run-"
MAX_MARKER_BYTES = 64 * 1024  # the key holds the command line


@dataclass(frozen=True)
class FirstRun:
    """The earlier run of this hook in this container, from its marker."""

    pid: int
    started_boot_s: float  # on CLOCK_BOOTTIME, as /proc/<pid>/stat counts
    started_at_unix: float
    grace_s: float
    running: bool  # its process still runs (kubelet abandoned it) rather than ended unfinished


@dataclass(frozen=True)
class RunMarker:
    path: str | None  # None: no marker kept (problem says why)
    first: FirstRun | None
    problem: str = ""


def container_key(argv: list[str], target: str) -> str:
    """What two of kubelet's execs of this hook in one container share (the marker holds it whole;
    its file is named by two checksums of it: hashlib would cost the hook's start ~15 ms of imports)."""
    parts = [_or_empty(lambda: os.readlink("/proc/self/ns/pid")), _or_empty(lambda: str(process_start_boottime(1))),
             _or_empty(lambda: str(parent_pid(exec_root_pid()))), "\0".join(argv), target]
    return "\n".join(parts)


def _file_name(key: str) -> str:
    data = key.encode("utf-8", "surrogateescape")
    return f"{MARKER_PREFIX}{zlib.crc32(data):08x}{zlib.adler32(data):08x}.json"


def _or_empty(part: Callable[[], str]) -> str:
    try:
        return part()
    except (OSError, ValueError, IndexError):
        return ""  # /proc withheld: the rest of the key still tells containers apart


def begin(key: str, started_boot_s: float, grace_s: float, *, directory: str | None = None,
          now_boot_s: float | None = None, pid: int | None = None) -> RunMarker:
    """Read an earlier run's marker, then leave this run's (keeping the first run's start). Never raises."""
    now_boot_s = time.clock_gettime(time.CLOCK_BOOTTIME) if now_boot_s is None else now_boot_s
    pid = exec_root_pid() if pid is None else pid
    # $TMPDIR as the bundle's own launchers use it (an emptyDir in the shipped manifests), else /tmp.
    path = os.path.join(directory or os.environ.get("TMPDIR") or "/tmp", _file_name(key))
    first = _earlier_run(path, key, now_boot_s)
    record = {"key": key, "pid": pid, "started_boot_s": started_boot_s,
              "started_at_unix": time.time() - (now_boot_s - started_boot_s), "grace_s": grace_s}
    if first is not None:
        record.update(pid=first.pid, started_boot_s=first.started_boot_s, started_at_unix=first.started_at_unix,
                      grace_s=first.grace_s)
    try:
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="ascii") as f:
            json.dump(record, f)
        os.replace(tmp, path)
    except OSError as exc:
        return RunMarker(None, first, f"cannot keep the run marker {path}: {exc.strerror or exc}")
    return RunMarker(path, first)


def finish(marker: RunMarker) -> None:
    """This run ended (whatever its outcome): a later run of the hook is a new drain."""
    if marker.path is None:
        return
    try:
        os.unlink(marker.path)
    except OSError:
        pass  # gone already: the first run, still running, ended after this one began


def _earlier_run(path: str, key: str, now_boot_s: float) -> FirstRun | None:
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read(MAX_MARKER_BYTES))
        if data["key"] != key:
            return None  # another container's or command's run whose name shares the checksums
        first = FirstRun(pid=int(data["pid"]), started_boot_s=float(data["started_boot_s"]),
                         started_at_unix=float(data["started_at_unix"]), grace_s=float(data["grace_s"]), running=False)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none, or not ours to read: this run is the first
    if not 0 <= now_boot_s - first.started_boot_s < first.grace_s:
        return None  # older than its own grace: its container was stopped since (or the clock is not this boot's)
    try:
        running = abs(process_start_boottime(first.pid) - first.started_boot_s) < 0.05
    except (OSError, ValueError, IndexError):
        running = False
    return FirstRun(first.pid, first.started_boot_s, first.started_at_unix, first.grace_s, running)
