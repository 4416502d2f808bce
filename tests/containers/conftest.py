"""deploy/'s Pods in a real container runtime: podman, in a private store the one set-up script
(tests/containers/pod-env.sh) makes. Needs root (podman's store, fsGroup's ownership, setns into
a Pod) and Debian's podman (installed when missing); a laptop without them skips with the reason,
CI=true fails instead (tests/environment.py).

The images are the ones users get: `make images`' archives, loaded; the engines the manifests
name are the engine emulator's image under those names (no Python, no shell, no libc); images
deploy/ builds itself are built from deploy/'s own Dockerfiles.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
from typing import Callable, Iterator

import pytest

from tests import builds, environment
from tests.conftest import REPO
from tests.deploy.manifests import (
    PRESTOP_IMAGE_REPO,
    SIDECAR_IMAGE_REPO,
    PodTemplate,
    images_built_in_deploy,
    pod_templates,
)

from .kubelet import Pod
from .podman import Podman

# One store per pytest-xdist worker: a worker's set-up or clean-up never touches another's.
STORE = f"pods-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
POD_ENV = REPO / "tests" / "containers" / "pod-env.sh"
EXIT_CANNOT_RUN = 3  # pod-env.sh: this machine cannot run containers (the reason on stderr)
SETUP_TIMEOUT_S = 900  # a cold CI machine: apt-get, three static executables, the images


def engine_stand_ins() -> list[str]:
    """The images deploy/ names that neither the product nor deploy/ builds: the engines'.
    Those in deploy/'s Dockerfiles' FROM lines count too (the baked image starts from one)."""
    named = {c["image"] for t in pod_templates() for c in t.containers()}
    built = images_built_in_deploy()
    for dockerfile in built.values():
        named |= set(re.findall(r"^FROM\s+(\S+)", dockerfile.read_text(), re.M))
    product = {name for name in named if name.split(":")[0] in (PRESTOP_IMAGE_REPO, SIDECAR_IMAGE_REPO)}
    return sorted(named - product - set(built))


@pytest.fixture(scope="session")
def podman() -> Iterator[Podman]:
    environment.require_root("podman's private store, fsGroup's ownership and entering a Pod's network")
    builds.require_bundle_toolchain()
    args = [str(POD_ENV), "setup", STORE]
    for name in engine_stand_ins():
        args += ["--tag", name]
    for name, dockerfile in images_built_in_deploy().items():
        args += ["--build", f"{name}={dockerfile.relative_to(REPO)}"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=SETUP_TIMEOUT_S)
    if done.returncode == EXIT_CANNOT_RUN:
        environment.unavailable(done.stderr.strip().splitlines()[-1])
    assert done.returncode == 0, f"pod-env.sh setup failed ({done.returncode}):\n{done.stderr}"
    store_env = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    yield Podman(store_env)
    subprocess.run([str(POD_ENV), "clean", STORE], capture_output=True, text=True, timeout=120, check=True)


@pytest.fixture(scope="session")
def tokens() -> dict[str, dict[str, str]]:
    """The Secrets the manifests mount, made as docs/layouts.md says: a random token."""
    return {"drain-sidecar-token": {"token": secrets.token_hex(32)}}


@pytest.fixture
def make_pod(podman, tokens, tmp_path) -> Iterator[Callable[..., Pod]]:
    pods: list[Pod] = []

    def make(template: PodTemplate, name: str | None = None) -> Pod:
        workdir = tmp_path / (name or template.pod_name)
        workdir.mkdir()
        pod = Pod(podman, template, workdir, secrets=tokens, name=name)
        pods.append(pod)
        return pod

    yield make
    for pod in pods:
        pod.remove()


def template_named(pod_name: str) -> PodTemplate:
    (template,) = [t for t in pod_templates() if t.pod_name == pod_name]
    return template
