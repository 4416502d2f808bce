"""What must agree in an engine Pod for the hook to drain it: `prestop lint`'s rules, and deploy/'s tests'.

Each rule reads one Pod template and says, one finding per disagreement, which container and
which field is wrong and what it costs at delete time. The rules are the ones a Pod of deploy/
is held to (tests/deploy/test_manifests.py runs them), so a user's manifest is checked the way
ours are:

- hook: a container runs `prestop` as its preStop exec (or calls drain-sidecar's /v1/drain), with
  `prestop version` as its postStart (alone, or chained before the user's own), so a hook that
  cannot run fails the Pod's start; and it is the container that runs the engine
  (modeldrain/lint/engine_containers.py), an `sh -c` one included;
- grace: `--grace` (or `?grace=`) repeats terminationGracePeriodSeconds; the hook cannot read it;
- annotations: a `prometheus.io/port` the Pod declares is mounted where the hook reads it, and
  agrees with the engine's own `--port`;
- TMPDIR: the static executable unpacks itself there (else /tmp), which must be writable: on a
  read-only root, a volume (`prestop install`'s makes DIR/tmp); a writable root's /tmp needs none;
- token: a worker that follows its leader carries the leader's token, and every token file named
  is in a volume mounted into the container that reads it;
- metrics: an SGLang engine is started with `--enable-metrics`, without which it serves no
  /metrics (a 404) and nothing can be measured;
- mesh: behind Istio's or Linkerd's sidecar, drain-sidecar's port is out of the mesh's capture and
  a classic proxy container does not exit before the engine's drain (modeldrain/lint/mesh_rules.py);
- server load: a vLLM engine is started with `--enable-server-load-tracking`, without which no
  signal counts a request in its API server (templating, tokenisation, a media fetch) before the
  engine core's gauges do.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any, Iterator

from modeldrain.hook.annotations import DEFAULT_ANNOTATIONS_FILE, PORT_ANNOTATION
from modeldrain.hook.constants import (
    DEFAULT_GRACE_S,
    EXIT_RESERVE_S,
    ROUTE_WAIT_S,
    SIDECAR_PORT,
    SPLIT_ROLE_EXIT_RESERVE_S,
)
from modeldrain.hook.engine import engine_invocation
from modeldrain.hook.gauges import EngineKind
from modeldrain.lint.engine_containers import engine_containers, engine_run
from modeldrain.lint.mesh_rules import mesh_findings
from modeldrain.lint.pod_templates import PodTemplate

__all__ = [
    "Finding", "PRESTOP_IMAGE_NAME", "SIDECAR_IMAGE_NAME", "VLLM_CONFIG_FLAG", "VLLM_NO_SERVER_LOAD_FLAG",
    "VLLM_SERVER_LOAD_FLAG", "chained_start_guard", "flag_value", "hook_command", "hook_http", "image_name", "lint",
    "names_a_registry",
]

# The static executables unpack here when TMPDIR is unset.
DEFAULT_TMPDIR = "/tmp"
# drain-sidecar's drain route, as a preStop httpGet calls it.
DRAIN_PATH = "/v1/drain"
# What the product's images are called, whatever the registry in front.
PRESTOP_IMAGE_NAME = "prestop"
SIDECAR_IMAGE_NAME = "drain-sidecar"

_HTTP_GRACE = re.compile(r"[?&]grace=([^&]*)")
# SGLang's switch for /metrics (off by default), and its flag that may set it from a file instead.
SGLANG_METRICS_FLAG = "--enable-metrics"
SGLANG_CONFIG_FLAG = "--config"
# vLLM's switch for GET /load's count (argparse's BooleanOptionalAction: the last of the two wins),
# its flag that may set it from a file, and the image whose entrypoint is `vllm serve`.
VLLM_SERVER_LOAD_FLAG = "--enable-server-load-tracking"
VLLM_NO_SERVER_LOAD_FLAG = "--no-enable-server-load-tracking"
VLLM_CONFIG_FLAG = "--config"
VLLM_IMAGE_PREFIX = "vllm-openai"


# A postStart of the user's kept beside the start guard: `sh -c 'HOOK version && exec "$0" "$@"' THEIRS...`
# runs the guard, then their own command word for word (modeldrain inject writes it).
CHAINED_GUARD = '{hook} version && exec "$0" "$@"'


def chained_start_guard(hook: str, theirs: list[str]) -> list[str]:
    """The postStart command that runs `HOOK version`, then the user's own postStart command."""
    return ["/bin/sh", "-c", CHAINED_GUARD.format(hook=hook), *theirs]

