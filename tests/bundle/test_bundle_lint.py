"""`prestop lint` in the static executable: left out (docs/prestop.md, "modeldrain lint"), said in one
line that names the tool's own command."""

from __future__ import annotations

import subprocess

import pytest

from modeldrain.hook.exitcodes import ExitCode
from tests.conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # the fixture builds the executables


def test_the_bundle_leaves_lint_out_and_names_the_tool(bundle):
    refused = subprocess.run([str(bundle), "lint", str(REPO / "deploy" / "deployment.yaml")], capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode == ExitCode.USAGE and refused.stdout == ""
    (line,) = refused.stderr.splitlines()
    assert "not in the static executable" in line and "modeldrain lint" in line
