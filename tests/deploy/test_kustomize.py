"""deploy/kustomize/'s components over vLLM's and SGLang's own Kubernetes examples and vLLM's
LeaderWorkerSet (tests/deploy/kustomize/*/): rendered by `kubectl kustomize`, valid for the
API's schema, passing the checks deploy/'s own Pods pass (test_manifests.py) and its policies'
flows (test_network_flows.py), the input's own fields kept; and the builds that must fail."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_validate import utils as k8s_schema

from modeldrain.lint.manifest_rules import Finding, chained_start_guard, lint
from modeldrain.lint.pod_templates import templates_of
from tests import environment
from tests.conftest import REPO
from tests.deploy import test_manifests as checks
from tests.deploy.flows import CONTROLLER_NAMESPACE, World
from tests.deploy.manifests import (
    PRESTOP_IMAGE_REPO,
    SIDECAR_IMAGE_REPO,
    Document,
    PodTemplate,
    is_sidecar_image,
    pod_templates,
    poststart_command,
    prestop_command,
)

FIXTURES = Path(__file__).parent / "kustomize"
COMPONENTS = REPO / "deploy" / "kustomize"
CASES = sorted(p.name for p in FIXTURES.iterdir() if (p / "kustomization.yaml").exists())
RENDER_TIMEOUT_S = 60  # kustomize renders these in well under a second
DEFAULT_GRACE_S = 30  # deploy/kustomize/grace-30's, the operator's default
WORKLOADS = ("Deployment", "LeaderWorkerSet")
LEADER_TOKEN_FLAG = "--leader-token-file"
HOOK = "/drain/prestop"  # where deploy/kustomize/hook's init container installs it


def kubectl() -> str:
    return environment.require_executable("kubectl", "`kubectl kustomize` renders deploy/kustomize/")


def build(directory: Path) -> subprocess.CompletedProcess:
    return subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True, text=True,
                          timeout=RENDER_TIMEOUT_S)


def render(case: str) -> list[dict[str, Any]]:
    done = build(FIXTURES / case)
    assert done.returncode == 0, f"kubectl kustomize {case}: {done.stderr.strip()}"
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def inputs(case: str) -> list[dict[str, Any]]:
    docs = []
    for path in sorted((FIXTURES / case).glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def as_documents(case: str, docs: list[dict[str, Any]]) -> list[Document]:
    return [Document(FIXTURES / case / "rendered.yaml", i, d) for i, d in enumerate(docs)]


def templates(case: str) -> list[PodTemplate]:
    return pod_templates(as_documents(case, render(case)))


def pairs(case: str) -> list[tuple[PodTemplate, PodTemplate]]:
    """(the input's Pod, the rendered one), by the Pod's name: a Deployment's, an LWS's leader
    and worker."""
    sources = {t.pod_name: t for t in pod_templates(as_documents(case, inputs(case)))}
    rendered = templates(case)
    assert sorted(sources) == sorted(t.pod_name for t in rendered)
    return [(sources[t.pod_name], t) for t in rendered]


def has_sidecar(template: PodTemplate) -> bool:
    return any(is_sidecar_image(c["image"]) for c in template.containers())


def sidecar_args(template: PodTemplate) -> dict[str, str]:
    (sidecar,) = [c for c in template.containers() if is_sidecar_image(c["image"])]
    return dict(arg.removeprefix("--").split("=", 1) for arg in sidecar["args"])


def workload(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (body,) = [d for d in docs if d["kind"] in WORKLOADS]
    return body


def components(case: str) -> list[str]:
    """The names of the deploy/kustomize/ components a case lists."""
    return [Path(c).name for c in yaml.safe_load((FIXTURES / case / "kustomization.yaml").read_text())["components"]]


def engine_kind(case: str) -> str:
    (kind,) = [c for c in components(case) if c in ("vllm", "sglang")]
    return kind


SIDECAR_CASES = [c for c in CASES if {"sidecar", "leaderworkerset"} & set(components(c))]


def test_there_are_cases_for_both_engines_a_leaderworkerset_and_the_sidecar():
    assert {"vllm", "sglang", "vllm-lws", "vllm-sidecar", "vllm-poststart"} <= set(CASES)
    assert {"vllm-lws", "vllm-sidecar", "vllm-trimmed"} <= set(SIDECAR_CASES)


@pytest.mark.parametrize("case", CASES)
def test_the_rendered_objects_match_the_kubernetes_schema(case):
    """A LeaderWorkerSet (a custom resource) by its Pod templates, as test_manifests.py does; a
    template with a native sidecar against 1.29, the first version that has them."""
    for document in as_documents(case, render(case)):
        for body, oldest in checks._schema_checks(document):
            for version in (oldest, checks.NEWEST):
                try:
                    k8s_schema.validate(body, version, strict=True)
                except k8s_schema.ValidationError as exc:
                    pytest.fail(f"{case}: not a valid {body['kind']} for Kubernetes {version}: {exc.message} "
                                f"at {'/'.join(map(str, exc.path))}")


@pytest.mark.parametrize("case", CASES)
def test_the_rendered_pods_pass_deploys_own_checks(case):
    """The product's rules (`prestop lint`: hook, grace, annotations, TMPDIR, token; a worker's hook
    with the leader's token), installed where it is exec'd, ports, Secrets. Not
    automountServiceAccountToken: the components leave the user's choice alone."""
    rendered = templates(case)
    assert rendered
    for template in rendered:
        assert [str(f) for f in lint(template) if not users_own(f)] == []
        checks.test_the_drain_hooks_have_exactly_deploys_shape(template)
        checks.test_the_hook_exists_in_the_image_it_runs_in(template)
        checks.test_a_secret_is_readable_by_the_user_that_mounts_it(template)
        checks.test_ports_are_named_uniquely_and_the_sidecars_for_its_protocol(template)


# The user's engine command is theirs: vLLM's documented examples start it without
# --enable-server-load-tracking, the components leave the command alone, and `prestop lint` names it.
USERS_OWN_FINDING = "vLLM runs without --enable-server-load-tracking"


def users_own(finding: Finding) -> bool:
    return USERS_OWN_FINDING in finding.message


@pytest.mark.parametrize("case", CASES)
def test_a_users_vllm_command_without_server_load_tracking_is_found_through_the_components(case):
    found = {f.container for t in templates(case) for f in lint(t) if users_own(f)}
    engines = {t.spec["containers"][0]["name"] for t in templates(case)}
    # Every vLLM case's engine (an LWS's leader: its workers run no API server); SGLang's none.
    assert found == (set() if case == "sglang" else found & engines) and (found or case == "sglang")


@pytest.mark.parametrize("case", CASES)
def test_the_hook_is_on_the_engine_with_the_manifests_grace_and_its_port(case):
    for source, template in pairs(case):
        engine, source_engine = template.spec["containers"][0], source.spec["containers"][0]
        assert engine["name"] == source_engine["name"]
        grace = source.spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_S)
        assert template.grace_s == grace
        follow = [LEADER_TOKEN_FLAG, "/var/run/secrets/drain-sidecar/token"] if template.follows_a_leader else []
        assert prestop_command(engine) == ["/drain/prestop", "--grace", str(grace), *follow]
        # The start guard; before a postStart of the user's own, which then runs word for word.
        theirs = poststart_command(source_engine)
        assert poststart_command(engine) == (chained_start_guard(HOOK, theirs) if theirs else [HOOK, "version"])
        if "ports" in source_engine:  # a Deployment's engine, an LWS leader (its workers serve none)
            declared = [p["containerPort"] for p in source_engine["ports"]]
            assert int(template.annotations["prometheus.io/port"]) == declared[0]  # where the hook reads


