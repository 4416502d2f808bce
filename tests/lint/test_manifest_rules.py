"""`prestop lint`'s rules: silent on deploy/'s Pods, and each disagreement one finding naming its field.

Each case starts from a manifest of deploy/ (which the rules pass: tests/deploy/test_manifests.py)
and breaks one thing a newcomer gets wrong.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from modeldrain.lint.manifest_rules import Finding, flag_value, image_name, lint
from modeldrain.lint.pod_templates import NotAManifest, templates_of

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def manifest(name: str) -> dict[str, Any]:
    (body,) = [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]
    return body


def findings(body: dict[str, Any]) -> list[Finding]:
    return [f for t in templates_of(body, "pod.yaml") for f in lint(t)]


def engine(body: dict[str, Any]) -> dict[str, Any]:
    spec = body["spec"] if body["kind"] == "Pod" else body["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] if c["name"] == "engine")


def broken(name: str, change: Callable[[dict[str, Any]], None]) -> list[Finding]:
    body = copy.deepcopy(manifest(name))
    change(body)
    return findings(body)


def prestop_command(body: dict[str, Any]) -> list[str]:
    return engine(body)["lifecycle"]["preStop"]["exec"]["command"]


@pytest.mark.parametrize("name", ["pod-drain-sidecar.yaml", "pod-prestop-baked.yaml", "pod-prestop-init-container.yaml",
                                  "pod-drain-sidecar-httpget.yaml", "deployment.yaml"])
def test_deploys_manifests_have_no_finding(name):
    assert findings(manifest(name)) == []


def test_a_forgotten_grace_is_found_with_what_it_costs():
    def forget(body):
        body["spec"]["terminationGracePeriodSeconds"] = 60
        del prestop_command(body)[1:3]

    (finding,) = broken("pod-drain-sidecar.yaml", forget)
    assert (finding.container, finding.field) == ("engine", "lifecycle.preStop.exec.command")
    assert "--grace missing: the hook assumes 30 s and terminationGracePeriodSeconds is 60" in finding.message
    assert str(finding).startswith("pod.yaml: Pod llm-vllm-sidecar: container engine: lifecycle.preStop.exec.command: ")


def test_a_grace_that_differs_from_the_pods_is_found():
    def differ(body):
        body["spec"]["terminationGracePeriodSeconds"] = 120

    (finding,) = broken("pod-prestop-baked.yaml", differ)
    assert "--grace 30 but terminationGracePeriodSeconds is 120" in finding.message


def test_a_grace_equals_form_and_the_kubernetes_default_agree():
    def equals_form(body):
        del body["spec"]["terminationGracePeriodSeconds"]
        command = prestop_command(body)
        command[1:3] = ["--grace=30"]

    assert broken("pod-prestop-baked.yaml", equals_form) == []


def test_a_missing_start_guard_is_found():
    (finding,) = broken("pod-prestop-baked.yaml", lambda body: engine(body)["lifecycle"].pop("postStart"))
    assert finding.field == "lifecycle.postStart.exec.command" and "'version'" in finding.message


def test_an_annotation_the_hook_cannot_see_is_found():
    def unmount(body):
        engine(body)["volumeMounts"] = [m for m in engine(body)["volumeMounts"] if m["name"] != "podinfo"]

    (finding,) = broken("pod-drain-sidecar.yaml", unmount)
    assert finding.field == "volumeMounts" and "prometheus.io/port=8000" in finding.message
    assert "/etc/podinfo/annotations" in finding.message


def test_an_annotation_that_disagrees_with_the_engines_port_is_found():
    def move(body):
        body["metadata"]["annotations"]["prometheus.io/port"] = "8490"

    (finding,) = broken("pod-drain-sidecar.yaml", move)
    assert finding.field == "metadata.annotations[prometheus.io/port]"
    assert "is 8490 but the engine's command says --port 8000" in finding.message


def test_a_tmpdir_outside_the_installed_volume_is_found():
    def wrong_tmpdir(body):
        engine(body)["env"] = [{"name": "TMPDIR", "value": "/tmp"}]

    (finding,) = broken("pod-prestop-init-container.yaml", wrong_tmpdir)
    assert finding.field == "env[TMPDIR]" and "not '/drain/tmp'" in finding.message


def test_a_read_only_root_without_a_writable_tmpdir_is_found():
    def no_tmp(body):
        engine(body)["volumeMounts"] = [m for m in engine(body)["volumeMounts"] if m["mountPath"] != "/tmp"]
        engine(body)["env"] = [e for e in engine(body).get("env", []) if e["name"] != "TMPDIR"]

    (finding,) = broken("pod-prestop-baked.yaml", no_tmp)
    assert finding.field == "env[TMPDIR]" and "read-only" in finding.message


def test_a_hook_path_that_nothing_installs_is_found():
    def elsewhere(body):
        prestop_command(body)[0] = "/opt/prestop"
        engine(body)["lifecycle"]["postStart"]["exec"]["command"][0] = "/opt/prestop"

    assert [f.field for f in broken("pod-prestop-init-container.yaml", elsewhere)] == ["lifecycle.preStop.exec.command"]


def test_a_worker_without_the_leaders_token_is_found():
    body = manifest("leaderworkerset.yaml")
    worker = next(c for c in body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"]
                  if c["name"] == "engine")
    command = worker["lifecycle"]["preStop"]["exec"]["command"]
    assert findings(body) == []
    del command[command.index("--leader-token-file"):]
    (finding,) = findings(body)
    assert "(worker 1)" in finding.source and "--leader-token-file" in finding.message


def test_a_token_file_in_no_mounted_volume_is_found():
    def unmount(body):
        sidecar = next(c for c in body["spec"]["initContainers"] if c["name"] == "drain-sidecar")
        sidecar["volumeMounts"] = [m for m in sidecar["volumeMounts"] if m["name"] != "token"]

    (finding,) = broken("pod-drain-sidecar.yaml", unmount)
    assert finding.container == "drain-sidecar" and "--token-file /var/run/secrets/drain-sidecar/token" in finding.message


def test_an_http_drain_without_the_pods_grace_is_found():
    def path(body):
        engine(body)["lifecycle"]["preStop"]["httpGet"]["path"] = "/v1/drain"

    (finding,) = broken("pod-drain-sidecar-httpget.yaml", path)
    assert finding.field == "lifecycle.preStop.httpGet.path" and "no ?grace=" in finding.message


def test_a_pod_without_any_hook_is_found():
    def unhook(body):
        engine(body)["lifecycle"].pop("preStop")

    (finding,) = broken("pod-prestop-baked.yaml", unhook)
    assert "no container runs prestop" in finding.message


def test_a_list_holds_its_items_and_an_object_that_makes_no_pod_makes_none():
    body = {"kind": "List", "items": [manifest("deployment.yaml"), {"kind": "Service", "metadata": {"name": "s"}}]}
    (template,) = templates_of(body, "all.json")
    assert template.source.startswith("all.json items[0]: Deployment ")
    with pytest.raises(NotAManifest, match="an object without a kind"):
        list(templates_of({"spec": {}}, "x.json"))
    with pytest.raises(NotAManifest, match="no Pod template"):
        list(templates_of({"kind": "Deployment", "metadata": {"name": "d"}, "spec": {}}, "x.json"))


def test_flag_values_and_image_names_are_read_as_the_programs_read_them():
    assert flag_value(["--grace", "30", "--grace=45"], "--grace") == "45"
    assert flag_value(["--grace"], "--grace") is None
    assert image_name("registry.example.com:5000/modeldrain/prestop:0.1.0") == "prestop"
    assert image_name("modeldrain/drain-sidecar@sha256:abc") == "drain-sidecar"


# --- behind a service mesh (modeldrain/lint/mesh_rules.py) ---

def _annotate(**annotations):
    def change(body):
        body["metadata"].setdefault("annotations", {}).update(annotations)
    return change


def _mesh_findings(name, change):
    return [f for f in broken(name, change) if "mesh" in f.message or "Istio" in f.message or "Linkerd" in f.message]


def test_an_istio_injected_pod_calling_the_sidecar_through_the_mesh_is_found():
    (finding,) = _mesh_findings("pod-drain-sidecar-httpget.yaml", _annotate(**{"sidecar.istio.io/inject": "true"}))
    assert finding.field == "metadata.annotations[traffic.sidecar.istio.io/excludeInboundPorts]"
    assert "rejected under STRICT mTLS and SIGTERM follows at once" in finding.message
    assert "add 8490 to traffic.sidecar.istio.io/excludeInboundPorts" in finding.message


def test_the_exec_hook_behind_istio_still_needs_the_port_out_of_the_mesh_for_the_count():
    def label(body):
        body["metadata"]["labels"]["sidecar.istio.io/inject"] = "true"
    (finding,) = _mesh_findings("pod-drain-sidecar.yaml", label)
    assert "never sees its connections at zero" in finding.message and "httpGet" not in finding.message


@pytest.mark.parametrize("annotations", [
    {"sidecar.istio.io/inject": "true", "traffic.sidecar.istio.io/excludeInboundPorts": "15020, 8490"},
    {"sidecar.istio.io/inject": "true", "traffic.sidecar.istio.io/excludeInboundPorts": "8400-8500"},
    {"sidecar.istio.io/inject": "true", "traffic.sidecar.istio.io/includeInboundPorts": "8000"},
    {"sidecar.istio.io/inject": "false"},
    {"linkerd.io/inject": "enabled", "config.linkerd.io/skip-inbound-ports": "8490"},
    {"linkerd.io/inject": "disabled"},
])
def test_a_mesh_that_leaves_the_sidecars_port_alone_is_not_found(annotations):
    assert _mesh_findings("pod-drain-sidecar-httpget.yaml", _annotate(**annotations)) == []


def test_a_linkerd_injected_pod_calling_the_sidecar_through_the_mesh_is_found():
    (finding,) = _mesh_findings("pod-drain-sidecar-httpget.yaml", _annotate(**{"linkerd.io/inject": "enabled"}))
    assert finding.field == "metadata.annotations[config.linkerd.io/skip-inbound-ports]"


def _with_proxy(name, *, native=False, lifecycle=None):
    def change(body):
        body["metadata"].setdefault("annotations", {})["traffic.sidecar.istio.io/excludeInboundPorts"] = "8490"
        body["metadata"]["annotations"]["config.linkerd.io/skip-inbound-ports"] = "8490"
        proxy = {"name": name, "image": f"example/{name}:1"}
        if lifecycle:
            proxy["lifecycle"] = lifecycle
        spec = body["spec"]
        if native:
            spec.setdefault("initContainers", []).append({**proxy, "restartPolicy": "Always"})
        else:
            spec["containers"].append(proxy)
    return change


def test_a_classic_istio_proxy_that_exits_before_the_engine_drains_is_found():
    (finding,) = _mesh_findings("pod-drain-sidecar.yaml", _with_proxy("istio-proxy"))
    assert (finding.container, finding.field) == ("istio-proxy", "containers")
    assert "exits after its own drain (5 s)" in finding.message and "EXIT_ON_ZERO_ACTIVE_CONNECTIONS" in finding.message


@pytest.mark.parametrize("why, change", [
    ("native", _with_proxy("istio-proxy", native=True)),
    ("its own preStop", _with_proxy("istio-proxy", lifecycle={"preStop": {"exec": {"command": ["pilot-agent", "wait"]}}})),
    ("exits on zero connections", lambda body: (_with_proxy("istio-proxy")(body), _annotate(**{
        "proxy.istio.io/config": 'proxyMetadata:\n  EXIT_ON_ZERO_ACTIVE_CONNECTIONS: "true"\n'})(body))),
    ("drains as long as the grace", lambda body: (_with_proxy("istio-proxy")(body), _annotate(**{
        "proxy.istio.io/config": "terminationDrainDuration: 30s\n"})(body))),
    ("a native Linkerd proxy", _with_proxy("linkerd-proxy", native=True)),
    ("a Linkerd proxy that waits", lambda body: (_with_proxy("linkerd-proxy")(body), _annotate(**{
        "config.alpha.linkerd.io/proxy-wait-before-exit-seconds": "25"})(body))),
])
def test_a_proxy_that_outlives_the_drain_is_not_found(why, change):
    assert _mesh_findings("pod-drain-sidecar.yaml", change) == [], why


def test_a_classic_linkerd_proxy_is_found_and_a_short_istio_drain_too():
    (finding,) = _mesh_findings("pod-drain-sidecar.yaml", _with_proxy("linkerd-proxy"))
    assert finding.container == "linkerd-proxy" and "at least 25" in finding.message

    def short(body):
        _with_proxy("istio-proxy")(body)
        _annotate(**{"proxy.istio.io/config": "terminationDrainDuration: 10s\n"})(body)
    (finding,) = _mesh_findings("pod-drain-sidecar.yaml", short)
    assert "(10 s)" in finding.message


@pytest.mark.parametrize("text", [
    'proxyMetadata:\n  EXIT_ON_ZERO_ACTIVE_CONNECTIONS: "true"\n',
    "proxyMetadata:\n  EXIT_ON_ZERO_ACTIVE_CONNECTIONS: 'true'\nterminationDrainDuration: 10s\n",
    'proxyMetadata:\n  EXIT_ON_ZERO_ACTIVE_CONNECTIONS: "false"\n',
    "terminationDrainDuration: 45s\n",
    "terminationDrainDuration: \"1m\"\nholdApplicationUntilProxyStarts: true\n",
    '{"terminationDrainDuration": "40s", "proxyMetadata": {"EXIT_ON_ZERO_ACTIVE_CONNECTIONS": "true"}}',
    '{"proxyMetadata": {"EXIT_ON_ZERO_ACTIVE_CONNECTIONS": "false"}, "terminationDrainDuration": "2s"}',
    "concurrency: 2\n",
])
def test_the_proxy_config_keys_are_read_as_pyyaml_reads_them(text):
    from modeldrain.lint import mesh_rules
    parsed = yaml.safe_load(text)
    exit_on_zero = str(parsed.get("proxyMetadata", {}).get("EXIT_ON_ZERO_ACTIVE_CONNECTIONS", "")).lower() == "true"
    assert bool(mesh_rules._EXIT_ON_ZERO.search(text)) == exit_on_zero
    found = mesh_rules._DRAIN_DURATION.search(text)
    assert (found.group(1) if found else None) == parsed.get("terminationDrainDuration")
