"""deploy/: valid Kubernetes objects (the API's own schema), wired so that they start.

What a static reading can prove is here: the schema, the hook's path and grace, the start-up
guard, the token readable by the sidecar's user, names, ports; the NetworkPolicy's flows are
test_network_flows.py's. That every Pod really starts and drains is proven by running them
(tests/containers/).
"""

from __future__ import annotations

import pytest
from kubernetes_validate import utils as k8s_schema

from modeldrain.hook import __version__
from modeldrain.lint.manifest_rules import lint
from tests.deploy.manifests import (
    PRESTOP_IMAGE_REPO,
    SIDECAR_IMAGE_REPO,
    SIDECAR_PORT,
    Document,
    PodTemplate,
    documents,
    images_built_in_deploy,
    is_hook_install,
    is_sidecar_image,
    manifests,
    pod_templates,
    prestop_command,
    prestop_http,
)

DOCUMENTS = documents()
TEMPLATES = pod_templates(DOCUMENTS)
# The oldest schema kubernetes-validate ships, and the newest.
OLDEST, NEWEST = "1.25.0", k8s_schema.latest_version()
# Native sidecars (an init container with restartPolicy: Always) exist from Kubernetes 1.29.
NATIVE_SIDECAR_SINCE = "1.29.0"


def by_id(items):
    return pytest.mark.parametrize("item", items, ids=lambda i: i.id)


def test_there_are_manifests_of_every_kind_promised():
    assert manifests()
    kinds = {d.kind for d in DOCUMENTS}
    assert {"Pod", "Deployment", "LeaderWorkerSet", "NetworkPolicy"} <= kinds
    assert "Secret" not in kinds  # the token is generated, never committed (docs/layouts.md)


def _schema_checks(document: Document) -> list[tuple[dict, str]]:
    """(object, oldest Kubernetes it is for) pairs the API schema can check."""
    if document.kind == "LeaderWorkerSet":
        # A custom resource: its Pod templates are checked as the Pods they make.
        group = document.body["spec"]["leaderWorkerTemplate"]
        return [({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"{document.name}-{role}"},
                  "template": group[role]}, _oldest(group[role]["spec"]))
                for role in ("leaderTemplate", "workerTemplate") if role in group]
    spec = document.body.get("spec", {})
    pod_spec = spec if document.kind == "Pod" else spec.get("template", {}).get("spec", {})
    return [(document.body, _oldest(pod_spec))]


def _oldest(pod_spec: dict) -> str:
    if any("restartPolicy" in c for c in pod_spec.get("initContainers", [])):
        return NATIVE_SIDECAR_SINCE
    return OLDEST


@pytest.mark.parametrize("which", ["oldest", "newest"])
@by_id(DOCUMENTS)
def test_manifest_matches_the_kubernetes_schema(item, which):
    for body, oldest in _schema_checks(item):
        version = oldest if which == "oldest" else NEWEST
        try:
            k8s_schema.validate(body, version, strict=True)  # strict: no unknown fields
        except k8s_schema.ValidationError as exc:
            pytest.fail(f"not a valid {body.get('kind')} for Kubernetes {version}: {exc.message} "
                        f"at {'/'.join(map(str, exc.path))}")