@pytest.mark.parametrize("case", CASES)
def test_the_users_own_fields_are_kept(case):
    """Nothing of the input is lost: its env, mounts, volumes, init containers and labels are all
    still there, with modeldrain's added beside them."""
    for source, template in pairs(case):
        engine, source_engine = template.spec["containers"][0], source.spec["containers"][0]
        for key in ("env", "volumeMounts"):
            assert all(item in engine[key] for item in source_engine.get(key, [])), key
        for key in ("command", "args", "image", "ports", "resources", "livenessProbe", "readinessProbe"):
            assert engine.get(key) == source_engine.get(key), key
        assert template.spec["containers"][1:] == source.spec["containers"][1:]
        assert all(v in template.spec["volumes"] for v in source.spec.get("volumes", []))
        assert source.labels.items() <= template.labels.items()
        assert source.annotations.items() - {"prometheus.io/port"} <= template.annotations.items()
        for key, value in source.spec.items():
            if key not in ("containers", "volumes", "initContainers", "terminationGracePeriodSeconds"):
                assert template.spec[key] == value, key
    source_body, body = workload(inputs(case)), workload(render(case))
    for key in ("metadata",):
        assert body[key] == source_body[key]


@pytest.mark.parametrize("case", SIDECAR_CASES)
def test_the_sidecar_says_the_engine_and_lingers_at_most_the_grace(case):
    for source, template in pairs(case):
        assert has_sidecar(template), template.source
        args = sidecar_args(template)
        assert args["engine"] == engine_kind(case)
        assert int(args["linger-max"]) == source.spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_S)
        assert args["token-file"] == "/var/run/secrets/drain-sidecar/token"
        assert template.labels["modeldrain.io/drain-sidecar"] == "true"  # deploy/networkpolicy.yaml's
        # No fsGroup is set on the user's Pod (kubelet would re-own every volume it mounts): the
        # token is world-readable inside the containers that mount it.
        assert template.spec.get("securityContext") == source.spec.get("securityContext")
        (token,) = [v["secret"] for v in template.spec["volumes"] if v["name"] == "token"]
        assert token == {"secretName": "drain-sidecar-token", "defaultMode": 0o444}
        (sidecar,) = [c for c in template.containers() if is_sidecar_image(c["image"])]
        env = {e["name"] for e in sidecar["env"]}
        assert {"POD_NAMESPACE", "POD_NAME", "POD_UID"} <= env
        if "leaderworkerset.sigs.k8s.io/name" in template.labels:
            assert "MEMBER_CONFIGURATION" in env


