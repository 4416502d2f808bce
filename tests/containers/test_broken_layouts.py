"""The runtime tests can fail: deploy/'s Pods with one thing taken away do not start, for the
reason kubelet would give. Each was a real mistake (the first two shipped once)."""

from __future__ import annotations

import copy
import re
from dataclasses import replace

import pytest

from tests.deploy.manifests import PodTemplate

from .conftest import template_named
from .kubelet import PodStartError

pytestmark = [pytest.mark.containers, pytest.mark.timeout(900)]


def changed(pod_name: str, change) -> PodTemplate:
    template = template_named(pod_name)
    spec = copy.deepcopy(template.spec)
    change(spec)
    return replace(template, spec=spec, pod_name=f"{pod_name}-broken")


def container(spec: dict, name: str) -> dict:
    return next(c for c in [*spec.get("initContainers", []), *spec["containers"]] if c["name"] == name)


def test_a_token_the_sidecars_user_cannot_read_stops_the_pod(make_pod):
    """Without fsGroup the Secret's files are root:root 0440: uid 65534 cannot read its token."""
    template = changed("llm-vllm-sidecar", lambda spec: spec.pop("securityContext"))
    with pytest.raises(PodStartError) as failed:
        make_pod(template).start()
    assert re.search(r"drain-sidecar is (exited|stopped) 2 ", str(failed.value)), failed.value
    assert "/var/run/secrets/drain-sidecar/token" in str(failed.value) and "Permission denied" in str(failed.value)


def test_a_hook_the_engine_image_does_not_carry_stops_the_pod(make_pod):
    """The stock engine image with preStop /usr/local/bin/prestop and no init container: the
    postStart guard fails at start, instead of every delete being a silently failed hook."""
    def stock_image(spec: dict) -> None:
        spec.pop("initContainers")
        engine = container(spec, "engine")
        engine.pop("env")  # TMPDIR pointed into the volume the init container filled
        engine.pop("securityContext")  # as that manifest had it: a writable root, /tmp in the image
        engine["volumeMounts"] = [m for m in engine["volumeMounts"] if m["name"] != "drain"]
        engine["lifecycle"]["postStart"]["exec"]["command"] = ["/usr/local/bin/prestop", "version"]
        engine["lifecycle"]["preStop"]["exec"]["command"] = ["/usr/local/bin/prestop", "--grace", "30"]
    with pytest.raises(PodStartError) as failed:
        make_pod(changed("llm-vllm-init", stock_image)).start()
    assert "engine: FailedPostStartHook" in str(failed.value)
    assert "/usr/local/bin/prestop" in str(failed.value) and "no such file or directory" in str(failed.value)


def test_a_static_executable_with_nowhere_to_unpack_stops_the_pod(make_pod):
    """A read-only root and no volume at /tmp: the sidecar's executable cannot unpack itself."""
    def no_tmp(spec: dict) -> None:
        sidecar = container(spec, "drain-sidecar")
        sidecar["volumeMounts"] = [m for m in sidecar["volumeMounts"] if m["mountPath"] != "/tmp"]
    with pytest.raises(PodStartError) as failed:
        make_pod(changed("llm-vllm-sidecar", no_tmp)).start()
    assert "Failed to create temporary directory in /tmp: Read-only file system" in str(failed.value)
