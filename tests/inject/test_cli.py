"""`modeldrain inject` as people run it: on the manifests they already have, in a pipe, as a
post-renderer; what it writes passes `modeldrain lint` and the API schema; what it must not touch
comes out byte for byte; what it must not decide is refused in one line."""

from __future__ import annotations

import contextlib
import copy
import io
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_validate import utils as k8s_schema

from modeldrain.hook.exitcodes import ExitCode
from modeldrain.inject import pieces
from modeldrain.inject.cli import run_inject
from modeldrain.lint.manifest_rules import chained_start_guard, lint
from modeldrain.lint.pod_templates import templates_of
from tests.conftest import REPO
from tests.deploy.manifests import Document
from tests.deploy.test_manifests import NEWEST, _schema_checks

MODELDRAIN = Path(sys.executable).with_name("modeldrain")
IMAGE = "registry.example.com/modeldrain/prestop@sha256:" + "0" * 64
SIDECAR_IMAGE = "registry.example.com/modeldrain/drain-sidecar@sha256:" + "1" * 64
FIXTURES = REPO / "tests" / "deploy" / "kustomize"
# The users' own manifests: vLLM's and SGLang's published examples, vLLM's LeaderWorkerSet.
INPUTS = sorted(p for p in FIXTURES.glob("*/*.yaml") if p.name != "kustomization.yaml")

SERVICE = """\
# Source: llm/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: llm   # a comment the injector keeps
spec:
  ports: [{port: 80, targetPort: 8000}]
"""
# A log shipper listed before vLLM, a grace of the user's own, a postStart of theirs.
SHIPPER_FIRST = """\
# Source: llm/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
spec:
  selector:
    matchLabels: {app: llm}
  template:
    metadata:
      labels: {app: llm}
    spec:
      terminationGracePeriodSeconds: 120
      containers:
        - name: fluent-bit
          image: fluent/fluent-bit:3.0
          ports: [{containerPort: 2020}]
        - name: vllm
          image: vllm/vllm-openai:v0.32.0
          args: ["--model", "m", "--port", "8000"]
          ports: [{containerPort: 8000, name: http}]
          lifecycle:
            postStart:
              exec:
                command: ["sh", "-c", "date > /tmp/started"]
"""


def inject(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(MODELDRAIN), "inject", "--image", IMAGE, *args], input=stdin, capture_output=True,
                          text=True, timeout=60)


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def containers(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in template["spec"]["containers"]}


def assert_lint_and_schema_pass(text: str) -> None:
    for index, body in enumerate(docs(text)):
        for template in templates_of(body, f"out[{index}]"):
            assert [str(f) for f in lint(template)] == []
        for item in body["items"] if body["kind"] == "List" else [body]:
            for checked, oldest in _schema_checks(Document(Path("out.yaml"), index, item)):
                for version in (oldest, NEWEST):
                    k8s_schema.validate(checked, version, strict=True)


def test_the_engine_is_found_by_what_it_runs_and_the_rest_is_kept(tmp_path):
    source = tmp_path / "chart.yaml"
    source.write_text(SERVICE + "---\n" + SHIPPER_FIRST + "# a comment after the last document\n")
    done = inject(str(source))
    assert done.returncode == ExitCode.OK, done.stderr
    assert done.stdout.startswith(SERVICE + "---\n# Source: llm/templates/deployment.yaml\n")
    assert done.stdout.endswith("\n# a comment after the last document\n")
    (_, deployment) = docs(done.stdout)
    template = deployment["spec"]["template"]
    assert template["spec"]["terminationGracePeriodSeconds"] == 120  # the user's, never overwritten
    shipper, engine = containers(template)["fluent-bit"], containers(template)["vllm"]
    assert "lifecycle" not in shipper and "volumeMounts" not in shipper
    assert engine["lifecycle"]["preStop"]["exec"]["command"] == ["/drain/prestop", "--grace", "120"]
    # Their postStart runs, word for word, after the start guard.
    assert engine["lifecycle"]["postStart"]["exec"]["command"] == [
        "/bin/sh", "-c", '/drain/prestop version && exec "$0" "$@"', "sh", "-c", "date > /tmp/started"]
    assert template["metadata"]["annotations"]["prometheus.io/port"] == "8000"
    assert "env" not in engine  # a writable root: the engine keeps its own /tmp
    assert template["spec"]["initContainers"][0]["image"] == IMAGE
    assert_lint_and_schema_pass(done.stdout)


def test_its_own_output_goes_through_unchanged(tmp_path):
    source = tmp_path / "chart.yaml"
    source.write_text(SERVICE + "---\n" + SHIPPER_FIRST)
    once = inject(str(source)).stdout
    source.write_text(once)
    twice = inject(str(source))
    assert twice.returncode == ExitCode.OK and twice.stdout == once and twice.stderr == ""


