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


def test_a_tmpdir_outside_the_installed_volume_on_a_read_only_root_is_found():
    def wrong_tmpdir(body):
        engine(body)["env"] = [{"name": "TMPDIR", "value": "/tmp"}]

    (finding,) = broken("pod-prestop-init-container.yaml", wrong_tmpdir)
    assert finding.field == "env[TMPDIR]" and "read-only" in finding.message
    assert "set it to '/drain/tmp'" in finding.message


def test_a_writable_root_needs_no_tmpdir():
    """The engine keeps its own /tmp: a TMPDIR moved into the drain volume would put the
    engine's own temporary files under the volume's size limit too."""
    def stock(body):
        del engine(body)["securityContext"]
        engine(body)["env"] = [e for e in engine(body)["env"] if e["name"] != "TMPDIR"]

    assert broken("pod-prestop-init-container.yaml", stock) == []


def test_an_engine_without_the_hook_beside_one_with_it_is_found():
    """A log shipper listed first took the hook (a kustomize component's containers.0)."""
    def shipper_first(body):
        containers = body["spec"]["containers"]
        shipper = {"name": "fluent-bit", "image": "fluent/fluent-bit:3.0", "lifecycle": engine(body).pop("lifecycle"),
                   "volumeMounts": engine(body)["volumeMounts"], "env": engine(body)["env"]}
        containers.insert(0, shipper)

    findings_ = broken("pod-prestop-init-container.yaml", shipper_first)
    assert [(f.container, f.field) for f in findings_] == [("engine", "lifecycle.preStop")]
    assert "runs vllm but has no drain hook, which is on fluent-bit" in findings_[0].message


def test_an_engine_under_sh_c_has_its_port_read():
    def wrapped(body):
        body["metadata"]["annotations"]["prometheus.io/port"] = "8000"
        engine(body)["command"] = ["sh", "-c", "cd /models && exec vllm serve /models/tiny --port 9000 --enable-server-load-tracking"]
        engine(body).pop("args", None)

    (finding,) = broken("pod-drain-sidecar.yaml", wrapped)
    assert finding.field == "metadata.annotations[prometheus.io/port]"
    assert "is 8000 but the engine's command says --port 9000" in finding.message


def test_a_poststart_of_the_users_chained_after_the_guard_passes_and_another_does_not():
    def chained(body):
        engine(body)["lifecycle"]["postStart"]["exec"]["command"] = [
            "/bin/sh", "-c", '/drain/prestop version && exec "$0" "$@"', "touch", "/tmp/started"]

    assert broken("pod-prestop-init-container.yaml", chained) == []

    def replaced(body):
        engine(body)["lifecycle"]["postStart"]["exec"]["command"] = ["touch", "/tmp/started"]

    assert [f.field for f in broken("pod-prestop-init-container.yaml", replaced)] == ["lifecycle.postStart.exec.command"]


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


@pytest.mark.parametrize("policy", ["None", "Default"])
def test_a_leaderworkerset_that_restarts_a_worker_alone_is_found(policy):
    """Issue 29: with None a worker disrupted alone waits on a leader that is not draining."""
    def restart_alone(body):
        body["spec"]["leaderWorkerTemplate"]["restartPolicy"] = policy

    (finding,) = broken("leaderworkerset.yaml", restart_alone)
    assert "(worker 1)" in finding.source and finding.field == "spec.leaderWorkerTemplate.restartPolicy"
    assert finding.message.startswith(f"{policy}: a worker Pod deleted alone") and "RecreateGroupOnPodRestart" in finding.message


@pytest.mark.parametrize("policy", ["RecreateGroupOnPodRestart", "RecreateGroupAfterStart", None])
def test_a_leaderworkerset_that_recreates_its_group_passes(policy):
    def recreate(body):
        group = body["spec"]["leaderWorkerTemplate"]
        if policy is None:
            del group["restartPolicy"]  # the v1 API's default: RecreateGroupOnPodRestart
        else:
            group["restartPolicy"] = policy

    assert broken("leaderworkerset.yaml", recreate) == []


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


SGLANG_POD = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sglang"},
    "spec": {"containers": [{"name": "engine", "image": "lmsysorg/sglang:v0.5.23",
                             "command": ["python3", "-m", "sglang.launch_server"],
                             "args": ["--model-path", "m", "--port", "30000"]}]},
}


@pytest.mark.parametrize("command, args, found", [
    (["python3", "-m", "sglang.launch_server"], ["--model-path", "m"], True),
    (["sglang", "serve"], ["--model-path", "m"], True),
    (["/bin/sh", "-c", "exec python3 -m sglang.launch_server --model-path m"], [], True),
    (["python3", "-m", "sglang.launch_server"], ["--model-path", "m", "--enable-metrics"], False),
    (["python3", "-m", "sglang.launch_server"], ["--config", "/etc/sglang.yaml"], False),  # may set it there
    (["vllm", "serve"], ["m"], False),
])
def test_sglang_without_enable_metrics_is_a_finding(command, args, found):
    body = copy.deepcopy(SGLANG_POD)
    body["spec"]["containers"][0].update(command=command, args=args)
    words = [f for f in findings(body) if "--enable-metrics" in f.message]
    assert bool(words) is found
    if found:
        assert words[0].container == "engine" and "404" in words[0].message


