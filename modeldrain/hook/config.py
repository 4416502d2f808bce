"""Command-line flags, validated once at start into frozen values.

Past this module nothing raises for bad input. Flags that are wrong are a usage error (exit
2). What the Pod says (annotations) is never allowed to skip a drain: a bad annotation is
logged as a warning and the next source is used, since a hook that exits at once cuts every
running request.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, replace
from functools import partial
from typing import Callable, Mapping, TypeVar

from modeldrain.hook import constants
from modeldrain.hook.annotations import (
    PATH_ANNOTATION,
    PORT_ANNOTATION,
    SCHEME_ANNOTATION,
    AnnotationsError,
    default_annotations_file,
    read_annotations,
)
from modeldrain.hook.constants import LWS_LEADER_ADDRESS_ENV
from modeldrain.hook.engine import EngineHint, default_proc_root, engine_processes, hint_of
from modeldrain.hook.events import CONTAINER_LOG
from modeldrain.hook.flags import (
    arg,
    parse_engine,
    parse_path,
    parse_port,
    parse_role,
    parse_scheme,
    seconds_arg,
    whole_number_arg,
)
from modeldrain.hook.gauges import DEFAULT_METRICS_PATH, DEFAULT_PORTS, EngineKind
from modeldrain.hook.leader import LEADER_MEMORY_PATH, LeaderConfig, leader_from_env, parse_leader_url
from modeldrain.hook.listeners import Listener, ListenerError, engine_listeners
from modeldrain.hook.settings import DrainConfig, ReadConfig
from modeldrain.hook.target import UNKNOWN_PORT_SOURCE, Target, engine_hosts, on_hosts, usable_host
from modeldrain.hook.token import read_token

__all__ = [
    "add_drain_flags", "add_leader_flags", "add_target_flags", "resolve_drain_config", "resolve_leader",
    "resolve_read_config",
]

T = TypeVar("T")


def add_target_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that say where the engine is and what it runs (the sidecar takes the same)."""
    group = parser.add_argument_group("engine target (default: the Pod's scrape annotations, then the engine's own)")
    group.add_argument("--port", type=arg(lambda text: parse_port(text, what="--port")), help="engine /metrics port on loopback")
    group.add_argument("--path", type=arg(lambda text: parse_path(text, what="--path")), help=f"metrics path (default {DEFAULT_METRICS_PATH})")
    group.add_argument("--scheme", type=arg(lambda text: parse_scheme(text, what="--scheme")), help="http or https (https is not verified: loopback)")
    group.add_argument("--annotations", metavar="FILE",
                       help="downward-API annotations file (default /etc/podinfo/annotations when it exists)")
    group.add_argument("--engine", type=arg(parse_engine), help="vllm or sglang (default: detected)")
    group.add_argument("--disaggregation-mode", dest="role", type=arg(parse_role),
                       help="null (unified), prefill or decode (default: detected)")
    group.add_argument("--read-timeout", type=seconds_arg("--read-timeout", inclusive=False),
                       default=constants.READ_TIMEOUT_S, metavar="SECONDS",
                       help=f"bound on one read (default {constants.READ_TIMEOUT_S:g})")
    group.add_argument("--max-body-bytes", type=whole_number_arg("--max-body-bytes", minimum=1), default=constants.MAX_BODY_BYTES, metavar="BYTES",
                       help=f"a larger body counts as busy (default {constants.MAX_BODY_BYTES})")
    # Tests only: where the engine's argv is read (default $MODELDRAIN_PROC_ROOT, else /proc).
    group.add_argument("--proc-root", default=default_proc_root(), help=argparse.SUPPRESS)


FOLLOW_PURPOSE = "wait on the leader's drain-sidecar (http://HOST[:PORT]) instead of the local engine"