def test_it_reads_standard_input_as_a_post_renderer_does():
    done = inject("-", stdin=SERVICE + "---\n" + SHIPPER_FIRST)
    assert done.returncode == ExitCode.OK, done.stderr
    assert [d["kind"] for d in docs(done.stdout)] == ["Service", "Deployment"]


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_published_examples_come_out_passing_lint_and_the_schema(path):
    sidecar = ("--sidecar", "--sidecar-image", SIDECAR_IMAGE) if "lws" in path.parent.name or "sidecar" in \
        path.parent.name else ()
    done = inject("--grace", "30", *sidecar, str(path))
    assert done.returncode == ExitCode.OK, done.stderr
    assert_lint_and_schema_pass(done.stdout)
    before, after = docs(path.read_text()), docs(done.stdout)
    added = [d for d in after if d not in before]
    assert [d for d in after if d in before] == [d for d in before if d["kind"] not in ("Deployment", "LeaderWorkerSet")]
    assert sorted(d["kind"] for d in added) == sorted([before[0]["kind"]] + (["NetworkPolicy"] if sidecar else []))
    again = subprocess.run([str(MODELDRAIN), "inject", "--image", IMAGE, *sidecar, "-"], input=done.stdout,
                           capture_output=True, text=True, timeout=60)
    assert again.stdout == done.stdout  # idempotent


def test_a_leaderworkerset_gets_the_hook_on_both_templates_and_the_workers_follow_with_the_token():
    path = FIXTURES / "vllm-lws" / "lws.yaml"
    done = inject("--grace", "30", "--sidecar", "--sidecar-image", SIDECAR_IMAGE, str(path))
    assert done.returncode == ExitCode.OK, done.stderr
    lws, policy, _ = docs(done.stdout)
    group = lws["spec"]["leaderWorkerTemplate"]
    leader = next(c for c in group["leaderTemplate"]["spec"]["containers"] if "lifecycle" in c)
    worker = next(c for c in group["workerTemplate"]["spec"]["containers"] if "lifecycle" in c)
    assert leader["lifecycle"]["preStop"]["exec"]["command"][3:] == []
    assert worker["lifecycle"]["preStop"]["exec"]["command"][3:] == ["--leader-token-file", pieces.TOKEN_FILE]
    assert policy["spec"]["podSelector"]["matchLabels"] == {pieces.LWS_NAME_LABEL: lws["metadata"]["name"]}
    without = inject("--grace", "30", str(path))
    assert without.returncode == ExitCode.NOT_CLEARED and "--sidecar" in without.stderr and without.stdout == ""


