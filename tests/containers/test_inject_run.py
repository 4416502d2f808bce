"""A Deployment made to drain by `modeldrain inject` starts in a real container runtime and drains
when deleted, as deploy/'s own Pods and the kustomize-rendered one do (test_manifests_run.py's
checks): the trimmed vLLM example, injected with the hook and drain-sidecar, under the image
names this store holds (`--image`, `--sidecar-image`: in a cluster, yours, by digest).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from modeldrain.hook import __version__
from tests.conftest import REPO
from tests.deploy.manifests import PRESTOP_IMAGE_REPO, SIDECAR_IMAGE_REPO, Document, is_sidecar_image, pod_templates

from .conftest import engine_stand_ins
from .test_manifests_run import start_delete_and_check

pytestmark = [pytest.mark.containers, pytest.mark.timeout(600)]

SOURCE = REPO / "tests" / "deploy" / "kustomize" / "vllm-trimmed" / "deployment.yaml"
MODELDRAIN = Path(sys.executable).with_name("modeldrain")


def test_an_injected_deployment_starts_and_drains_when_deleted(podman, tokens, tmp_path):
    done = subprocess.run([str(MODELDRAIN), "inject", "--grace", "30", "--image", f"{PRESTOP_IMAGE_REPO}:{__version__}",
                           "--sidecar", "--sidecar-image", f"{SIDECAR_IMAGE_REPO}:{__version__}", str(SOURCE)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    documents = [Document(tmp_path / "injected.yaml", i, d) for i, d in enumerate(yaml.safe_load_all(done.stdout)) if d]
    (template,) = pod_templates(documents)
    engine = next(c for c in template.spec["containers"] if "lifecycle" in c)
    assert engine["image"] in engine_stand_ins(), "the case's engine image must be one the stand-in answers to"
    assert any(is_sidecar_image(c["image"]) for c in template.containers())
    start_delete_and_check(podman, tokens, tmp_path / template.pod_name, template)