def policies(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == "NetworkPolicy"]


@pytest.mark.parametrize("sidecar_named_ports", [True, False],
                         ids=["named-ports-in-sidecars", "named-ports-in-containers-only"])
@pytest.mark.parametrize("case", SIDECAR_CASES)
def test_the_rendered_policy_admits_exactly_the_flows_the_pods_rely_on(case, sidecar_named_ports):
    """tests/deploy/flows.py's world around the rendered Pods: the controller to each sidecar,
    routers and Prometheus to the engine's port, an LWS's members to each other (a worker to its
    leader's 8490 among them); nobody else to 8490, an unrelated LWS's Pods included."""
    docs = render(case)
    world = World.of(pod_templates(as_documents(case, docs)), policies(docs), sidecar_named_ports)
    assert world.must_pass() and world.must_not_pass()
    failures = world.failures()
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("case", SIDECAR_CASES)
def test_the_policy_is_the_workloads_own(case):
    """Named after the workload, in its namespace, selecting its Pods only, the controller's
    namespace the one to replace (the same placeholder as deploy/networkpolicy.yaml's)."""
    docs = render(case)
    body = workload(docs)
    (policy,) = policies(docs)
    assert policy["metadata"]["name"] == body["metadata"]["name"]
    assert policy["metadata"].get("namespace") == body["metadata"].get("namespace")
    peers = policy["spec"]["ingress"][0]["from"]
    assert peers == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": CONTROLLER_NAMESPACE}}}]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    if body["kind"] == "Deployment":
        assert selector == body["spec"]["selector"]["matchLabels"]
    else:
        assert selector == {"leaderworkerset.sigs.k8s.io/name": body["metadata"]["name"]}