def test_an_engine_under_sh_c_is_found_and_its_port_read_from_its_flags():
    text = SHIPPER_FIRST.replace('args: ["--model", "m", "--port", "8000"]',
                                 'command: ["sh", "-c", "cd /models && exec vllm serve m --port 9000"]')
    done = inject("-", stdin=text)
    assert done.returncode == ExitCode.OK, done.stderr
    (deployment,) = docs(done.stdout)
    assert deployment["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == "9000"
    assert_lint_and_schema_pass(done.stdout)


def test_tmpdir_is_set_only_on_a_read_only_root():
    text = SHIPPER_FIRST.replace("          ports: [{containerPort: 8000, name: http}]",
                                 "          ports: [{containerPort: 8000, name: http}]\n"
                                 "          securityContext: {readOnlyRootFilesystem: true}")
    done = inject("-", stdin=text)
    assert done.returncode == ExitCode.OK, done.stderr
    (deployment,) = docs(done.stdout)
    assert containers(deployment["spec"]["template"])["vllm"]["env"] == [{"name": "TMPDIR", "value": "/drain/tmp"}]
    assert_lint_and_schema_pass(done.stdout)


def test_a_workload_without_grace_is_refused_unless_asked_and_then_written():
    text = SHIPPER_FIRST.replace("      terminationGracePeriodSeconds: 120\n", "")
    refused = inject("-", stdin=text)
    assert refused.returncode == ExitCode.NOT_CLEARED and refused.stdout == ""
    (line,) = refused.stderr.splitlines()  # one line: the workload, why, and that nothing was written
    assert "<stdin>[0]: Deployment llm: sets no terminationGracePeriodSeconds" in line
    assert line.endswith(": nothing written")
    asked = inject("--grace", "90", "-", stdin=text)
    (deployment,) = docs(asked.stdout)
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 90
    kept = inject("--grace", "90", "-", stdin=SHIPPER_FIRST)  # a grace of its own is never overwritten
    assert docs(kept.stdout)[0]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 120


def test_a_prestop_of_the_users_own_is_refused_naming_the_container():
    text = SHIPPER_FIRST.replace("            postStart:", "            preStop:")
    done = inject("-", stdin=text)
    assert done.returncode == ExitCode.NOT_CLEARED and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "container vllm already has a preStop hook" in line and line.endswith(": nothing written")


@pytest.mark.parametrize("change, said", [
    (lambda c: c.pop(1), "no container runs vLLM or SGLang"),
    (lambda c: c.append({**copy.deepcopy(c[1]), "name": "vllm-2"}), "containers vllm and vllm-2 each run an engine"),
])
def test_a_template_with_no_engine_or_two_is_left_alone_with_one_line(change, said):
    (body,) = docs(SHIPPER_FIRST)
    change(body["spec"]["template"]["spec"]["containers"])
    text = yaml.safe_dump(body)
    done = inject("-", stdin=text)
    assert done.returncode == ExitCode.OK and done.stdout == text
    (line,) = done.stderr.splitlines()
    assert "Deployment llm: left alone: " + said in line


@pytest.mark.parametrize("flag, image", [
    ("--image", "modeldrain/prestop:0.1.0"),          # Docker Hub's modeldrain namespace
    ("--image", "prestop@sha256:" + "0" * 64),         # Docker Hub's library/
    ("--sidecar-image", "modeldrain/drain-sidecar"),
])
def test_an_image_without_its_registry_is_refused(flag, image):
    """An image that names no registry is pulled from Docker Hub, where nothing of ours is
    published and whoever holds the namespace would run code in every engine Pod: exit 2, one line."""
    given = {"--image": IMAGE, "--sidecar-image": SIDECAR_IMAGE, flag: image}
    done = subprocess.run([str(MODELDRAIN), "inject", "--image", given["--image"], "--sidecar", "--sidecar-image",
                           given["--sidecar-image"], "-"], input=SHIPPER_FIRST, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == ExitCode.USAGE and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert f"{flag} {image}: names no registry" in line


@pytest.mark.parametrize("image", ["localhost/modeldrain/prestop:0.1.0", "registry:5000/modeldrain/prestop:0.1.0"])
def test_an_image_on_the_node_or_a_registry_of_yours_is_taken(image):
    done = subprocess.run([str(MODELDRAIN), "inject", "--image", image, "-"], input=SHIPPER_FIRST,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == ExitCode.OK, done.stderr
    assert docs(done.stdout)[0]["spec"]["template"]["spec"]["initContainers"][0]["image"] == image


def test_the_image_is_yours_to_name():
    done = subprocess.run([str(MODELDRAIN), "inject", "-"], input=SHIPPER_FIRST, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == ExitCode.USAGE and "--image" in done.stderr and done.stdout == ""


BAD_INPUTS = [
    ("key: [unclosed\n", "not valid YAML"),
    ("just a string\n", "not a Kubernetes object"),
    ("a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")), "alias bomb"),
    ("a: " + "[" * 20000 + "]" * 20000 + "\n", "not valid YAML"),
    ("[" * 200000 + "]" * 200000, "nested deeper"),
    ("x" * (5 << 20), "larger than 4 MiB"),
    ("[" + "1," * 1_900_000 + "1]", "more than 300000 values"),  # JSON, within 4 MiB
]
# The bound on a refusal of bad input.
BAD_INPUT_DEADLINE_S = 2.0


@pytest.mark.parametrize("text, said", BAD_INPUTS)
def test_bad_input_is_one_line_and_exit_2(text, said):
    done = inject("-", stdin=text)
    assert done.returncode == ExitCode.USAGE and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert said in line


class Endless(io.RawIOBase):
    """A standard input that never ends (`yes | modeldrain inject -`), counting what is read."""

    def __init__(self) -> None:
        self.served = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        # An unbounded read fails here instead of hanging the suite.
        assert self.served < (64 << 20), "read 64 MiB of an endless input: no bound"
        buffer[:] = b"a" * len(buffer)
        self.served += len(buffer)
        return len(buffer)


@pytest.mark.parametrize("text, said", [*BAD_INPUTS, (None, "larger than 4 MiB")],
                         ids=[*(said for _, said in BAD_INPUTS), "endless standard input"])
def test_bad_input_is_refused_within_the_deadline(text, said):
    """The refusal itself, reading and parsing included, timed in this process (an interpreter's
    start on a loaded machine is not the reader's); an endless input is read only to its bound."""
    endless = Endless()
    stdin = io.BufferedReader(endless) if text is None else io.BytesIO(text.encode())
    err = io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(err):
        code = run_inject(["--image", IMAGE, "-"], stdin=stdin)
    elapsed = time.monotonic() - started
    assert code == ExitCode.USAGE and out.getvalue() == "" and said in err.getvalue()
    assert len(err.getvalue().splitlines()) == 1
    assert elapsed < BAD_INPUT_DEADLINE_S, f"{elapsed:.2f} s"
    assert endless.served < 2 * (4 << 20)


def test_the_pieces_are_the_kustomize_components_own():
    """What the injector adds is what deploy/kustomize adds, but for the images (yours) and the
    grace and engine (this Pod's)."""
    (hook,) = docs((REPO / "deploy/kustomize/hook/pieces.yaml").read_text())
    (side,) = docs((REPO / "deploy/kustomize/sidecar-pieces/pieces.yaml").read_text())
    assert pieces.install_container(hook["spec"]["installPrestop"]["image"]) == hook["spec"]["installPrestop"]
    volumes = {v["name"]: v for v in pieces.hook_volumes() + pieces.sidecar_volumes()}
    assert volumes["drain"]["emptyDir"] == hook["spec"]["drain"]
    assert volumes["podinfo"]["downwardAPI"] == hook["spec"]["podinfo"]
    assert volumes["sidecar-tmp"]["emptyDir"] == side["spec"]["sidecarTmp"]
    assert volumes["token"]["secret"] == side["spec"]["token"]
    assert pieces.hook_mounts() == [hook["spec"]["drainMount"], hook["spec"]["podinfoMount"]]
    assert pieces.token_mount() == side["spec"]["tokenMount"]
    # A postStart of the user's own is kept behind the same start guard.
    assert chained_start_guard(pieces.HOOK, []) == hook["spec"]["startGuardChain"]
    assert hook["spec"]["lifecycle"]["postStart"]["exec"]["command"] == [pieces.HOOK, "version"]
    sidecar = pieces.sidecar_container(side["spec"]["sidecar"]["image"], 30, "unset", lws=False)
    assert sidecar == side["spec"]["sidecar"]


@pytest.mark.parametrize("kind", ["Pod", "Job", "StatefulSet", "DaemonSet", "List"])
def test_every_workload_kind_gets_the_hook(kind):
    (deployment,) = docs(SHIPPER_FIRST)
    template = deployment["spec"]["template"]
    if kind == "Pod":
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "llm", **template["metadata"]},
                "spec": template["spec"]}
    elif kind == "List":
        body = {"apiVersion": "v1", "kind": "List", "items": [deployment]}
    else:
        template["spec"]["restartPolicy"] = "Never" if kind == "Job" else "Always"
        spec = {"template": template} if kind == "Job" else {**deployment["spec"], "serviceName": "llm"} \
            if kind == "StatefulSet" else deployment["spec"]
        body = {"apiVersion": "batch/v1" if kind == "Job" else "apps/v1", "kind": kind, "metadata": {"name": "llm"},
                "spec": spec}
    done = inject("--sidecar", "--sidecar-image", SIDECAR_IMAGE, "-", stdin=yaml.safe_dump(body))
    assert done.returncode == ExitCode.OK, done.stderr
    out = docs(done.stdout)
    assert out[-1]["kind"] == ("List" if kind == "List" else "NetworkPolicy")
    assert_lint_and_schema_pass(done.stdout)
    items = out[0]["items"] if kind == "List" else out
    assert [i["kind"] for i in items] == ["Deployment" if kind == "List" else kind, "NetworkPolicy"]