def add_leader_flags(parser: argparse._ActionsContainer, purpose: str = FOLLOW_PURPOSE) -> None:
    """Which leader a worker follows (the drain, `prestop check` and the worker's sidecar take the same)."""
    parser.add_argument("--follow-leader", metavar="URL", type=arg(_follow_leader),
                        help=f"a worker of a multi-Pod replica: {purpose}; default on for a LeaderWorkerSet worker "
                        "(LWS_WORKER_INDEX > 0) "
                        f"from {LWS_LEADER_ADDRESS_ENV} and port {constants.SIDECAR_PORT}; 'none' turns it off")
    parser.add_argument("--leader-token-file", metavar="FILE", type=arg(_leader_token_file),
                        help="bearer token for the leader's drain-sidecar (its --token-file); read at start with "
                        "the sidecar's own rule, so a file it would refuse is a usage error here")


def _leader_token_file(path: str) -> str:
    """--leader-token-file: a file holding a token the sidecar would accept, checked at start."""
    read_token(path)
    return path


OWN_SIDECAR_URL = f"http://127.0.0.1:{constants.SIDECAR_PORT}{LEADER_MEMORY_PATH}"


def add_drain_flags(parser: argparse.ArgumentParser) -> None:
    add_leader_flags(parser)
    parser.add_argument("--own-sidecar", metavar="URL", type=arg(_own_sidecar), default=_own_sidecar(OWN_SIDECAR_URL),
                        help="a worker: this Pod's own drain-sidecar, asked at the start which leader it saw answer, "
                        "so that a leader deleted before the worker reads as gone, not unknown (default "
                        f"{OWN_SIDECAR_URL}, with --leader-token-file's token; 'none' turns it off)")
    # No default here: a grace not given is said at start (DrainConfig.grace_given), then assumed.
    parser.add_argument("--grace", type=seconds_arg("--grace", inclusive=False), default=None,
                        metavar="SECONDS",
                        help=f"the Pod's terminationGracePeriodSeconds (default {constants.DEFAULT_GRACE_S:g})")
    parser.add_argument("--route-wait", type=seconds_arg("--route-wait"), default=constants.ROUTE_WAIT_S,
                        metavar="SECONDS", help=f"wait before the first read (default {constants.ROUTE_WAIT_S:g})")
    parser.add_argument("--exit-reserve", type=seconds_arg("--exit-reserve"), metavar="SECONDS",
                        help=f"return this long before the grace ends (default {constants.EXIT_RESERVE_S:g}; "
                        f"{constants.SPLIT_ROLE_EXIT_RESERVE_S:g} for an SGLang prefill or decode server)")
    parser.add_argument("--interval", type=seconds_arg("--interval", inclusive=False), default=constants.POLL_INTERVAL_S,
                        metavar="SECONDS", help=f"time between reads (default {constants.POLL_INTERVAL_S:g})")
    parser.add_argument("--busy-interval", type=seconds_arg("--busy-interval", inclusive=False),
                        default=constants.BUSY_POLL_INTERVAL_S, metavar="SECONDS",
                        help=f"time between reads while work is in flight (default {constants.BUSY_POLL_INTERVAL_S:g})")
    parser.add_argument("--quiet", action="store_true",
                        help="do not mirror the log lines to the container's log (PID 1's stdout); never mirrored "
                        "when run from an interactive terminal")
    parser.add_argument("--log-mirror", default=CONTAINER_LOG, help=argparse.SUPPRESS)  # tests: a file
    parser.add_argument("--sidecar-report", type=arg(lambda text: parse_port(text, what="--sidecar-report",
                                                                            allow_zero=True)),
                        default=constants.SIDECAR_PORT, metavar="PORT",
                        help="tell the Pod's drain-sidecar on 127.0.0.1:PORT that this drain started and how it "
                        "ended, best effort: the end is given up after 0.1 s; 0: tell no one "
                        f"(default {constants.SIDECAR_PORT})")


