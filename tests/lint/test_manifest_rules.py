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
