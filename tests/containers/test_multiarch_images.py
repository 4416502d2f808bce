"""`make images PLATFORMS=linux/amd64,linux/arm64`: one OCI image index per image, holding an
image for each architecture under the one name deploy/'s manifests use, that podman loads and
runs on either (the arm64 one under qemu, through binfmt_misc)."""

from __future__ import annotations

import json
import subprocess
import tarfile
from typing import Iterator

import pytest

from modeldrain.hook import __version__
from tests import builds, environment
from tests.conftest import REPO

from .podman import Podman

pytestmark = [pytest.mark.containers, pytest.mark.arm64, pytest.mark.timeout(builds.ARM64_BUILD_TIMEOUT_S)]

PLATFORMS = "linux/amd64,linux/arm64"
ARCHIVES = REPO / "dist" / "images" / "multiarch"
# program -> (image, the archive make writes, what the image's command prints first)
IMAGES = {
    "prestop": (f"modeldrain/prestop:{__version__}", ARCHIVES / "prestop.tar", f"prestop {__version__} (static"),
    "drain-sidecar": (f"modeldrain/drain-sidecar:{__version__}", ARCHIVES / "drain-sidecar.tar",
                      f"drain-sidecar {__version__}"),
}
INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
STORE = "multiarch"
CONTAINERS_SH = REPO / "build" / "containers.sh"
SETUP_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def archives() -> None:
    environment.require_root("buildah's private store")
    builds.require_bundle_toolchain("arm64")
    with builds.exclusive("bundle"):
        done = subprocess.run(["make", "-s", "images", f"PLATFORMS={PLATFORMS}"], cwd=REPO, capture_output=True,
                              text=True, timeout=builds.ARM64_BUILD_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def podman(archives) -> Iterator[Podman]:
    """A private store (build/containers.sh) of its own: the other container tests' stores
    hold the amd64-only images under the same names."""
    script = (f'. {CONTAINERS_SH} {STORE} && containers_require_root && containers_install && containers_setup && '
              'printf "%s=%s\\n" CONTAINERS_CONF "$CONTAINERS_CONF" CONTAINERS_STORAGE_CONF "$CONTAINERS_STORAGE_CONF" '
              'CONTAINERS_REGISTRIES_CONF "$CONTAINERS_REGISTRIES_CONF"')
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=SETUP_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    store_env = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    yield Podman(store_env)
    subprocess.run(["bash", "-c", f". {CONTAINERS_SH} {STORE} && containers_clean"], capture_output=True,
                   text=True, timeout=120, check=True)


def archive_json(tar: tarfile.TarFile, name: str) -> dict:
    member = tar.extractfile(name)
    assert member is not None, name
    return json.load(member)


@pytest.mark.parametrize("program", IMAGES)
def test_the_archive_is_one_index_of_both_architectures(archives, program):
    image, archive, _ = IMAGES[program]
    with tarfile.open(archive) as tar:
        (top,) = archive_json(tar, "index.json")["manifests"]
        assert top["mediaType"] == INDEX_MEDIA_TYPE
        assert top["annotations"]["org.opencontainers.image.ref.name"] == image
        nested = archive_json(tar, f"blobs/{top['digest'].replace(':', '/')}")
        platforms = {}
        for manifest in nested["manifests"]:
            config_digest = archive_json(tar, f"blobs/{manifest['digest'].replace(':', '/')}")["config"]["digest"]
            config = archive_json(tar, f"blobs/{config_digest.replace(':', '/')}")
            platforms[manifest["platform"]["architecture"]] = (manifest["platform"]["os"], config["architecture"])
    # Each entry's platform, and the image config it points to, say the same architecture.
    assert platforms == {"amd64": ("linux", "amd64"), "arm64": ("linux", "arm64")}


@pytest.mark.parametrize("program", IMAGES)
def test_podman_loads_the_index_and_runs_each_architecture(podman, program):
    image, archive, prints = IMAGES[program]
    podman.run("load", "--quiet", "--input", str(archive), timeout_s=120)
    listed = json.loads(podman.output("manifest", "inspect", image))
    assert {m["platform"]["architecture"] for m in listed["manifests"]} == {"amd64", "arm64"}
    args = ["version"] if program == "prestop" else ["--version"]
    for arch, machine in (("amd64", "x86_64"), ("arm64", "aarch64")):
        done = podman.run("run", "--rm", "--pull", "never", "--platform", f"linux/{arch}", image, *args,
                          timeout_s=120)
        assert done.stdout.startswith(prints), done.stdout + done.stderr
        if program == "prestop":  # its version names the machine that built it
            assert f"on {machine};" in done.stdout, done.stdout