@pytest.mark.parametrize("container, expected", [
    ({"command": ["vllm", "serve", "m"]}, {"command": ["vllm", "serve", "m", "--enable-server-load-tracking"]}),
    ({"image": "vllm/vllm-openai:v0.32.0", "args": ["m", "--port", "9000"]},
     {"image": "vllm/vllm-openai:v0.32.0", "args": ["m", "--port", "9000", "--enable-server-load-tracking"]}),
    ({"command": ["sh", "-c"], "args": ["cd /m && exec vllm serve m --port 9000"]},
     {"command": ["sh", "-c"], "args": ["cd /m && exec vllm serve m --port 9000 --enable-server-load-tracking"]}),
    # Left to the user (lint names the flag): a script whose engine is not its last command, or with a comment.
    ({"command": ["sh", "-c", "vllm serve m & wait"]}, None),
    ({"command": ["sh", "-c", "vllm serve m  # tiny"]}, None),
    ({"command": ["vllm", "serve", "m", "--no-enable-server-load-tracking"]}, None),
    ({"command": ["vllm", "serve", "--config", "c.yaml"]}, None),
])
def test_a_vllm_engine_gets_server_load_tracking_where_its_words_are_its_own(container, expected):
    """Issue 26: vLLM counts a request in its API server only with --enable-server-load-tracking."""
    from modeldrain.inject.pod_changes import count_api_server_requests
    from modeldrain.lint.engine_containers import engine_run

    changed = copy.deepcopy(container)
    run = engine_run(changed)
    assert run is not None
    count_api_server_requests(changed, run)
    assert changed == (expected if expected is not None else container)