@pytest.mark.parametrize("name, longest, needed", [
    ("deployment.yaml", 20, None),  # vLLM: 5 + 20 + 5 = 30
    ("deployment.yaml", 21, 31),
    ("leaderworkerset.yaml", 20, None),  # a unified SGLang server
])
def test_longest_request_finds_a_grace_too_short_for_it(name, longest, needed):
    bodies = [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d and d["kind"] != "NetworkPolicy"]
    found = [f for body in bodies for t in templates_of(body, name) for f in lint(t, longest_request_s=longest)]
    if needed is None:
        assert found == []
    else:
        (finding,) = found
        assert finding.field == "terminationGracePeriodSeconds"
        assert f"needs G >= {needed} (5 s route wait + {longest} s + 5 s exit reserve)" in finding.message


def test_longest_request_counts_a_split_sglang_servers_reserve_and_the_hooks_own_flags():
    def prefill(body):
        for template in (body["spec"]["leaderWorkerTemplate"]["leaderTemplate"],):
            engine_ = template["spec"]["containers"][0]
            engine_["command"] = engine_["command"] + ["--disaggregation-mode", "prefill"]

    body = copy.deepcopy([d for d in yaml.safe_load_all((DEPLOY / "leaderworkerset.yaml").read_text()) if d][0])
    prefill(body)
    (leader, _) = templates_of(body, "lws.yaml")
    (finding,) = lint(leader, longest_request_s=6)
    assert "needs G >= 31 (5 s route wait + 6 s + 20 s exit reserve, an SGLang prefill or decode server's)" in \
        finding.message
    assert lint(leader, longest_request_s=5) == []
    pod = manifest("pod-prestop-baked.yaml")
    prestop_command(pod)[1:] = ["--grace", "30", "--route-wait", "2", "--exit-reserve", "3"]
    (template,) = templates_of(pod, "pod.yaml")
    assert lint(template, longest_request_s=25) == [] and lint(template, longest_request_s=26) != []


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
    said_exit, said_duration = mesh_rules.proxy_config_drain(text)
    assert said_exit == exit_on_zero
    assert said_duration == parsed.get("terminationDrainDuration")


VLLM_POD = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vllm"},
    "spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.32.0",
                             "args": ["/models/tiny", "--port", "8000"]}]},
}


@pytest.mark.parametrize("image, command, args, found", [
    # vllm/vllm-openai's entrypoint is `vllm serve`: its args alone are vLLM's.
    ("vllm/vllm-openai:v0.32.0", None, ["m"], True),
    ("vllm/vllm-openai:v0.32.0", None, ["m", "--enable-server-load-tracking"], False),
    ("vllm/vllm-openai:v0.32.0", None, ["m", "--enable-server-load-tracking", "--no-enable-server-load-tracking"],
     True),
    ("vllm/vllm-openai:v0.32.0", None, ["m", "--config", "/etc/vllm.yaml"], False),  # may set it there
    ("registry.example.com/vllm-openai-prestop:v0.32.0", None, ["m"], True),
    ("any/image:1", ["vllm", "serve"], ["m"], True),
    ("any/image:1", ["python3", "-m", "vllm.entrypoints.openai.api_server"], ["--model", "m"], True),
    ("any/image:1", ["/bin/sh", "-c", "vllm serve m --api-server-count 2"], [], True),
    ("any/image:1", ["/bin/sh", "-c", "exec vllm serve m --enable-server-load-tracking"], [], False),
    # Not vLLM: a proxy that names vLLM's port, SGLang, a vllm-openai image running another program.
    ("ghcr.io/llm-d/llm-d-routing-sidecar:v0.2.0", ["/app/llm-d-routing-sidecar"], ["-vllm-port=8200"], False),
    ("lmsysorg/sglang:v0.5.23", ["python3", "-m", "sglang.launch_server"], ["--enable-metrics"], False),
    ("vllm/vllm-openai:v0.32.0", ["/bin/sleep"], ["infinity"], False),
])
def test_vllm_without_server_load_tracking_is_a_finding(image, command, args, found):
    body = copy.deepcopy(VLLM_POD)
    container = body["spec"]["containers"][0]
    container.update(image=image, args=args)
    if command is not None:
        container["command"] = command
    words = [f for f in findings(body) if "--enable-server-load-tracking" in f.message]
    assert bool(words) is found, words
    if found:
        assert words[0].container == "engine" and words[0].field == "args" and "aborts" in words[0].message


def test_every_shipped_vllm_engine_sets_server_load_tracking():
    engines = [c for name in DEPLOY.glob("*.yaml") for body in yaml.safe_load_all(name.read_text()) if body
               for t in templates_of(body, name.name) for c in t.containers()
               if image_name(str(c.get("image", ""))).startswith("vllm-openai")]
    assert len(engines) >= 6
    assert all("--enable-server-load-tracking" in c["args"] for c in engines)