class _Annotations:
    """The Pod's scrape annotations; a value that does not parse is a warning, never an error."""

    def __init__(self, path: str | None, warnings: list[str]):
        self._values: dict[str, str] = {}
        self._warnings = warnings
        if path:
            try:
                self._values = read_annotations(path)
            except AnnotationsError as exc:
                warnings.append(f"annotations ignored: {exc}")

    def get(self, key: str, parse: Callable[[str], T]) -> T | None:
        if key not in self._values:
            return None
        try:
            return parse(self._values[key])
        except ValueError as exc:
            self._warnings.append(f"annotation {key} ignored: {exc}")
            return None


def _resolve_port(flag: int | None, annotated: int | None, hint: EngineHint, warnings: list[str], *,
                  listening: bool) -> tuple[int, str]:
    """The engine's port and where it came from: flag, annotation, the engine's argv, default; or
    its default with UNKNOWN_PORT_SOURCE where the engine's argv is seen but its port cannot be read.
    That default is a guess, said in one line, only where the engine holds no listener the kernel
    shows (`listening` false): where it does, the listeners say the port (_on_listeners)."""
    if flag is not None:
        return flag, "flag"
    if annotated is not None:
        if hint.port is not None and hint.port != annotated:
            warnings.append(f"annotation {PORT_ANNOTATION}={annotated} but the engine's argv says --port {hint.port}")
        return annotated, "annotation"
    if hint.port is not None:
        return hint.port, "cmdline"
    if hint.port_unknown is not None:
        port = DEFAULT_PORTS[hint.kind or EngineKind.VLLM]
        if listening:
            return port, UNKNOWN_PORT_SOURCE
        warnings.append(f"the engine's port is not known ({hint.port_unknown}): reading its default port {port}, "
                        "where no answer is taken for idle and no refusal for 'nothing listens'; give the port "
                        f"(--port or the {PORT_ANNOTATION} annotation) for the drain to end on idle")
        return port, UNKNOWN_PORT_SOURCE
    if hint.kind is None:
        warnings.append("engine not detected and no port given: using vLLM's default port")
    return DEFAULT_PORTS[hint.kind or EngineKind.VLLM], "default"


def resolve_read_config(args: argparse.Namespace) -> ReadConfig:
    """Flags, then the Pod's annotations, then the engine's argv, then the engine's defaults; then
    where the engine's processes really listen (hook.listeners) decides among those, and the
    container's other engines are read too."""
    warnings: list[str] = []
    flag_hint = EngineHint(kind=args.engine, role=args.role, source="flag" if args.engine else "none")
    annotations = _Annotations(args.annotations or default_annotations_file(), warnings)
    annotated = annotations.get(PORT_ANNOTATION, parse_port)
    engines = _engines_listening(args.proc_root, warnings)
    named = args.port if args.port is not None else annotated
    primary = next((e for e in engines if named is not None and any(l.port == named for l in e.listeners)),
                   engines[0] if engines else None)
    own = hint_of({primary.hint: list(primary.pids)}, args.proc_root) if primary else EngineHint()
    hint = flag_hint.merged(own)
    listening = primary is not None and bool(primary.listeners)
    port, port_source = _resolve_port(args.port, annotated, hint, warnings, listening=listening)
    metrics_path = args.path or annotations.get(PATH_ANNOTATION, parse_path) or DEFAULT_METRICS_PATH
    own_scheme = "https" if hint.tls else "http"
    scheme = args.scheme or annotations.get(SCHEME_ANNOTATION, parse_scheme) or own_scheme
    place = partial(ReadConfig, read_timeout_s=args.read_timeout, max_body_bytes=args.max_body_bytes)
    target = Target(scheme=scheme, port=port, path=metrics_path, source=port_source)
    if primary is not None and listening:
        targets, others = _on_listeners(primary, target, hint, place, warnings)
    else:
        targets, others = on_hosts(target, engine_hosts(hint.host)), []
        if hint.port is not None and hint.port != port:  # where its own --port puts it, should the target refuse
            targets += on_hosts(Target(own_scheme, hint.port, metrics_path, source="cmdline"), engine_hosts(hint.host))
    for engine in engines:
        if engine is not primary:
            others += _other_engine(engine, metrics_path, args.proc_root, place)
    if others:
        warnings.append(f"{len(others) + 1} engine listeners in this container ({', '.join(_where(c) for c in others)} "
                        f"besides {targets[0].netloc}): each is read, and no read is idle while one of them is not")
    return place(
        target=targets[0],
        alternates=targets[1:],
        others=tuple(others),
        hint=hint,
        warnings=tuple(warnings + _argv_warnings(hint, targets[0].source) + _where_warnings(hint)),
    )


