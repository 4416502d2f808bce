"""`make images PLATFORMS=linux/amd64,linux/arm64`: one OCI image index per image, holding an
image for each architecture under the one name deploy/'s manifests use. podman takes either
architecture's image from the archive under that name, and a registry the index is pushed to
serves each architecture its own, as a node's pull sees it (the arm64 one runs here under
qemu, through binfmt_misc)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tarfile
import time
from pathlib import Path
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
    "prestop": (f"localhost/modeldrain/prestop:{__version__}", ARCHIVES / "prestop.tar", f"prestop {__version__} (static"),
    "drain-sidecar": (f"localhost/modeldrain/drain-sidecar:{__version__}", ARCHIVES / "drain-sidecar.tar",
                      f"drain-sidecar {__version__}"),
}
INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
ARCHES = {"amd64": "x86_64", "arm64": "aarch64"}  # the platform's architecture -> uname -m inside
# One store per xdist worker, as the other container tests have: a worker's teardown must not
# remove the store another worker's podman is running in.
STORE = f"multiarch-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
CONTAINERS_SH = REPO / "build" / "containers.sh"
SETUP_TIMEOUT_S = 300
# The registry side, from Debian: skopeo pushes the whole index (podman 4.3 cannot), and
# docker-registry (the CNCF distribution registry) serves it on loopback.
REGISTRY_PACKAGES = {"skopeo": "skopeo", "docker-registry": "docker-registry"}  # command -> package
REGISTRY_START_TIMEOUT_S = 30


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


def assert_runs_as(podman: Podman, program: str, image: str, arch: str) -> None:
    """The image podman holds under `image` for `arch` is that architecture's executable."""
    _, _, prints = IMAGES[program]
    args = ["version"] if program == "prestop" else ["--version"]
    inspected = json.loads(podman.output("image", "inspect", image))[0]
    assert inspected["Architecture"] == arch
    done = podman.run("run", "--rm", "--pull", "never", "--arch", arch, image, *args, timeout_s=120)
    assert done.stdout.startswith(prints), done.stdout + done.stderr
    if program == "prestop":  # its version names the machine that built it
        assert f"on {ARCHES[arch]};" in done.stdout, done.stdout


@pytest.mark.parametrize("program", IMAGES)
def test_podman_takes_each_architectures_image_from_the_archive(podman, program):
    """podman 4.3 keeps no index in its store: `podman load` takes this machine's image, and
    `podman pull --arch` another's, each under the image's one name."""
    image, archive, _ = IMAGES[program]
    podman.run("load", "--quiet", "--input", str(archive), timeout_s=120)
    assert_runs_as(podman, program, image, "amd64")
    podman.run("pull", "--quiet", "--arch", "arm64", f"oci-archive:{archive}", timeout_s=120)
    assert_runs_as(podman, program, image, "arm64")


def ensure_registry_tools() -> None:
    missing = [package for command, package in REGISTRY_PACKAGES.items() if shutil.which(command) is None]
    if not missing:
        return
    environment.require_root(f"apt-get install {' '.join(missing)}")
    done = subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "-q",
                           "--no-install-recommends", *missing], capture_output=True, text=True, timeout=600,
                          env={"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Iterator[str]:
    """A registry on loopback, storing in a temporary folder: its host:port."""
    ensure_registry_tools()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    folder: Path = tmp_path_factory.mktemp("registry")
    config = folder / "config.yml"
    config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {folder / 'data'}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n")
    server = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline_at = time.monotonic() + REGISTRY_START_TIMEOUT_S
        while True:
            assert server.poll() is None, "docker-registry exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline_at, "docker-registry not listening in time"
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.parametrize("program", IMAGES)
def test_a_registry_serves_each_architecture_its_own_image_under_one_name(podman, registry, program):
    image, archive, _ = IMAGES[program]
    remote = f"{registry}/{image}"
    subprocess.run(["skopeo", "copy", "--quiet", "--all", "--dest-tls-verify=false", f"oci-archive:{archive}",
                    f"docker://{remote}"], check=True, capture_output=True, timeout=120)
    raw = json.loads(subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false", f"docker://{remote}"],
                                    check=True, capture_output=True, text=True, timeout=60).stdout)
    assert raw["mediaType"] == INDEX_MEDIA_TYPE
    assert {m["platform"]["architecture"] for m in raw["manifests"]} == set(ARCHES)
    for arch in ARCHES:  # as a node of each architecture pulls the one name
        podman.run("pull", "--quiet", "--tls-verify=false", "--arch", arch, remote, timeout_s=120)
        assert_runs_as(podman, program, remote, arch)
