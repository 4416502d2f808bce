"""Command-line flags, validated once at start into frozen values.

Past this module nothing raises for bad input. Flags that are wrong are a usage error (exit
2). What the Pod says (annotations) is never allowed to skip a drain: a bad annotation is
logged as a warning and the next source is used, since a hook that exits at once cuts every
running request.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
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
from modeldrain.hook.engine import EngineHint, default_proc_root, hint_from_proc
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
from modeldrain.hook.leader import LeaderConfig, leader_from_env, parse_leader_url
from modeldrain.hook.target import Target, engine_hosts, on_hosts, usable_host
from modeldrain.hook.token import read_token

T = TypeVar("T")


@dataclass(frozen=True)
class ReadConfig:
    """Where and how to read the engine: shared by `prestop`, `prestop check` and the sidecar."""

    target: Target
    hint: EngineHint
    read_timeout_s: float
    max_body_bytes: int
    warnings: tuple[str, ...] = ()
    # Where else the engine can be, in order, when the target refuses (hook.reader.EngineReader):
    # the other loopback addresses and the engine's own --host, then the engine's own --port.
    alternates: tuple[Target, ...] = ()


@dataclass(frozen=True)
class DrainConfig:
    read: ReadConfig
    leader: LeaderConfig | None  # a worker Pod: wait on the leader's drain-sidecar, not the local engine
    grace_s: float
    route_wait_s: float
    exit_reserve_s: float | None  # None: by the engine's role (hook.decision.exit_reserve_for)
    interval_s: float
    busy_interval_s: float
    warnings: tuple[str, ...] = ()
    grace_given: bool = True  # False: --grace was not given and grace_s is DEFAULT_GRACE_S, assumed
    grace_flag: str = "--grace"  # what gave it, for drain_started (the sidecar's /v1/drain: ?grace=)


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


def add_leader_flags(parser: argparse.ArgumentParser) -> None:
    """Which leader a worker follows (the drain and `prestop check` take the same)."""
    parser.add_argument("--follow-leader", metavar="URL", type=arg(_follow_leader),
                        help="a worker of a multi-Pod replica: wait on the leader's drain-sidecar (http://HOST[:PORT]) "
                        "instead of the local engine; default on for a LeaderWorkerSet worker (LWS_WORKER_INDEX > 0) "
                        f"from {LWS_LEADER_ADDRESS_ENV} and port {constants.SIDECAR_PORT}; 'none' turns it off")
    parser.add_argument("--leader-token-file", metavar="FILE", type=arg(_leader_token_file),
                        help="bearer token for the leader's drain-sidecar (its --token-file); read at start with "
                        "the sidecar's own rule, so a file it would refuse is a usage error here")


def _leader_token_file(path: str) -> str:
    """--leader-token-file: a file holding a token the sidecar would accept, checked at start."""
    read_token(path)
    return path


def add_drain_flags(parser: argparse.ArgumentParser) -> None:
    add_leader_flags(parser)
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


def _resolve_port(flag: int | None, annotations: _Annotations, hint: EngineHint,
                  warnings: list[str]) -> tuple[int, str]:
    """The engine's port and where it came from: flag, annotation, the engine's argv, default."""
    if flag is not None:
        return flag, "flag"
    annotated = annotations.get(PORT_ANNOTATION, parse_port)
    if annotated is not None:
        if hint.port is not None and hint.port != annotated:
            warnings.append(f"annotation {PORT_ANNOTATION}={annotated} but the engine's argv says --port {hint.port}")
        return annotated, "annotation"
    if hint.port is not None:
        return hint.port, "cmdline"
    if hint.kind is None:
        warnings.append("engine not detected and no port given: using vLLM's default port")
    return DEFAULT_PORTS[hint.kind or EngineKind.VLLM], "default"


def resolve_read_config(args: argparse.Namespace) -> ReadConfig:
    """Flags, then the Pod's annotations, then the engine's argv, then the engine's defaults."""
    warnings: list[str] = []
    flag_hint = EngineHint(kind=args.engine, role=args.role, source="flag" if args.engine else "none")
    hint = flag_hint.merged(hint_from_proc(args.proc_root))
    annotations = _Annotations(args.annotations or default_annotations_file(), warnings)
    port, port_source = _resolve_port(args.port, annotations, hint, warnings)
    metrics_path = args.path or annotations.get(PATH_ANNOTATION, parse_path) or DEFAULT_METRICS_PATH
    own_scheme = "https" if hint.tls else "http"
    scheme = args.scheme or annotations.get(SCHEME_ANNOTATION, parse_scheme) or own_scheme
    target = Target(scheme=scheme, port=port, path=metrics_path, source=port_source)
    hosts = engine_hosts(hint.host)
    alternates = on_hosts(target, hosts)[1:]
    if hint.port is not None and hint.port != port:
        own = Target(scheme=own_scheme, port=hint.port, path=metrics_path, source="cmdline")
        alternates += on_hosts(own, hosts)
    return ReadConfig(
        target=on_hosts(target, hosts)[0],
        alternates=alternates,
        hint=hint,
        read_timeout_s=args.read_timeout,
        max_body_bytes=args.max_body_bytes,
        warnings=tuple(warnings + list(hint.warnings) + _where_warnings(hint)),
    )


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
    )