def test_the_flows_check_catches_a_policy_left_unfilled():
    """The placeholder selector (what a replacement that missed its target leaves) selects no
    Pod: every sidecar is open to all, and the flows say so."""
    docs = render("vllm-sidecar")
    (policy,) = policies(docs)
    policy["spec"]["podSelector"] = yaml.safe_load(
        (COMPONENTS / "sidecar" / "networkpolicy.yaml").read_text())["spec"]["podSelector"]
    failures = World.of(pod_templates(as_documents("vllm-sidecar", docs)), [policy]).failures()
    assert any(f.startswith("admitted, but must not pass: web-0 -> mistral-7b-0:8490") for f in failures), failures


# --- builds that must fail, loudly, naming what is missing ---------------------------------------


def case_dir(tmp_path: Path, manifest: dict[str, Any] | list[dict[str, Any]], components: list[str],
             extra: dict[str, Any] | None = None) -> Path:
    case = tmp_path / "case"
    case.mkdir(parents=True)
    (case / "manifest.yaml").write_text(yaml.safe_dump_all(manifest if isinstance(manifest, list) else [manifest]))
    # kustomize takes components by relative path only.
    up = Path("../" * len(case.parts[1:])) / COMPONENTS.relative_to("/")
    (case / "kustomization.yaml").write_text(yaml.safe_dump(
        {"resources": ["manifest.yaml"], "components": [str(up / c) for c in components], **(extra or {})}))
    return case


def vllm_deployment() -> dict[str, Any]:
    return workload(inputs("vllm"))


def refused(case: Path) -> str:
    done = build(case)
    assert done.returncode != 0, f"built, but must not:\n{done.stdout}"
    return done.stderr


def test_a_manifest_without_a_grace_and_without_grace_30_is_refused(tmp_path):
    """kustomize cannot default a missing field: the build fails naming it, never a hook with a
    --grace that disagrees with the Pod's."""
    case = case_dir(tmp_path, vllm_deployment(), ["vllm", "deployment"])
    assert "spec.template.spec.terminationGracePeriodSeconds" in refused(case)