# LeaderWorkerSet restart policies that recreate the whole group when one Pod is disrupted (the v1
# API's default is the first): a worker deleted alone then has its leader deleted too, and follows its drain.
GROUP_RESTART_POLICIES = frozenset({"RecreateGroupOnPodRestart", "RecreateGroupAfterStart"})


@dataclass(frozen=True)
class Finding:
    """One disagreement: where (the template, the container, the field) and what it costs."""

    source: str  # "FILE: Kind name"
    container: str | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"container {self.container}: " if self.container else ""
        return f"{self.source}: {where}{self.field}: {self.message}"


def image_name(image: str) -> str:
    """`registry.example.com/modeldrain/prestop:0.1.0` -> `prestop`."""
    without_digest = image.split("@", 1)[0]
    last = without_digest.rsplit("/", 1)[-1]
    return last.split(":", 1)[0]


def names_a_registry(image: str) -> bool:
    """Whether a reference names its registry: a first path component with a `.` or a `:`, or
    `localhost` (Docker's reference grammar, distribution/reference's splitDockerDomain). Any other
    name is pulled from Docker Hub, whoever holds that namespace there."""
    first, slash, _ = image.split("@", 1)[0].partition("/")
    return bool(slash) and ("." in first or ":" in first or first == "localhost")


def _strings(value: Any) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


def hook_command(container: dict[str, Any]) -> list[str]:
    """The preStop exec command when it runs prestop (its basename), else []."""
    command = _strings(_get(container, "lifecycle", "preStop", "exec", "command"))
    return command if command and posixpath.basename(command[0]) == "prestop" else []


def hook_http(container: dict[str, Any]) -> dict[str, Any]:
    """A preStop httpGet on drain-sidecar's /v1/drain, else {}."""
    hook = _get(container, "lifecycle", "preStop", "httpGet")
    if isinstance(hook, dict) and str(hook.get("path", "")).split("?", 1)[0] == DRAIN_PATH:
        return hook
    return {}


def flag_value(argv: list[str], flag: str) -> str | None:
    """`--flag VALUE` or `--flag=VALUE` in an argv; the last one wins, as argparse's does."""
    found = None
    for index, word in enumerate(argv):
        if word == flag and index + 1 < len(argv):
            found = argv[index + 1]
        elif word.startswith(flag + "="):
            found = word[len(flag) + 1:]
    return found


