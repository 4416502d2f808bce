"""Run the bundled executable and read what it said: exit code, JSON events, the last line."""

from __future__ import annotations

import json
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field

# Fast timings for tests: no route wait, reads every 0.2 s. The grace and exit reserve keep
# their meaning (deadline = grace - reserve) and are set per test.
# An empty process table, as a container's PID namespace shows the hook only its own engine: this
# machine's /proc holds other tests' engines, whose --port the hook would otherwise read.
NO_PROCESSES = tempfile.mkdtemp(prefix="bundle-no-processes-")
FAST = ("--quiet", "--engine", "vllm", "--route-wait", "0", "--interval", "0.2", "--proc-root", NO_PROCESSES)


def drain_argv(executable: str, port: int, grace_s: float = 30, exit_reserve_s: float = 5) -> list[str]:
    return [executable, *FAST, "--port", str(port), "--grace", str(grace_s), "--exit-reserve", str(exit_reserve_s)]


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str
    events: list[dict] = field(default_factory=list)  # the JSON lines on stderr

    @property
    def finished(self) -> dict:
        """The last stdout line, which must be the drain_finished JSON object."""
        lines = self.stdout.strip().splitlines()
        assert lines, f"no stdout; exit {self.code}; stderr:\n{self.stderr}"
        event = json.loads(lines[-1])
        assert event["event"] == "drain_finished", event
        return event

    def event(self, name: str) -> dict:
        matches = [e for e in self.events if e.get("event") == name]
        assert matches, f"no {name} event in stderr:\n{self.stderr}"
        return matches[0]


def json_lines(text: str) -> list[dict]:
    events = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                pass
    return events


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(argv: list[str], timeout_s: float = 60, env: dict | None = None) -> Ran:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env,
                          stdin=subprocess.DEVNULL)
    return Ran(done.returncode, done.stdout, done.stderr, json_lines(done.stderr))
