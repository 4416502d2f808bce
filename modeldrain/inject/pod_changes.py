"""One Pod template with modeldrain added: the hook on the container that runs the engine.

The engine container is found by what it runs (modeldrain/lint/engine_containers.py), wherever it
is in the list. Nothing the user wrote is dropped or overwritten: a preStop of their own, a
workload without a grace, a name or path already taken, a scrape port that disagrees with the
engine's are refusals, one line each; their postStart is kept, run after `prestop version`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from modeldrain.hook.annotations import PORT_ANNOTATION
from modeldrain.hook.flags import parse_port
from modeldrain.hook.gauges import DEFAULT_PORTS, EngineKind
from modeldrain.inject import pieces
from modeldrain.lint.engine_containers import EngineRun, container_argv, engine_containers
from modeldrain.lint.manifest_rules import (
    VLLM_CONFIG_FLAG,
    VLLM_NO_SERVER_LOAD_FLAG,
    VLLM_SERVER_LOAD_FLAG,
    chained_start_guard,
    flag_value,
    hook_command,
    hook_http,
)

__all__ = ["Injected", "LeftAlone", "Options", "Refused", "count_api_server_requests", "inject"]


class Refused(Exception):
    """A template the injector will not change: one line naming the workload and what is in the way."""


@dataclass(frozen=True)
class Options:
    image: str
    sidecar_image: str | None = None  # --sidecar: drain-sidecar beside the hook
    grace: int | None = None  # for a Pod template that sets no terminationGracePeriodSeconds


@dataclass(frozen=True)
class Injected:
    engine: EngineRun
    image: str  # the engine container's
    port: int
    grace: int


@dataclass(frozen=True)
class LeftAlone:
    note: str  # for stderr; "" when it already carries modeldrain


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _list(owner: dict[str, Any], key: str) -> list[Any]:
    value = owner.get(key)
    if value is None:
        value = owner[key] = []
    if not isinstance(value, list):
        raise Refused(f"{key} is {type(value).__name__}, not a list")
    return value


def _mapping(owner: dict[str, Any], key: str) -> dict[str, Any]:
    value = owner.get(key)
    if value is None:
        value = owner[key] = {}
    if not isinstance(value, dict):
        raise Refused(f"{key} is {type(value).__name__}, not a mapping")
    return value


def inject(template: dict[str, Any], where: str, options: Options, lws: bool = False, lws_worker: bool = False,
           annotate: bool = True, leader: Injected | None = None) -> Injected | LeftAlone:
    """Add the hook (and, with a sidecar image, drain-sidecar) to one Pod template, in place.
    `lws_worker`: its hook follows the leader's sidecar, with the token; `annotate`: it serves the
    replica's metrics (a LeaderWorkerSet's workers do not); `leader`: what the leader's engine
    container is, for workers that run what the leader starts in them (a Ray worker)."""
    spec = template.get("spec")
    if not isinstance(spec, dict):
        raise Refused(f"{where}: no Pod template (spec) to read")
    for owner, key in ((template, "metadata"), (template.get("metadata") or {}, "annotations"),
                       (template.get("metadata") or {}, "labels")):
        if isinstance(owner, dict) and owner.get(key) is not None and not isinstance(owner.get(key), dict):
            raise Refused(f"{where}: {key} is {type(owner[key]).__name__}, not a mapping")
    containers = _dicts(spec.get("containers"))
    if any(hook_command(c) or hook_http(c) for c in containers):
        return LeftAlone("")  # already carries a drain hook: idempotent
    engines = engine_containers(containers)
    if not engines and leader is not None:
        # vLLM's multi-node workers run a Ray worker the leader's engine fills: their engine
        # container is the one that runs the leader's engine image, where exactly one does.
        same = [c for c in containers if c.get("image") == leader.image]
        engines = [(same[0], EngineRun(leader.engine.kind, tuple(container_argv(same[0]))))] if len(same) == 1 else []
    if not engines:
        return LeftAlone(f"{where}: left alone: no container runs vLLM or SGLang (vllm serve, python -m "
                         "vllm.entrypoints..., python -m sglang.launch_server, or one of them under sh -c)")
    if len(engines) > 1:
        names = " and ".join(str(c.get("name")) for c, _ in engines)
        return LeftAlone(f"{where}: left alone: containers {names} each run an engine; one drain hook cannot "
                         "stand for two (split them into Pods of their own)")
    (container, run), = engines
    name = str(container.get("name", "unnamed"))
    grace = _grace(spec, where, options)
    port = _port(template, container, run, where, name)
    post_start = _post_start(container, where, name)
    _check_free(spec, container, where, name, bool(options.sidecar_image))
    _tmpdir(container, where, name)
    try:
        return _change(template, spec, container, run, options, grace, port, post_start, lws, lws_worker, annotate)
    except Refused as exc:
        raise Refused(f"{where}: container {name}: {exc}") from None


def _change(template: dict[str, Any], spec: dict[str, Any], container: dict[str, Any], run: EngineRun,
            options: Options, grace: int, port: int, post_start: list[str], lws: bool, lws_worker: bool,
            annotate: bool) -> Injected:
    """The template changed in place, once nothing is refused."""
    if "terminationGracePeriodSeconds" not in spec:
        spec["terminationGracePeriodSeconds"] = grace
    metadata = _mapping(template, "metadata")
    if annotate:
        annotations = _mapping(metadata, "annotations")
        for key, value in pieces.scrape_annotations(port).items():
            annotations.setdefault(key, value)
    inits = [pieces.install_container(options.image)]
    volumes = pieces.hook_volumes()
    mounts = pieces.hook_mounts()
    if options.sidecar_image:
        _mapping(metadata, "labels")[pieces.SIDECAR_LABEL] = "true"
        inits.append(pieces.sidecar_container(options.sidecar_image, grace, run.kind.value, lws))
        volumes += pieces.sidecar_volumes()
    if lws_worker:
        mounts.append(pieces.token_mount())  # its hook follows the leader's sidecar, with the token
    spec["initContainers"] = inits + _list(spec, "initContainers")
    _list(spec, "volumes").extend(volumes)
    _list(container, "volumeMounts").extend(mounts)
    if run.kind is EngineKind.VLLM:
        count_api_server_requests(container, run)
    lifecycle = _mapping(container, "lifecycle")
    lifecycle["postStart"] = {"exec": {"command": post_start}}
    lifecycle["preStop"] = {"exec": {"command": pieces.prestop_command(grace, lws_worker)}}
    return Injected(run, str(container.get("image", "")), port, grace)


def _grace(spec: dict[str, Any], where: str, options: Options) -> int:
    grace = spec.get("terminationGracePeriodSeconds")
    if grace is None:
        if options.grace is None:
            raise Refused(f"{where}: sets no terminationGracePeriodSeconds, and the hook must repeat it: set one "
                          "(docs/prestop.md, \"Choosing G\"), or give --grace SECONDS to write it")
        return options.grace
    if not isinstance(grace, int) or isinstance(grace, bool) or grace < 1:
        raise Refused(f"{where}: terminationGracePeriodSeconds is {grace!r}, not a whole number of seconds >= 1")
    return grace


def _port(template: dict[str, Any], container: dict[str, Any], run: EngineRun, where: str, name: str) -> int:
    """Where the engine serves: its --port, else the port it declares, else its default."""
    metadata = template.get("metadata")
    annotated = metadata.get("annotations") if isinstance(metadata, dict) else None
    said = annotated.get(PORT_ANNOTATION) if isinstance(annotated, dict) else None
    flag = flag_value(list(run.argv), "--port")
    port: int | None = None
    if flag is not None:
        try:
            port = parse_port(flag)
        except ValueError:
            if said is None:
                raise Refused(f"{where}: container {name}'s --port is {flag!r}, which is read only when it runs: "
                              f"annotate the template with {PORT_ANNOTATION}") from None
    if port is None:
        declared = [p.get("containerPort") for p in _dicts(container.get("ports"))]
        port = declared[0] if declared and isinstance(declared[0], int) else None
    if port is None and said is not None:
        return _said_port(said, where)
    if port is None:
        port = DEFAULT_PORTS[run.kind]
    if said is not None and str(said) != str(port):
        raise Refused(f"{where}: {PORT_ANNOTATION} is {said} but container {name} serves on {port}: the hook "
                      "would read the wrong port; correct one of them")
    return port


def _said_port(said: Any, where: str) -> int:
    try:
        return parse_port(str(said))
    except ValueError:
        raise Refused(f"{where}: {PORT_ANNOTATION} is {said!r}, not a port") from None


def _post_start(container: dict[str, Any], where: str, name: str) -> list[str]:
    lifecycle = container.get("lifecycle") or {}
    if not isinstance(lifecycle, dict):
        raise Refused(f"{where}: container {name}'s lifecycle is not a mapping")
    if lifecycle.get("preStop") is not None:
        raise Refused(f"{where}: container {name} already has a preStop hook of its own: a container has one, and "
                      "modeldrain's would replace it (run yours from a wrapper, or drop it), so it is left to you")
    post_start = lifecycle.get("postStart")
    if post_start is None:
        return [pieces.HOOK, "version"]
    run = post_start.get("exec") if isinstance(post_start, dict) else None
    theirs = run.get("command") if isinstance(run, dict) else None
    if not isinstance(post_start, dict) or set(post_start) != {"exec"} or not isinstance(theirs, list) or not theirs:
        raise Refused(f"{where}: container {name} has a postStart hook that is not an exec command: it cannot run "
                      f"after {pieces.HOOK} version (the start guard) in one hook")
    return chained_start_guard(pieces.HOOK, [str(word) for word in theirs])


def _check_free(spec: dict[str, Any], container: dict[str, Any], where: str, name: str, sidecar: bool) -> None:
    """Every name and path the injector adds is not already someone else's."""
    volumes = {pieces.DRAIN_VOLUME, pieces.PODINFO_VOLUME}
    inits = {pieces.INSTALL_CONTAINER}
    if sidecar:
        volumes |= {pieces.SIDECAR_TMP_VOLUME, pieces.TOKEN_VOLUME}
        inits.add(pieces.SIDECAR_CONTAINER)
    taken = volumes & {str(v.get("name")) for v in _dicts(spec.get("volumes"))}
    taken |= inits & {str(c.get("name")) for c in _dicts(spec.get("initContainers")) + _dicts(spec.get("containers"))}
    paths = {pieces.DRAIN_DIR, pieces.PODINFO_DIR}
    taken |= paths & {str(m.get("mountPath", "")).rstrip("/") for m in _dicts(container.get("volumeMounts"))}
    if taken:
        raise Refused(f"{where}: {', '.join(sorted(taken))} already taken in the Pod (container {name}): "
                      "the injector adds these names and paths, and never renames yours")