def _get(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _mounts(container: dict[str, Any]) -> list[dict[str, Any]]:
    return _dicts(container.get("volumeMounts"))


def _mount_holding(container: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The volumeMount whose mountPath holds `path` (the deepest one), or None."""
    best = None
    for mount in _mounts(container):
        where = str(mount.get("mountPath", "")).rstrip("/") or "/"
        if (path == where or path.startswith(where.rstrip("/") + "/")) and (
                best is None or len(where) > len(str(best.get("mountPath", "")))):
            best = mount
    return best


def _env(container: dict[str, Any], template: PodTemplate) -> dict[str, str | None]:
    env: dict[str, str | None] = dict(template.injected_env)
    for item in _dicts(container.get("env")):
        env[str(item.get("name"))] = None if "valueFrom" in item else str(item.get("value", ""))
    return env


def _argv(container: dict[str, Any]) -> list[str]:
    return _strings(container.get("command")) + _strings(container.get("args"))


def lint(template: PodTemplate, longest_request_s: float | None = None) -> list[Finding]:
    """Every finding for one Pod template; [] when hook, grace, annotations, TMPDIR and token agree
    (and, given the longest request to finish, G leaves room for it)."""
    findings = list(_lint(template))
    if longest_request_s is not None:
        findings += _room_for(template, longest_request_s)
    return findings


def needed_grace(longest_request_s: float, route_wait_s: float, exit_reserve_s: float) -> float:
    """docs/prestop.md, "Choosing G": a request that starts as the route wait ends must finish
    before the hook's deadline, which leaves the engine its exit reserve before SIGKILL."""
    return route_wait_s + longest_request_s + exit_reserve_s


def _room_for(template: PodTemplate, longest_s: float) -> Iterator[Finding]:
    for container in _dicts(template.spec.get("containers")):
        command = hook_command(container)
        if not command and not hook_http(container):
            continue
        run = engine_run(container)
        split = run is not None and run.kind is EngineKind.SGLANG and \
            flag_value(list(run.argv), "--disaggregation-mode") in ("prefill", "decode")
        reserve = _seconds(flag_value(command[1:], "--exit-reserve")) if command else None
        if reserve is None:
            reserve = SPLIT_ROLE_EXIT_RESERVE_S if split else EXIT_RESERVE_S
        route_wait = _seconds(flag_value(command[1:], "--route-wait")) if command else None
        route_wait = ROUTE_WAIT_S if route_wait is None else route_wait
        needed = needed_grace(longest_s, route_wait, reserve)
        if template.grace_s < needed:
            role = ", an SGLang prefill or decode server's" if split else ""
            yield Finding(template.source, _name(container), "terminationGracePeriodSeconds",
                          f"is {template.grace_s}: a {longest_s:g} s request that starts as the route wait ends needs "
                          f"G >= {needed:g} ({route_wait:g} s route wait + {longest_s:g} s + {reserve:g} s exit reserve"
                          f"{role}); the hook returns at G - {reserve:g} and SIGTERM cuts the rest: raise G "
                          "(docs/prestop.md, \"Choosing G\")")


def _seconds(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _lint(template: PodTemplate) -> Iterator[Finding]:
    containers = _dicts(template.spec.get("containers"))
    hooked = [c for c in containers if hook_command(c)]
    callers = [c for c in containers if hook_http(c)]
    if not hooked and not callers:
        yield Finding(template.source, None, "spec.containers[].lifecycle.preStop",
                      "no container runs prestop as its preStop exec hook, nor calls drain-sidecar's "
                      f"{DRAIN_PATH}: a deletion sends SIGTERM at once and cuts every running request")
    for container in callers:
        yield from _http_hook(template, container)
    if hooked or callers:
        yield from _unhooked_engines(template, hooked + callers)
    installs = _installed_volumes(template)
    for container in hooked:
        yield from _start_guard(template, container)
        yield from _grace(template, container)
        yield from _annotations(template, container)
        yield from _tmpdir(template, container, installs)
        yield from _leader_token(template, container)
    if hooked:
        yield from _group_restart(template)
    for container in template.containers():
        if image_name(str(container.get("image", ""))) == SIDECAR_IMAGE_NAME:
            yield from _sidecar_token(template, container)
    runs_sidecar = any(image_name(str(c.get("image", ""))) == SIDECAR_IMAGE_NAME for c in template.containers())
    for container_name, field, message in mesh_findings(template, hooked, callers, runs_sidecar):
        yield Finding(template.source, container_name, field, message)
    for container in containers:
        yield from _sglang_metrics(template, container)
        yield from _vllm_server_load(template, container)


def _sglang_metrics(template: PodTemplate, container: dict[str, Any]) -> Iterator[Finding]:
    """An SGLang server's command without --enable-metrics: its /metrics answers 404. A command with
    --config may set it in the file, which is not read here: no finding."""
    words = [word for arg in _argv(container) for word in arg.split()]
    sglang = "sglang.launch_server" in words or any(
        posixpath.basename(word) == "sglang" and words[i + 1:i + 2] == ["serve"] for i, word in enumerate(words))
    given = {word.split("=", 1)[0] for word in words}
    if sglang and SGLANG_METRICS_FLAG not in given and SGLANG_CONFIG_FLAG not in given:
        yield Finding(template.source, _name(container), "args",
                      f"SGLang runs without {SGLANG_METRICS_FLAG}: it serves no /metrics (HTTP 404), so neither "
                      f"the hook nor drain-sidecar can measure its work and a deletion cuts what runs; add "
                      f"{SGLANG_METRICS_FLAG} to its command")


def _runs_vllm(container: dict[str, Any], words: list[str]) -> bool:
    """`vllm serve` or vLLM's api_server module anywhere in the command (a shell's `-c` string
    included), or vllm/vllm-openai's image with no command of its own (its entrypoint is `vllm serve`)."""
    invocations = (engine_invocation(words[i:]) for i in range(len(words)))
    if any(found is not None and found[0] is EngineKind.VLLM for found in invocations):
        return True
    return not _strings(container.get("command")) and image_name(str(container.get("image", ""))).startswith(
        VLLM_IMAGE_PREFIX)


def _vllm_server_load(template: PodTemplate, container: dict[str, Any]) -> Iterator[Finding]:
    """A vLLM server's command without --enable-server-load-tracking (or with its negation last): its
    GET /load then answers 0 forever, and a request still in the API server (templating,
    tokenisation, a media fetch, a LoRA download) is in no signal the hook reads. A command with
    --config may set it in the file, which is not read here: no finding."""
    words = [word for arg in _argv(container) for word in arg.split()]
    if not _runs_vllm(container, words):
        return
    switches = [word for word in words if word in (VLLM_SERVER_LOAD_FLAG, VLLM_NO_SERVER_LOAD_FLAG)]
    given = {word.split("=", 1)[0] for word in words}
    if (switches[-1:] == [VLLM_SERVER_LOAD_FLAG]) or (not switches and VLLM_CONFIG_FLAG in given):
        return
    yield Finding(template.source, _name(container), "args",
                  f"vLLM runs without {VLLM_SERVER_LOAD_FLAG}: a request still in its API server (chat template, "
                  f"tokenisation, a media fetch) is counted by no gauge, so the hook can read idle twice while "
                  f"it is there and vLLM's SIGTERM then aborts it; add {VLLM_SERVER_LOAD_FLAG} to its command "
                  f"(its GET /load counts every request from its arrival)")


def _name(container: dict[str, Any]) -> str:
    return str(container.get("name", "unnamed"))


def _grace_words(template: PodTemplate) -> str:
    given = "" if template.grace_given else " (not set: Kubernetes' default)"
    return f"terminationGracePeriodSeconds is {template.grace_s}{given}"


def _http_hook(template: PodTemplate, container: dict[str, Any]) -> Iterator[Finding]:
    hook = hook_http(container)
    field = "lifecycle.preStop.httpGet"
    if hook.get("port") != SIDECAR_PORT:
        yield Finding(template.source, _name(container), f"{field}.port",
                      f"is {hook.get('port')!r}, not drain-sidecar's port {SIDECAR_PORT} by number (a named "
                      "port is looked up on this container, not the sidecar's)")
    match = _HTTP_GRACE.search(str(hook.get("path", "")))
    if match is None:
        yield Finding(template.source, _name(container), f"{field}.path",
                      f"no ?grace=: drain-sidecar refuses the drain (400) and SIGTERM follows at once; {_grace_words(template)}")
    elif match.group(1) != str(template.grace_s):
        yield Finding(template.source, _name(container), f"{field}.path",
                      f"grace={match.group(1)} but {_grace_words(template)}: the drain's deadline is not the Pod's")
    if not any(image_name(str(c.get("image", ""))) == SIDECAR_IMAGE_NAME for c in template.containers()):
        yield Finding(template.source, _name(container), f"{field}.path",
                      f"calls {DRAIN_PATH} but no container of the Pod runs drain-sidecar")


def _unhooked_engines(template: PodTemplate, hooked: list[dict[str, Any]]) -> Iterator[Finding]:
    """An engine whose container has no hook while another container has it: kubelet runs a
    preStop in its own container only, so the engine is sent SIGTERM with nothing drained."""
    for container, run in engine_containers(_dicts(template.spec.get("containers"))):
        if not any(container is other for other in hooked):
            names = ", ".join(_name(c) for c in hooked)
            yield Finding(template.source, _name(container), "lifecycle.preStop",
                          f"runs {run.kind.value} but has no drain hook, which is on {names}: kubelet runs a preStop "
                          "in its own container only, so this engine is sent SIGTERM with its requests running")


def _start_guard(template: PodTemplate, container: dict[str, Any]) -> Iterator[Finding]:
    hook = hook_command(container)[0]
    guard = _strings(_get(container, "lifecycle", "postStart", "exec", "command"))
    chained = len(guard) > 3 and guard[:3] == chained_start_guard(hook, [])
    if guard != [hook, "version"] and not chained:
        yield Finding(template.source, _name(container), "lifecycle.postStart.exec.command",
                      f"is {guard or 'absent'}, not [{hook!r}, 'version']: a hook that cannot run (no TMPDIR, "
                      "a wrong path) shows only when a deletion skips the drain, not at the Pod's start")


def _grace(template: PodTemplate, container: dict[str, Any]) -> Iterator[Finding]:
    command = hook_command(container)
    field = "lifecycle.preStop.exec.command"
    given = flag_value(command[1:], "--grace")
    if given is None:
        yield Finding(template.source, _name(container), field,
                      f"--grace missing: the hook assumes {DEFAULT_GRACE_S:g} s and {_grace_words(template)}; "
                      "the hook cannot read it, so repeat it")
        return
    try:
        value = float(given)
    except ValueError:
        yield Finding(template.source, _name(container), field, f"--grace {given!r} is not a number of seconds")
        return
    if value != template.grace_s:
        yield Finding(template.source, _name(container), field,
                      f"--grace {given} but {_grace_words(template)}: the drain ends at the wrong deadline")


def _annotations(template: PodTemplate, container: dict[str, Any]) -> Iterator[Finding]:
    command = hook_command(container)
    annotated = template.annotations.get(PORT_ANNOTATION)
    if annotated is None or flag_value(command[1:], "--port") is not None:
        return  # the hook reads its --port, or the engine's own argv
    path = flag_value(command[1:], "--annotations") or DEFAULT_ANNOTATIONS_FILE
    mount = _mount_holding(container, path)
    volumes = {str(v.get("name")): v for v in _dicts(template.spec.get("volumes"))}
    items = _dicts(_get(volumes.get(str(mount.get("name")) if mount else ""), "downwardAPI", "items"))
    wanted = posixpath.relpath(path, str(mount.get("mountPath"))) if mount else None
    if not any(_get(i, "fieldRef", "fieldPath") == "metadata.annotations" and i.get("path") == wanted for i in items):
        yield Finding(template.source, _name(container), "volumeMounts",
                      f"the Pod says {PORT_ANNOTATION}={annotated}, but no downwardAPI volume with metadata.annotations "
                      f"is mounted at {path}: the hook does not see it and reads the engine's own --port or its default")
    run = engine_run(container)
    engine_port = flag_value(list(run.argv) if run else _argv(container), "--port")
    if engine_port is not None and engine_port != annotated:
        yield Finding(template.source, _name(container), f"metadata.annotations[{PORT_ANNOTATION}]",
                      f"is {annotated} but the engine's command says --port {engine_port}: the hook reads the wrong port")


def _installed_volumes(template: PodTemplate) -> dict[str, str]:
    """volume name -> the directory an init container's `prestop install DIR` fills in it."""
    installs: dict[str, str] = {}
    for init in _dicts(template.spec.get("initContainers")):
        argv = _argv(init)
        if image_name(str(init.get("image", ""))) != PRESTOP_IMAGE_NAME or "install" not in argv:
            continue
        position = argv.index("install")
        if position + 1 >= len(argv):
            continue
        directory = argv[position + 1]
        mount = _mount_holding(init, directory)
        if mount is not None:
            installs[str(mount.get("name"))] = posixpath.join(
                "/", posixpath.relpath(directory, str(mount.get("mountPath"))))
    return installs


def _tmpdir(template: PodTemplate, container: dict[str, Any], installs: dict[str, str]) -> Iterator[Finding]:
    hook_dir = posixpath.dirname(hook_command(container)[0])
    env = _env(container, template)
    mount = _mount_holding(container, hook_dir) if hook_dir else None
    installed = mount is not None and str(mount.get("name")) in installs
    if installs and not installed:
        yield Finding(template.source, _name(container), "lifecycle.preStop.exec.command",
                      f"runs {hook_command(container)[0]}, which is in no volume the init container's `prestop install` "
                      "fills: the hook exists only in an image that carries it")
    read_only = _get(container, "securityContext", "readOnlyRootFilesystem") is True
    tmpdir = env.get("TMPDIR") or DEFAULT_TMPDIR
    writable = _mount_holding(container, tmpdir)
    if read_only and (writable is None or writable.get("readOnly") is True):
        where = f" (set it to {posixpath.join(hook_dir, 'tmp')!r}, which `prestop install` makes)" if installed else ""
        yield Finding(template.source, _name(container), "env[TMPDIR]",
                      f"the root filesystem is read-only and {tmpdir} (TMPDIR, else /tmp) is in no writable volume{where}: "
                      "the hook cannot unpack itself and fails (postStart, or a skipped drain)")


def _leader_token(template: PodTemplate, container: dict[str, Any]) -> Iterator[Finding]:
    command = hook_command(container)
    if not template.follows_a_leader or flag_value(command[1:], "--follow-leader") == "none":
        return
    token = flag_value(command[1:], "--leader-token-file")
    if token is None:
        yield Finding(template.source, _name(container), "lifecycle.preStop.exec.command",
                      "a LeaderWorkerSet worker follows its leader's drain-sidecar but has no --leader-token-file: "
                      "a sidecar with --token-file answers 401 and the worker cannot read its leader")
        return
    yield from _token_mounted(template, container, token, "--leader-token-file")


def _group_restart(template: PodTemplate) -> Iterator[Finding]:
    """Said once, on the worker: with None (or its old name Default) a worker Pod disrupted alone
    waits on a leader that is not draining."""
    policy = template.group_restart_policy
    if not template.follows_a_leader or policy is None or policy in GROUP_RESTART_POLICIES:
        return
    yield Finding(template.source, None, "spec.leaderWorkerTemplate.restartPolicy",
                  f"{policy}: a worker Pod deleted alone (evicted, its node drained) leaves its leader serving, so its "
                  "hook waits on a leader that is not draining, to G - 5, and its exit then breaks the leader's running "
                  "requests with nothing recreating the group; set RecreateGroupOnPodRestart (the API's default)")


def _sidecar_token(template: PodTemplate, container: dict[str, Any]) -> Iterator[Finding]:
    token = flag_value(_argv(container), "--token-file")
    if token is not None:
        yield from _token_mounted(template, container, token, "--token-file")


def _token_mounted(template: PodTemplate, container: dict[str, Any], token: str, flag: str) -> Iterator[Finding]:
    mount = _mount_holding(container, token)
    volumes = {str(v.get("name")): v for v in _dicts(template.spec.get("volumes"))}
    if mount is None or str(mount.get("name")) not in volumes:
        yield Finding(template.source, _name(container), "volumeMounts",
                      f"{flag} {token} is in no volume mounted into this container: the token file does not exist there")