def _argv_warnings(hint: EngineHint, port_source: str) -> list[str]:
    """What of the engine's argv could not be followed; where the port is unknown, its one line
    (_resolve_port's) already says why, and a warning giving the same reason is not said twice."""
    if port_source != UNKNOWN_PORT_SOURCE or hint.port_unknown is None:
        return list(hint.warnings)
    return [w for w in hint.warnings if hint.port_unknown not in w]



def _on_listeners(engine: "_EngineListening", target: Target, hint: EngineHint, place: Callable[..., ReadConfig],
                  warnings: list[str]) -> tuple[tuple[Target, ...], list[ReadConfig]]:
    """`target` moved to where the engine listens (_listener_ports), on each of its hosts in order;
    and the engine's other listeners to read too, where none is known to be the metrics port."""
    ports = _listener_ports(engine, target.port, target.source, warnings)
    if ports[0] != target.port or target.source in ("default", UNKNOWN_PORT_SOURCE):
        target = replace(target, port=ports[0], source="listener")
    others = []
    for other_port in ports[1:]:
        other = on_hosts(replace(target, port=other_port), _listener_hosts(engine.listeners, other_port))
        others.append(place(target=other[0], alternates=other[1:], hint=hint))
    return on_hosts(target, _listener_hosts(engine.listeners, target.port)), others


@dataclass(frozen=True)
class _EngineListening:
    """One engine the process table shows, its processes, and where the kernel says they listen
    (() when they hold no listener, or it could not be read: a warning says which)."""

    hint: EngineHint
    pids: tuple[str, ...]
    listeners: tuple[Listener, ...]


def _engines_listening(proc_root: str, warnings: list[str]) -> list[_EngineListening]:
    """Every engine of the process table with its listeners, those that listen first, by port."""
    found = []
    for hint, pids in engine_processes(proc_root).items():
        try:
            listeners = engine_listeners(proc_root, pids)
        except ListenerError as exc:
            warnings.append(f"where the engine (PID {', '.join(pids)}) listens cannot be read ({exc}): "
                            "reading where its flags say")
            listeners = ()
        found.append(_EngineListening(hint, tuple(pids), listeners))
    return sorted(found, key=lambda e: (not e.listeners, min((l.port for l in e.listeners), default=0)))


def _listener_ports(engine: _EngineListening, port: int, source: str, warnings: list[str]) -> list[int]:
    """Which of the engine's listening ports serve /metrics: the one the sources name, when the
    engine listens there; else the engine's own --port or default port; else the only one; else
    every one of them (each read: none of them is known not to be the metrics port)."""
    listening = sorted({listener.port for listener in engine.listeners})
    if port in listening:
        return [port]
    kind = engine.hint.kind or EngineKind.VLLM
    chosen = next((p for p in (engine.hint.port, DEFAULT_PORTS[kind]) if p in listening), None)
    ports = [chosen] if chosen is not None else listening
    if source not in ("default", UNKNOWN_PORT_SOURCE):
        named = {"flag": "--port", "annotation": f"annotation {PORT_ANNOTATION}", "cmdline": "the engine's argv"}[source]
        warnings.append(f"{named} names port {port}, but the engine's processes listen on "
                        f"{', '.join(l.where for l in engine.listeners)} (the kernel's sockets): "
                        f"reading {', '.join(str(p) for p in ports)}")
    return ports


