"""Run the real `prestop` process and read what it said."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PRESTOP = str(Path(sys.executable).with_name("prestop"))

# Shortened timings for rows whose point is not the timing itself: first read at 1 s,
# deadline at 8 - 5 = 3 s. The defaults (5 s, G - 5) are tested on their own.
FAST = ["--route-wait", "1", "--grace", "8"]
FAST_DEADLINE_S = 3.0

# Unless a test shows the hook a /proc of its own, it sees none: in a Pod the hook sees only
# its container's processes, never the engines other tests run on this machine meanwhile.
NO_PROCESSES = tempfile.mkdtemp(prefix="empty-proc-")


@dataclass(frozen=True)
class HookRun:
    code: int
    elapsed_s: float  # wall time from exec to exit, measured by the parent
    stdout: str
    stderr: str

    @property
    def finished(self) -> dict:
        """The last stdout line: the drain_finished object."""
        return json.loads(self.stdout.strip().splitlines()[-1])

    @property
    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.stderr.splitlines() if line.startswith("{")]

    def event(self, name: str) -> dict:
        return next(e for e in self.events if e["event"] == name)


def run_prestop(*args: str, timeout_s: float = 60, env: dict | None = None) -> HookRun:
    started = time.monotonic()
    proc = subprocess.run([PRESTOP, "--proc-root", NO_PROCESSES, *args, "--quiet"], capture_output=True, text=True, timeout=timeout_s,
                          env=None if env is None else dict(os.environ, **env))
    return HookRun(proc.returncode, time.monotonic() - started, proc.stdout, proc.stderr)


def start_prestop(*args: str) -> subprocess.Popen:
    return subprocess.Popen([PRESTOP, "--proc-root", NO_PROCESSES, *args, "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