@pytest.mark.parametrize("template", ["template", "leaderTemplate", "workerTemplate"])
def test_grace_30_over_a_manifest_with_a_grace_of_its_own_is_refused(tmp_path, template):
    """grace-30 is for a manifest that sets none: over one that sets its own (any template of a
    LeaderWorkerSet) the build fails naming the field, never a grace overwritten with 30."""
    if template == "template":
        manifest, components = vllm_deployment(), ["grace-30", "vllm", "deployment"]
        manifest["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 120
        path = "/spec/template/spec"
    else:
        manifest, components = workload(inputs("vllm-lws")), ["grace-30", "vllm", "leaderworkerset"]
        manifest["spec"]["leaderWorkerTemplate"][template]["spec"]["terminationGracePeriodSeconds"] = 120
        path = f"/spec/leaderWorkerTemplate/{template}/spec"
    stderr = refused(case_dir(tmp_path, manifest, components))
    assert f"testing value {path}/terminationGracePeriodSeconds failed: test failed" in stderr


def test_a_first_container_that_declares_no_port_is_refused(tmp_path):
    """The engine must be the first container (kustomize cannot be told another). A first
    container that serves nothing (a log shipper put first) is not taken for it: the build fails
    naming the port it copies into the hook's annotations."""
    manifest = vllm_deployment()
    containers = manifest["spec"]["template"]["spec"]["containers"]
    containers.insert(0, {"name": "log-shipper", "image": "fluent/fluent-bit:3.1"})
    case = case_dir(tmp_path, manifest, ["grace-30", "vllm", "deployment"])
    assert "spec.template.spec.containers.0.ports.0.containerPort" in refused(case)


def test_the_engines_name_can_be_made_a_condition_of_the_build(tmp_path):
    """deploy/kustomize/deployment's documented guard: a JSON6902 test of the first container's
    name in the user's kustomization fails the build when the first container is another."""
    guard = {"patches": [{"target": {"kind": "Deployment"},
                          "patch": '[{"op": "test", "path": "/spec/template/spec/containers/0/name", '
                                   '"value": "mistral-7b"}]'}]}
    manifest = vllm_deployment()
    assert build(case_dir(tmp_path / "engine-first", manifest, ["grace-30", "vllm", "deployment"], guard)).returncode == 0
    manifest["spec"]["template"]["spec"]["containers"].insert(
        0, {"name": "proxy", "image": "envoyproxy/envoy:v1.31", "ports": [{"containerPort": 9000}]})
    stderr = refused(case_dir(tmp_path / "proxy-first", manifest, ["grace-30", "vllm", "deployment"], guard))
    assert "/spec/template/spec/containers/0/name" in stderr


def test_a_build_without_an_engine_component_is_refused(tmp_path):
    """The scrape annotations come from ../vllm or ../sglang, and drain-sidecar's --engine: without
    either the build fails, never a hook without its port nor a sidecar that says no engine."""
    manifest = vllm_deployment()
    assert "prometheus.io/port" in refused(case_dir(tmp_path / "hook", manifest, ["grace-30", "deployment"]))
    # A manifest of its own with the annotations: the sidecar still wants to know the engine.
    manifest["spec"]["template"]["metadata"]["annotations"] = {"prometheus.io/port": "8000"}
    stderr = refused(case_dir(tmp_path / "sidecar", manifest, ["grace-30", "deployment", "sidecar"]))
    assert "nothing selected by Engine" in stderr


def test_a_leaderworkerset_without_a_leader_template_is_refused(tmp_path):
    """LeaderWorkerSet makes the leader from the worker's template when it has none; the
    components write into both, so they must both be there: the build fails naming it."""
    lws = workload(inputs("vllm-lws"))
    group = lws["spec"]["leaderWorkerTemplate"]
    group["workerTemplate"]["spec"]["terminationGracePeriodSeconds"] = 30
    del group["leaderTemplate"]
    case = case_dir(tmp_path, lws, ["vllm", "leaderworkerset"])
    assert "leaderTemplate" in refused(case)


def test_the_engines_own_lifecycle_fields_stay(tmp_path):
    """The hooks are set one by one: a lifecycle field of the engine's own (stopSignal) is kept."""
    manifest = vllm_deployment()
    manifest["spec"]["template"]["spec"]["containers"][0]["lifecycle"] = {"stopSignal": "SIGINT"}
    done = build(case_dir(tmp_path, manifest, ["grace-30", "vllm", "deployment"]))
    assert done.returncode == 0, done.stderr
    engine = workload([d for d in yaml.safe_load_all(done.stdout) if d])["spec"]["template"]["spec"]["containers"][0]
    assert engine["lifecycle"]["stopSignal"] == "SIGINT"
    assert engine["lifecycle"]["preStop"]["exec"]["command"][0] == "/drain/prestop"


def rendered_workload(done: subprocess.CompletedProcess) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    return workload([d for d in yaml.safe_load_all(done.stdout) if d])


def with_lifecycle(manifest: dict[str, Any], lifecycle: dict[str, Any], template: str = "template") -> dict[str, Any]:
    """`manifest` with `lifecycle` on the engine (the first container) of one of its templates."""
    spec = manifest["spec"] if template == "template" else manifest["spec"]["leaderWorkerTemplate"]
    spec[template]["spec"]["containers"][0]["lifecycle"] = lifecycle
    return manifest


# A postStart of the user's own whose words a shell would split, expand or redirect if they were
# ever joined: each must reach the command as written.
THEIR_WORDS = ["/bin/sh", "-c", 'printf "%s|" "$@" > "$0"', "OUT", "a b", "$HOME", "'q'", "x;y"]


def run_poststart(command: list[str], tmp_path: Path, guard_exit: int) -> tuple[subprocess.CompletedProcess, str]:
    """The rendered postStart run by /bin/sh as kubelet would, the hook a stub at its own path (it
    logs its words, exits `guard_exit`) and the user's output file in tmp_path."""
    stub = tmp_path / "prestop"
    stub.write_text(f'#!/bin/sh\necho "$@" >> "{tmp_path}/guard"\nexit {guard_exit}\n')
    stub.chmod(0o755)
    out = tmp_path / "out"
    argv = [word.replace(HOOK, str(stub)) if i == 2 else str(out) if word == "OUT" else word
            for i, word in enumerate(command)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=RENDER_TIMEOUT_S)
    return done, (tmp_path / "guard").read_text() if (tmp_path / "guard").exists() else ""


def test_a_users_own_poststart_is_kept_and_runs_after_the_start_guard(tmp_path):
    """kustomize cannot merge two commands, nor set a field only where it is missing: the
    components read the engine's own postStart (deploy/kustomize/engine-hooks-deployment) and put
    the start guard in front of it, as `modeldrain inject` does. Run as kubelet would: the guard
    first, then the user's words, each as written; a guard that fails stops there (kubelet then
    kills the container, FailedPostStartHook), the user's command not run."""
    manifest = with_lifecycle(vllm_deployment(), {"postStart": {"exec": {"command": THEIR_WORDS}}})
    engine = rendered_workload(build(case_dir(tmp_path / "case", manifest, ["grace-30", "vllm", "deployment"])))[
        "spec"]["template"]["spec"]["containers"][0]
    command = poststart_command(engine)
    assert command == chained_start_guard(HOOK, THEIR_WORDS)
    assert prestop_command(engine) == [HOOK, "--grace", str(DEFAULT_GRACE_S)]
    (tmp_path / "ok").mkdir()
    ran, guard = run_poststart(command, tmp_path / "ok", 0)
    assert ran.returncode == 0 and guard == "version\n", ran.stderr
    assert (tmp_path / "ok" / "out").read_text() == "a b|$HOME|'q'|x;y|"
    (tmp_path / "failing").mkdir()
    ran, guard = run_poststart(command, tmp_path / "failing", 2)
    assert ran.returncode == 2 and guard == "version\n" and not (tmp_path / "failing" / "out").exists()


def test_a_leaderworkerset_keeps_each_templates_own_poststart(tmp_path):
    """The leader's and the workers' engines are read one by one: a postStart on the leader only
    is kept there, and the workers get the guard alone."""
    lws = with_lifecycle(workload(inputs("vllm-lws")), {"postStart": {"exec": {"command": THEIR_WORDS}}},
                         "leaderTemplate")
    group = rendered_workload(build(case_dir(tmp_path, lws, ["grace-30", "vllm", "leaderworkerset"])))[
        "spec"]["leaderWorkerTemplate"]
    leader = group["leaderTemplate"]["spec"]["containers"][0]
    worker = group["workerTemplate"]["spec"]["containers"][0]
    assert poststart_command(leader) == chained_start_guard(HOOK, THEIR_WORDS)
    assert poststart_command(worker) == [HOOK, "version"]
    assert prestop_command(worker)[:3] == [HOOK, "--grace", str(DEFAULT_GRACE_S)]


@pytest.mark.parametrize("workload_kind", ["Deployment", "LeaderWorkerSet"])
@pytest.mark.parametrize("lifecycle, field", [
    ({"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 30"]}}}, "lifecycle/preStop"),
    ({"preStop": {"httpGet": {"path": "/drain", "port": 8000}}}, "lifecycle/preStop"),
    ({"postStart": {"httpGet": {"path": "/warm", "port": 8000}}}, "lifecycle/postStart/httpGet"),
    ({"postStart": {"sleep": {"seconds": 5}}}, "lifecycle/postStart/sleep"),
], ids=["prestop-exec", "prestop-httpget", "poststart-httpget", "poststart-sleep"])
def test_a_hook_of_the_users_own_that_cannot_be_kept_fails_the_build(tmp_path, workload_kind, lifecycle, field):
    """A container has one preStop, and an httpGet or sleep postStart cannot run after a command:
    the build fails at the component's JSON patch `test` naming the field, never a hook of the
    user's replaced. A LeaderWorkerSet's worker is tested as its leader is."""
    if workload_kind == "Deployment":
        manifest, components, path = with_lifecycle(vllm_deployment(), lifecycle), ["deployment"], "/spec/template"
    else:
        manifest = with_lifecycle(workload(inputs("vllm-lws")), lifecycle, "workerTemplate")
        components, path = ["leaderworkerset"], "/spec/leaderWorkerTemplate/workerTemplate"
    stderr = refused(case_dir(tmp_path, manifest, ["grace-30", "vllm", *components]))
    assert f"testing value {path}/spec/containers/0/{field} failed: test failed" in stderr


