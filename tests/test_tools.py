"""`modeldrain`: the tools' command dispatches to each tool's own package, by its console script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from modeldrain.hook.exitcodes import ExitCode
from tests.conftest import REPO

MODELDRAIN = Path(sys.executable).with_name("modeldrain")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(MODELDRAIN), *args], capture_output=True, text=True, timeout=60)


def test_lint_runs_the_linter_under_the_tools_name():
    done = run("lint", str(REPO / "deploy" / "deployment.yaml"))
    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    helped = run("lint", "--help")
    assert helped.returncode == ExitCode.OK and helped.stdout.startswith("usage: modeldrain lint")


def test_inject_runs_the_injector_under_the_tools_name():
    helped = run("inject", "--help")
    assert helped.returncode == ExitCode.OK and helped.stdout.startswith("usage: modeldrain inject")


def test_retirement_runs_the_reference_client_under_the_tools_name():
    helped = run("retirement", "--help")
    assert helped.returncode == ExitCode.OK and helped.stdout.startswith("usage: modeldrain retirement")


def test_an_unknown_or_missing_tool_is_one_line_and_exit_2():
    for args in ((), ("lnt",)):
        done = run(*args)
        assert done.returncode == ExitCode.USAGE and done.stdout == ""
        (line,) = done.stderr.splitlines()
        assert line.startswith("modeldrain: error:") and "lint" in line and "retirement" in line


def test_the_old_names_still_run_the_moved_tools():
    prestop = Path(sys.executable).with_name("prestop")
    sidecar = Path(sys.executable).with_name("drain-sidecar")
    assert subprocess.run([str(prestop), "lint", str(REPO / "deploy" / "deployment.yaml")],
                          capture_output=True, timeout=60).returncode == ExitCode.OK
    assert subprocess.run([str(sidecar), "retirement", "--help"], capture_output=True,
                          timeout=60).returncode == ExitCode.OK