def _tmpdir(container: dict[str, Any], where: str, name: str) -> None:
    """TMPDIR only where the hook needs it: on a read-only root with no writable /tmp. A stock
    engine container (writable root) keeps its own /tmp for its own temporary files."""
    security = container.get("securityContext") or {}
    if not (isinstance(security, dict) and security.get("readOnlyRootFilesystem") is True):
        return
    given = [e for e in _dicts(container.get("env")) if e.get("name") == "TMPDIR"]
    tmpdir = str(given[-1].get("value", "")) if given else "/tmp"
    if given and "valueFrom" in given[-1]:
        raise Refused(f"{where}: container {name}'s TMPDIR comes from valueFrom on a read-only root: the injector "
                      "cannot tell whether the hook can unpack there")
    mounts = [m for m in _dicts(container.get("volumeMounts")) if m.get("readOnly") is not True]
    if any(tmpdir == str(m.get("mountPath", "")).rstrip("/") or tmpdir.startswith(str(m.get("mountPath", "")).rstrip("/") + "/")
           for m in mounts):
        return
    if given:
        raise Refused(f"{where}: container {name} has a read-only root and TMPDIR={tmpdir} in no writable volume: the "
                      "hook could not unpack itself (nor could the engine write there)")
    try:
        _list(container, "env").append({"name": "TMPDIR", "value": pieces.HOOK_TMPDIR})
    except Refused as exc:
        raise Refused(f"{where}: container {name}: {exc}") from None