def test_a_shipper_put_first_that_builds_is_found_by_lint(tmp_path):
    """A first container that declares a port (fluent-bit's metrics) builds, with the hook on it;
    `modeldrain lint` of the rendered output names the engine that has none."""
    manifest = vllm_deployment()
    manifest["spec"]["template"]["spec"]["containers"].insert(
        0, {"name": "fluent-bit", "image": "fluent/fluent-bit:3.1", "ports": [{"containerPort": 2020}]})
    done = build(case_dir(tmp_path, manifest, ["grace-30", "vllm", "deployment"]))
    assert done.returncode == 0, done.stderr
    templates = [t for d in yaml.safe_load_all(done.stdout) if d for t in templates_of(d, "rendered.yaml")]
    findings = [f for t in templates for f in lint(t)]
    assert [(f.container, f.field) for f in findings if "no drain hook" in f.message] == [
        (manifest["spec"]["template"]["spec"]["containers"][1]["name"], "lifecycle.preStop")]


DIGEST = "sha256:" + "a" * 64  # stands for README's "sha256:…", the digest you pushed


def readme_images_entries() -> list[dict[str, str]]:
    """README.md's kustomize `images:` entries, as a user copies them (their digest filled in)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = [yaml.safe_load(block.split("```", 1)[0].replace("sha256:…", DIGEST)) for block in text.split("```yaml\n")[1:]]
    (entries,) = [block["images"] for block in blocks if isinstance(block, dict) and "images" in block]
    return entries


def test_the_readmes_images_entry_points_every_product_image_at_your_registry(tmp_path):
    """Nothing is published: README.md's `images:` entries put your registry and digest on the
    images the components copy in (kustomize transforms them after the components' replacements)."""
    images = {"images": readme_images_entries()}
    assert sorted(e["name"] for e in images["images"]) == sorted((PRESTOP_IMAGE_REPO, SIDECAR_IMAGE_REPO))
    done = build(case_dir(tmp_path, vllm_deployment(), ["grace-30", "vllm", "deployment", "sidecar"], images))
    assert done.returncode == 0, done.stderr
    spec = workload([d for d in yaml.safe_load_all(done.stdout) if d])["spec"]["template"]["spec"]
    assert sorted(c["image"] for c in spec["initContainers"]) == [
        f"registry.example.com/modeldrain/drain-sidecar@{DIGEST}", f"registry.example.com/modeldrain/prestop@{DIGEST}"]


@pytest.mark.parametrize("manifest", [p.name for p in sorted((REPO / "deploy").glob("*.yaml"))])
def test_the_readmes_images_entries_point_each_deploy_manifest_at_your_registry(tmp_path, manifest):
    """deploy/'s manifests used as they are: the same entries, in a kustomization beside a copy,
    leave no product image on its local name."""
    case = tmp_path / "case"
    case.mkdir()
    (case / manifest).write_text((REPO / "deploy" / manifest).read_text())
    (case / "kustomization.yaml").write_text(yaml.safe_dump(
        {"resources": [manifest], "images": readme_images_entries()}))
    done = build(case)
    assert done.returncode == 0, done.stderr
    images = [c["image"] for d in yaml.safe_load_all(done.stdout) if d
              for t in templates_of(d, manifest) for c in t.containers()]
    product = [i for i in images if i.split("@")[0].rsplit("/", 1)[-1] in ("prestop", "drain-sidecar")]
    assert product or manifest == "networkpolicy.yaml" or manifest == "pod-prestop-baked.yaml"
    assert all(i.startswith("registry.example.com/modeldrain/") and i.endswith(f"@{DIGEST}") for i in product)
    assert not [i for i in images if i.startswith("localhost/")]
