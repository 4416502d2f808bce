"""A Deployment made to drain by deploy/kustomize/ starts in a real container runtime and drains
when deleted, as deploy/'s own Pods do (test_manifests_run.py's checks): the trimmed vLLM
example (tests/deploy/kustomize/vllm-trimmed/deployment.yaml says what was trimmed, and why)
rendered by `kubectl kustomize` with the hook and drain-sidecar, its token 0444 with no fsGroup.
"""

from __future__ import annotations

import pytest

from tests.deploy.manifests import is_sidecar_image
from tests.deploy.test_kustomize import templates

from .conftest import engine_stand_ins
from .test_manifests_run import start_delete_and_check

pytestmark = [pytest.mark.containers, pytest.mark.timeout(600)]

CASE = "vllm-trimmed"


def test_a_rendered_deployment_starts_and_drains_when_deleted(podman, tokens, tmp_path):
    (template,) = templates(CASE)
    engine = template.spec["containers"][0]
    assert engine["image"] in engine_stand_ins(), "the case's engine image must be one the stand-in answers to"
    assert template.spec.get("securityContext") is None  # the token is read without an fsGroup
    assert any(is_sidecar_image(c["image"]) for c in template.containers())
    start_delete_and_check(podman, tokens, tmp_path / template.pod_name, template)
