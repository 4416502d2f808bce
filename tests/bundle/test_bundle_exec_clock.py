"""The bundle's deadline counts from kubelet's exec, not from when Python got going.

staticx's launcher and PyInstaller's bootloader unpack for hundreds of milliseconds (seconds
on a loaded node) before Python runs. The test makes that start slow on purpose: it freezes
the launchers (SIGSTOP to the process group) before Python exists, holds them, and lets them
go. The hook must count the hold as time already spent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from .runner import drain_argv, json_lines

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

HOLD_S = 2.0
ATTEMPTS = 5
# staticx's launcher -> PyInstaller's bootloader -> Python: three processes once Python runs.
PROCESSES_ONCE_PYTHON_RUNS = 3


def session_members(session_id: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        if int(fields[3]) == session_id:  # field 6: session id
            members.append(int(entry))
    return members


def start_held(argv, env) -> tuple[subprocess.Popen, float] | None:
    """Start the bundle and freeze it before Python starts; None if Python won the race."""
    spawned_at = time.monotonic()
    process = subprocess.Popen(argv, env=env, text=True, start_new_session=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.killpg(process.pid, signal.SIGSTOP)
    time.sleep(0.05)  # let a fork that was already under way show up in /proc
    os.killpg(process.pid, signal.SIGSTOP)
    if len(session_members(process.pid)) < PROCESSES_ONCE_PYTHON_RUNS:
        return process, spawned_at
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate()
    return None


def test_elapsed_counts_from_the_exec_through_a_slow_unpack(build, bundle, engine, bundle_env):
    argv = drain_argv(str(bundle), engine.port)
    for _ in range(ATTEMPTS):
        held = start_held(argv, bundle_env)
        if held is not None:
            break
    else:
        pytest.fail(f"Python started before the launchers could be held, {ATTEMPTS} times out of {ATTEMPTS}")
    process, spawned_at = held
    try:
        time.sleep(HOLD_S)
        os.killpg(process.pid, signal.SIGCONT)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    wall_s = time.monotonic() - spawned_at
    assert process.returncode == 0, stderr
    started = next(e for e in json_lines(stderr) if e["event"] == "drain_started")
    finished = json_lines(stdout)[-1]
    # Python started after the hold, yet its first log line already counts the hold...
    assert started["elapsed_s"] >= HOLD_S
    # ...and its elapsed time is the whole time since the exec: the test's clock starts just
    # before the fork and stops after the launchers' clean-up, so it reads a little more
    # (under qemu, the clean-up is slower).
    assert finished["elapsed_s"] >= HOLD_S
    assert 0 <= wall_s - finished["elapsed_s"] < 0.3 * build.slowdown, (wall_s, finished)
