"""deploy/: valid Kubernetes objects (the API's own schema), and hooks wired consistently."""

from __future__ import annotations

import pytest
import yaml
from kubernetes_validate import utils as k8s_schema

from tests.conftest import REPO

MANIFESTS = sorted((REPO / "deploy").glob("*.yaml"))
# The oldest schema kubernetes-validate ships, and the newest.
OLDEST, NEWEST = "1.25.0", k8s_schema.latest_version()
# Native sidecars (an init container with restartPolicy: Always) exist from Kubernetes 1.29.
NATIVE_SIDECAR_SINCE = "1.29.0"


def _documents():
    for path in MANIFESTS:
        with open(path, encoding="utf-8") as f:
            for index, document in enumerate(yaml.safe_load_all(f)):
                if document is not None:
                    yield pytest.param(document, id=f"{path.name}[{index}]")


DOCUMENTS = list(_documents())
PODS = [d for d in DOCUMENTS if d.values[0].get("kind") == "Pod"]


def _installs_the_hook(pod: dict) -> bool:
    return any(init.get("args", [])[:1] == ["install"] for init in pod["spec"].get("initContainers", []))


INSTALLING_PODS = [d for d in PODS if _installs_the_hook(d.values[0])]


def containers(pod: dict):
    spec = pod["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def test_there_are_manifests():
    assert MANIFESTS


def oldest_version(document: dict) -> str:
    """The oldest Kubernetes the document is meant for."""
    spec = document.get("spec", {}) if document.get("kind") == "Pod" else {}
    if any("restartPolicy" in c for c in spec.get("initContainers", [])):
        return NATIVE_SIDECAR_SINCE
    return OLDEST


@pytest.mark.parametrize("which", ["oldest", "newest"])
@pytest.mark.parametrize("document", DOCUMENTS)
def test_manifest_matches_the_kubernetes_schema(document, which):
    version = oldest_version(document) if which == "oldest" else NEWEST
    try:
        k8s_schema.validate(document, version, strict=True)  # strict: no unknown fields
    except k8s_schema.ValidationError as exc:
        pytest.fail(f"not a valid {document.get('kind')} for Kubernetes {version}: {exc.message} "
                    f"at {'/'.join(map(str, exc.path))}")


@pytest.mark.parametrize("document", PODS)
def test_prestop_grace_repeats_the_pods_grace(document):
    """An exec hook cannot read terminationGracePeriodSeconds: --grace must say the same."""
    grace = document["spec"].get("terminationGracePeriodSeconds", 30)
    for container in containers(document):
        command = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
        if command and command[0].endswith("/prestop"):
            assert command[command.index("--grace") + 1] == str(grace), container["name"]


@pytest.mark.parametrize("document", INSTALLING_PODS)
def test_an_installed_hook_is_in_a_volume_the_init_container_fills(document):
    """The init-container layout: the hook the engine execs is where `prestop install` put it."""
    spec = document["spec"]
    installs = {}  # volume name -> the DIR an init container installs into
    for init in spec.get("initContainers", []):
        if init.get("args", [])[:1] == ["install"]:
            mounts = {m["mountPath"]: m["name"] for m in init.get("volumeMounts", [])}
            installs[mounts[init["args"][1]]] = init["args"][1]
    assert installs
    for container in spec["containers"]:
        command = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
        mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
        for volume in installs:
            assert command[0] == f"{mounts[volume]}/prestop"
            env = {e["name"]: e.get("value") for e in container.get("env", [])}
            assert env.get("TMPDIR") == f"{mounts[volume]}/tmp"  # made by `prestop install`