def test_leaderworkerset_is_shaped_as_the_api_wants():
    (lws,) = [d for d in DOCUMENTS if d.kind == "LeaderWorkerSet"]
    assert lws.body["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    group = lws.body["spec"]["leaderWorkerTemplate"]
    assert isinstance(group["size"], int) and group["size"] >= 2
    assert set(group) <= {"size", "restartPolicy", "leaderTemplate", "workerTemplate", "subGroupPolicy"}
    assert group["restartPolicy"] == "RecreateGroupOnPodRestart"  # a worker disrupted alone drains with its group


def test_names_are_distinct():
    objects = [(d.kind, d.name) for d in DOCUMENTS]
    assert len(objects) == len(set(objects)), objects
    pods = [t.pod_name for t in TEMPLATES]
    assert len(pods) == len(set(pods)), pods


@by_id(TEMPLATES)
def test_no_service_account_token_in_the_pod(item: PodTemplate):
    assert item.spec.get("automountServiceAccountToken") is False


@by_id(TEMPLATES)
def test_hook_grace_annotations_tmpdir_and_token_agree(item: PodTemplate):
    """The product's own rules, the ones `prestop lint` runs on a user's manifests
    (modeldrain/lint/manifest_rules.py): the hook with its postStart start guard, --grace (or ?grace=) equal to
    terminationGracePeriodSeconds, the annotations mounted where the hook reads them, TMPDIR inside
    the installed volume, the token where the worker and the sidecar read it."""
    assert [str(finding) for finding in lint(item)] == []


@by_id(TEMPLATES)
def test_the_drain_hooks_have_exactly_deploys_shape(item: PodTemplate):
    """What deploy/ promises beyond the rules: nothing but --grace in a hook (a worker: its token),
    and an httpGet that names the sidecar's port by number and nothing else."""
    for container in item.spec["containers"]:
        if prestop_http(container):
            assert prestop_http(container) == {"port": SIDECAR_PORT, "path": f"/v1/drain?grace={item.grace_s}"}
        command = prestop_command(container)
        if command and not item.follows_a_leader:
            assert command[1:] == ["--grace", str(item.grace_s)], command


@by_id(TEMPLATES)
def test_the_hook_exists_in_the_image_it_runs_in(item: PodTemplate):
    """Baked (an image deploy/ builds with the hook at that path) or installed (an init container
    installs it into a volume mounted where the hook is exec'd, TMPDIR inside it)."""
    installs = {}  # volume name -> DIR an init container installs into
    for init in item.spec.get("initContainers", []):
        if is_hook_install(init):
            mounts = {m["mountPath"]: m["name"] for m in init.get("volumeMounts", [])}
            installs[mounts[init["args"][1]]] = init["args"][1]
    built = images_built_in_deploy()
    for container in item.spec["containers"]:
        command = prestop_command(container)
        if not command:
            continue
        mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
        installed_here = [f"{mounts[v]}/prestop" for v in installs if v in mounts]
        if installed_here:
            assert command[0] in installed_here  # and TMPDIR inside it: the rules' (above)
        else:
            assert container["image"] in built, f"{container['image']} is not built in deploy/ and nothing installs the hook"
            assert f"COPY --from=prestop /prestop {command[0]}" in built[container["image"]].read_text()


@by_id(TEMPLATES)
def test_a_secret_is_readable_by_the_user_that_mounts_it(item: PodTemplate):
    """kubelet writes a Secret's files root-owned with defaultMode; a non-root user reads them
    through the group fsGroup gives (or a world-readable mode)."""
    secrets = {v["name"]: v["secret"] for v in item.spec.get("volumes", []) if "secret" in v}
    pod_security = item.spec.get("securityContext", {})
    for container in item.containers():
        security = {**pod_security, **container.get("securityContext", {})}
        for mount in container.get("volumeMounts", []):
            if mount["name"] not in secrets:
                continue
            mode = secrets[mount["name"]].get("defaultMode", 0o644)
            if security.get("runAsUser", 0) == 0 or mode & 0o004:
                continue
            assert "fsGroup" in pod_security and mode & 0o040, \
                f"{container['name']} runs as {security['runAsUser']}: it cannot read a {mode:o} root-owned file"


@by_id(TEMPLATES)
def test_ports_are_named_uniquely_and_the_sidecars_for_its_protocol(item: PodTemplate):
    ports = [(c["name"], p) for c in item.containers() for p in c.get("ports", [])]
    names = [p["name"] for _, p in ports if "name" in p]
    assert len(names) == len(set(names)) and all(len(n) <= 15 for n in names), names
    for container in item.containers():
        declared = {p.get("name") for p in container.get("ports", [])}
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            port = container.get(probe, {}).get("httpGet", {}).get("port")
            assert port is None or isinstance(port, int) or port in declared, (container["name"], probe, port)
        if is_sidecar_image(container["image"]):
            assert [p["name"] for p in container["ports"] if p["containerPort"] == SIDECAR_PORT] == ["http-drain"]


def test_product_images_are_this_version():
    for template in TEMPLATES:
        for container in template.containers():
            repo, _, tag = container["image"].partition(":")
            if repo in (PRESTOP_IMAGE_REPO, SIDECAR_IMAGE_REPO):
                assert tag == __version__, container["image"]
