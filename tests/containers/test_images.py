"""The images `make images` writes: OCI archives podman loads, each a FROM-scratch root with the
static executable, an empty /tmp (1777) and nothing else; no shell; a non-root user; and their
own default command works (`docker run localhost/modeldrain/prestop:0.1.0` prints the version)."""

from __future__ import annotations

import json
import tarfile

import pytest

from modeldrain.hook import __version__
from tests.conftest import REPO

pytestmark = [pytest.mark.containers, pytest.mark.timeout(900)]

PRESTOP = f"localhost/modeldrain/prestop:{__version__}"
SIDECAR = f"localhost/modeldrain/drain-sidecar:{__version__}"
ENGINE = "vllm/vllm-openai:v0.32.0"  # the engine emulator's image, under the name deploy/ uses

# image -> its whole root: path -> (type, mode)
ROOTS = {
    PRESTOP: {"prestop": ("file", 0o755), "tmp": ("dir", 0o1777)},
    SIDECAR: {"drain-sidecar": ("file", 0o755), "tmp": ("dir", 0o1777)},
    # One file hard-linked under each name (the export's first name holds the file, the rest link to it).
    ENGINE: {"tmp": ("dir", 0o1777), "usr": ("dir", 0o755), "usr/bin": ("dir", 0o755),
             "usr/bin/python3": ("link", 0o755), "usr/local": ("dir", 0o755), "usr/local/bin": ("dir", 0o755),
             "usr/local/bin/vllm": ("link", 0o755), "usr/local/bin/sglang": ("link", 0o755),
             "app": ("dir", 0o755), "app/llm-d-routing-sidecar": ("file", 0o755)},
}


@pytest.mark.parametrize("archive", ["prestop.tar", "drain-sidecar.tar"])
def test_the_archives_are_oci_image_layouts(podman, archive):
    with tarfile.open(REPO / "dist" / "images" / archive) as tar:
        names = set(tar.getnames())
        layout = json.load(tar.extractfile("oci-layout"))
        index = json.load(tar.extractfile("index.json"))
    assert {"oci-layout", "index.json"} <= names
    assert layout == {"imageLayoutVersion": "1.0.0"}
    (manifest,) = index["manifests"]
    assert manifest["annotations"]["org.opencontainers.image.ref.name"] == \
        {"prestop.tar": PRESTOP, "drain-sidecar.tar": SIDECAR}[archive]


@pytest.mark.parametrize("image", list(ROOTS))
def test_the_image_holds_its_executable_and_an_empty_tmp_and_nothing_else(podman, tmp_path, image):
    container = podman.output("create", "--pull", "never", image)
    try:
        exported = tmp_path / "root.tar"
        podman.run("export", "--output", str(exported), container)
    finally:
        podman.run("rm", container)
    with tarfile.open(exported) as tar:
        members = {m.name.rstrip("/"): m for m in tar.getmembers()}
    kinds = {name: ("dir" if m.isdir() else "link" if m.islnk() else "file" if m.isfile() else "other",
                    m.mode & 0o7777) for name, m in members.items()}
    assert kinds == ROOTS[image]
    assert all(m.uid == 0 and m.gid == 0 for m in members.values())


@pytest.mark.parametrize("image", list(ROOTS))
def test_no_shell_and_a_non_root_user(podman, image):
    config = json.loads(podman.output("image", "inspect", image))[0]["Config"]
    assert config["User"] == "65534:65534"
    done = podman.run("run", "--rm", "--pull", "never", "--entrypoint", "/bin/sh", image, "-c", "true", check=False)
    assert done.returncode == 127 and "/bin/sh" in done.stderr, done.stderr


def test_the_hook_images_default_command_prints_its_version(podman):
    done = podman.run("run", "--rm", "--pull", "never", PRESTOP)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"prestop {__version__} (static bundled executable")


def test_the_sidecar_image_runs_its_executable(podman):
    config = json.loads(podman.output("image", "inspect", SIDECAR))[0]["Config"]
    assert config["Entrypoint"] == ["/drain-sidecar"] and "8490/tcp" in config["ExposedPorts"]
    done = podman.run("run", "--rm", "--pull", "never", SIDECAR, "--version")
    assert done.stdout.strip() == f"drain-sidecar {__version__}"


def test_podman_load_stores_each_image_under_the_name_the_manifests_use(podman):
    """The archives' names are the ones deploy/ names, with their registry host: `localhost/`, never
    a Docker Hub namespace (tests/deploy/test_image_names.py)."""
    held = podman.output("images", "--format", "{{.Repository}}:{{.Tag}}").split()
    assert {PRESTOP, SIDECAR} <= set(held)


def test_an_archive_podman_load_rejects_is_an_error(podman, tmp_path):
    """The loads in the set-up mean something: a truncated archive is refused."""
    broken = tmp_path / "broken.tar"
    broken.write_bytes((REPO / "dist" / "images" / "prestop.tar").read_bytes()[:4096])
    done = podman.run("load", "--input", str(broken), check=False)
    assert done.returncode != 0