def _listener_hosts(listeners: tuple[Listener, ...], port: int) -> tuple[str, ...]:
    """Where the engine's sockets on `port` are read, in order: IPv4 ones first, each host once."""
    hosts: list[str] = []
    for listener in listeners:
        if listener.port == port:
            hosts += [host for host in listener.hosts() if host not in hosts]
    return tuple(hosts)


def _other_engine(engine: _EngineListening, metrics_path: str, proc_root: str,
                  place: Callable[..., ReadConfig]) -> list[ReadConfig]:
    """Another engine of the container, read where it listens (by the rule of _listener_ports), or,
    where that is unknown, where its flags say."""
    hint = hint_of({engine.hint: list(engine.pids)}, proc_root)
    kind = hint.kind or EngineKind.VLLM
    scheme = "https" if hint.tls else "http"
    if not engine.listeners:
        port, source = (hint.port, "cmdline") if hint.port is not None else (
            DEFAULT_PORTS[kind], UNKNOWN_PORT_SOURCE if hint.port_unknown is not None else "default")
        targets = on_hosts(Target(scheme, port, metrics_path, source=source), engine_hosts(hint.host))
        return [place(target=targets[0], alternates=targets[1:], hint=hint)]
    configs = []
    for port in _listener_ports(engine, DEFAULT_PORTS[kind], "default", []):
        targets = on_hosts(Target(scheme, port, metrics_path, source="listener"), _listener_hosts(engine.listeners, port))
        configs.append(place(target=targets[0], alternates=targets[1:], hint=hint))
    return configs


def _where(config: ReadConfig) -> str:
    return config.target.netloc


def _where_warnings(hint: EngineHint) -> list[str]:
    """What the engine's argv says about where it serves that the hook cannot follow."""
    warnings = []
    if hint.uds is not None:
        warnings.append(f"the engine serves on the Unix socket {hint.uds} (vLLM --uds), on no TCP port: the hook "
                        "cannot read its /metrics, so every read is refused and the drain ends unmeasurable "
                        "(exit 11); serve on a port (drop --uds) for the hook to wait on its requests")
    if hint.host is not None and usable_host(hint.host) is None:
        warnings.append(f"the engine's --host {hint.host!r} is neither an address nor a name: reading loopback only")
    return warnings


def _own_sidecar(text: str) -> Target | None:
    """--own-sidecar: this Pod's drain-sidecar URL, or 'none' (None)."""
    if text.strip().lower() == "none":
        return None
    return parse_leader_url(text, what="--own-sidecar", default_path=LEADER_MEMORY_PATH)


def _follow_leader(text: str) -> Target | bool:
    """--follow-leader: the leader's sidecar URL, or 'none' (False): never follow."""
    return False if text.strip().lower() == "none" else parse_leader_url(text)


def resolve_leader(args: argparse.Namespace, env: Mapping[str, str], warnings: list[str]) -> LeaderConfig | None:
    """--follow-leader URL (or none), else a LeaderWorkerSet worker's leader."""
    if isinstance(args.follow_leader, Target):
        return LeaderConfig(args.follow_leader, args.leader_token_file, "--follow-leader")
    if args.follow_leader is False:
        return None
    try:
        target = leader_from_env(env)
    except ValueError as exc:
        warnings.append(f"not following the leader: {exc}")
        return None
    if target is None:
        return None
    return LeaderConfig(target, args.leader_token_file, "LeaderWorkerSet (LWS_WORKER_INDEX > 0)")


def resolve_drain_config(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> DrainConfig:
    warnings: list[str] = []
    leader = resolve_leader(args, os.environ if env is None else env, warnings)
    return DrainConfig(
        read=resolve_read_config(args),
        leader=leader,
        warnings=tuple(warnings),
        grace_s=constants.DEFAULT_GRACE_S if args.grace is None else args.grace,
        grace_given=args.grace is not None,
        route_wait_s=args.route_wait,
        exit_reserve_s=args.exit_reserve,
        interval_s=args.interval,
        busy_interval_s=args.busy_interval,
        own_sidecar=args.own_sidecar,
    )