def count_api_server_requests(container: dict[str, Any], run: EngineRun) -> None:
    """vLLM's --enable-server-load-tracking, added to the engine's own words: without it a request
    still in the API server is in no signal the hook reads (`modeldrain lint` says so). Left alone:
    a command that says either way, a --config that may set it, the image's own entrypoint (no
    words here), and an `sh -c` script whose last words are not the engine's (or that has a comment):
    there lint names the flag for the user to add."""
    words = [str(word) for key in ("command", "args") for word in _list_or_none(container.get(key))]
    said = {word.split("=", 1)[0] for word in run.argv}
    if said & {VLLM_SERVER_LOAD_FLAG, VLLM_NO_SERVER_LOAD_FLAG, VLLM_CONFIG_FLAG} or not words:
        return
    if run.argv[-len(words):] == tuple(words):  # the engine's words are the container's (after its image's entrypoint)
        key = "args" if "args" in container else "command"
        _list(container, key).append(VLLM_SERVER_LOAD_FLAG)
        return
    for key in ("args", "command"):  # an `sh -c SCRIPT` whose last command is the engine's
        if not isinstance(container.get(key), list):
            continue
        items = _list(container, key)
        for index, item in enumerate(items):
            if isinstance(item, str) and _ends_with(item, run.argv):
                items[index] = item.rstrip() + " " + VLLM_SERVER_LOAD_FLAG
                return


def _ends_with(script: str, argv: tuple[str, ...]) -> bool:
    """Whether `script`'s last words, as the shell splits them, are `argv` (no comment, nothing after)."""
    if "#" in script or not argv:
        return False
    try:
        words = shlex.split(script)
    except ValueError:
        return False
    return tuple(words[-len(argv):]) == argv and not script.rstrip().endswith(("\\", "&", ";", "|"))


def _list_or_none(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
