"""The suite's empty process table (tests/process_table.py): every program a test starts reads it,
not this machine's /proc, unless the test gives --proc-root."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from emulation.engine_process import EngineProcess, free_port
from emulation.launch import LaunchShape
from modeldrain.hook.engine import PROC_ROOT_ENV
from tests.e2e.prestop_run import PRESTOP
from tests.process_table import empty_process_table
from tests.sidecar.sidecar_process import SidecarProcess


def one_process_table(tmp_path: Path, *argv: str) -> str:
    """A /proc with one process, the engine, as a container's PID namespace shows it."""
    root = tmp_path / "proc"
    (root / "7").mkdir(parents=True)
    (root / "7" / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    return str(root)


def check(*args: str, env: dict[str, str] | None = None) -> dict:
    """`prestop check` told nothing about /proc."""
    done = subprocess.run([PRESTOP, "check", *args], capture_output=True, text=True, timeout=20,
                          env=dict(os.environ, **(env or {})))
    return json.loads(done.stdout)


def test_the_session_points_every_program_at_an_empty_table():
    table = empty_process_table()
    assert os.environ[PROC_ROOT_ENV] == table
    assert os.path.isdir(table) and os.listdir(table) == []


def test_the_hook_told_nothing_reads_the_sessions_table_and_not_this_machines(tmp_path):
    # A real engine on this machine, under vLLM's own command line, on a port the hook is not told.
    with EngineProcess(launch=LaunchShape.VLLM_CLI) as engine:
        report = check("--port", str(free_port()), "--engine", "vllm")
        assert (report["outcome"], report["engine_source"]) == ("refused", "flag")
        # The variable is what the program follows: a table that shows the engine finds it.
        table = one_process_table(tmp_path, *engine.argv)
        report = check("--port", str(free_port()), env={PROC_ROOT_ENV: table})
        assert (report["outcome"], report["engine_source"]) == ("idle", "cmdline")
        assert report["target"].endswith(f":{engine.port}/metrics")


def test_the_sidecar_told_nothing_reads_the_sessions_table_and_not_this_machines(tmp_path):
    with EngineProcess(launch=LaunchShape.VLLM_CLI) as engine:
        with SidecarProcess("--port", str(free_port()), "--engine", "vllm") as sidecar:
            assert sidecar.work()["read"]["outcome"] == "refused"
        table = one_process_table(tmp_path, *engine.argv)
        with SidecarProcess("--port", str(free_port()), "--engine", "vllm", env={PROC_ROOT_ENV: table}) as sidecar:
            assert sidecar.work()["read"]["outcome"] == "idle"
