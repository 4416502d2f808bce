"""deploy/kustomize/'s components over vLLM's and SGLang's own Kubernetes examples
(tests/deploy/kustomize/*/): rendered by `kubectl kustomize`, valid for the API's schema, and
passing the checks deploy/'s own Pods pass (test_manifests.py), the input's own fields kept."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from kubernetes_validate import utils as k8s_schema

from tests import environment
from tests.conftest import REPO
from tests.deploy import test_manifests as checks
from tests.deploy.manifests import Document, PodTemplate, pod_templates, poststart_command, prestop_command

FIXTURES = Path(__file__).parent / "kustomize"
CASES = sorted(p.name for p in FIXTURES.iterdir() if (p / "kustomization.yaml").exists())
RENDER_TIMEOUT_S = 60  # kustomize renders these in well under a second
DEFAULT_GRACE_S = 30  # deploy/kustomize/grace-30's, the operator's default


def render(case: str) -> list[dict]:
    kubectl = environment.require_executable("kubectl", "`kubectl kustomize` renders deploy/kustomize/")
    done = subprocess.run([kubectl, "kustomize", str(FIXTURES / case)], capture_output=True, text=True,
                          timeout=RENDER_TIMEOUT_S)
    assert done.returncode == 0, f"kubectl kustomize {case}: {done.stderr.strip()}"
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def inputs(case: str) -> list[dict]:
    docs = []
    for path in sorted((FIXTURES / case).glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def templates(case: str) -> list[PodTemplate]:
    docs = render(case)
    return pod_templates([Document(FIXTURES / case / "rendered.yaml", i, d) for i, d in enumerate(docs)])


def test_there_are_cases_for_both_engines():
    assert {"vllm", "sglang"} <= set(CASES)


@pytest.mark.parametrize("case", CASES)
def test_the_rendered_objects_match_the_kubernetes_schema(case):
    for body in render(case):
        for version in (checks.OLDEST, checks.NEWEST):
            try:
                k8s_schema.validate(body, version, strict=True)
            except k8s_schema.ValidationError as exc:
                pytest.fail(f"{case}: not a valid {body['kind']} for Kubernetes {version}: {exc.message} "
                            f"at {'/'.join(map(str, exc.path))}")


@pytest.mark.parametrize("case", CASES)
def test_the_rendered_pods_pass_deploys_own_checks(case):
    """The product's rules (`prestop lint`: hook, grace, annotations, TMPDIR, token), installed
    where it is exec'd, ports, Secrets. Not automountServiceAccountToken: the components leave the user's choice alone."""
    rendered = templates(case)
    assert rendered
    for template in rendered:
        checks.test_hook_grace_annotations_tmpdir_and_token_agree(template)
        checks.test_the_drain_hooks_have_exactly_deploys_shape(template)
        checks.test_the_hook_exists_in_the_image_it_runs_in(template)
        checks.test_a_secret_is_readable_by_the_user_that_mounts_it(template)
        checks.test_ports_are_named_uniquely_and_the_sidecars_for_its_protocol(template)


@pytest.mark.parametrize("case", CASES)
def test_the_hook_is_on_the_engine_with_the_manifests_grace_and_its_port(case):
    (source,) = [d for d in inputs(case) if d["kind"] == "Deployment"]
    source_spec = source["spec"]["template"]["spec"]
    (template,) = templates(case)
    engine = template.spec["containers"][0]
    assert engine["name"] == source_spec["containers"][0]["name"]
    grace = source_spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_S)
    assert template.grace_s == grace
    assert prestop_command(engine) == ["/drain/prestop", "--grace", str(grace)]
    assert poststart_command(engine) == ["/drain/prestop", "version"]
    declared = [p["containerPort"] for p in engine["ports"]]
    assert int(template.annotations["prometheus.io/port"]) in declared  # where the hook reads


@pytest.mark.parametrize("case", CASES)
def test_the_users_own_fields_are_kept(case):
    """Nothing of the input is lost: its env, mounts, volumes, init containers and labels are all
    still there, with modeldrain's added beside them."""
    (source,) = [d for d in inputs(case) if d["kind"] == "Deployment"]
    source_template = source["spec"]["template"]
    (template,) = templates(case)
    engine, source_engine = template.spec["containers"][0], source_template["spec"]["containers"][0]
    for key in ("env", "volumeMounts"):
        assert all(item in engine[key] for item in source_engine.get(key, [])), key
    for key in ("command", "args", "image", "ports", "resources", "livenessProbe", "readinessProbe"):
        assert engine.get(key) == source_engine.get(key), key
    assert all(v in template.spec["volumes"] for v in source_template["spec"].get("volumes", []))
    assert source_template["metadata"]["labels"].items() <= template.labels.items()
    for key, value in source_template["spec"].items():
        if key not in ("containers", "volumes", "initContainers", "terminationGracePeriodSeconds"):
            assert template.spec[key] == value, key


def test_a_manifest_without_a_grace_and_without_grace_30_is_refused(tmp_path):
    """kustomize cannot default a missing field: the build fails naming it, never a hook with a
    --grace that disagrees with the Pod's."""
    kubectl = environment.require_executable("kubectl", "`kubectl kustomize` renders deploy/kustomize/")
    case = tmp_path / "case"
    case.mkdir()
    (case / "deployment.yaml").write_text((FIXTURES / "vllm" / "deployment.yaml").read_text())
    # kustomize takes components by relative path only.
    components = Path("../" * len(case.parts[1:])) / REPO.relative_to("/") / "deploy" / "kustomize"
    (case / "kustomization.yaml").write_text(yaml.safe_dump(
        {"resources": ["deployment.yaml"], "components": [str(components / "vllm"), str(components / "deployment")]}))
    done = subprocess.run([kubectl, "kustomize", str(case)], capture_output=True, text=True, timeout=RENDER_TIMEOUT_S)
    assert done.returncode != 0
    assert "spec.template.spec.terminationGracePeriodSeconds" in done.stderr
