"""Command-line flags, validated once at start into frozen values.

Past this module nothing raises for bad input. Flags that are wrong are a usage error (exit
2). What the Pod says (annotations) is never allowed to skip a drain: a bad annotation is
logged as a warning and the next source is used, since a hook that exits at once cuts every
running request.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from hook import constants
from hook.annotations import (
    PATH_ANNOTATION,
    PORT_ANNOTATION,
    SCHEME_ANNOTATION,
    AnnotationsError,
    default_annotations_file,
    read_annotations,
)
from hook.engine import EngineHint, hint_from_proc, parse_kind, parse_role
from hook.events import CONTAINER_LOG
from hook.gauges import DEFAULT_METRICS_PATH, DEFAULT_PORTS, EngineKind
from hook.target import Target, check_path, check_port, check_scheme


@dataclass(frozen=True)
class ReadConfig:
    """Where and how to read the engine: shared by `prestop`, `prestop check` and the sidecar."""

    target: Target
    hint: EngineHint
    read_timeout_s: float
    max_body_bytes: int
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class DrainConfig:
    read: ReadConfig
    grace_s: float
    route_wait_s: float
    exit_reserve_s: float
    interval_s: float
    log_mirror: str | None  # None: --quiet


def _number(minimum: float, inclusive: bool, what: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a number of seconds, got {text!r}") from None
        if not math.isfinite(value) or value < minimum or (value == minimum and not inclusive):
            bound = f">= {minimum:g}" if inclusive else f"> {minimum:g}"
            raise argparse.ArgumentTypeError(f"{what} must be a finite number {bound}, got {text!r}")
        return value

    return parse


def _byte_count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of bytes >= 1, got {text!r}")
    return int(text)


def _checked(check):
    def parse(text: str):
        try:
            return check(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def add_target_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that say where the engine is and what it runs (the sidecar takes the same)."""
    group = parser.add_argument_group("engine target (default: the Pod's scrape annotations, then the engine's own)")
    group.add_argument("--port", type=_checked(check_port), help="engine /metrics port on loopback")
    group.add_argument("--path", type=_checked(check_path), help=f"metrics path (default {DEFAULT_METRICS_PATH})")
    group.add_argument("--scheme", type=_checked(check_scheme), help="http or https (https is not verified: loopback)")
    group.add_argument("--annotations", metavar="FILE",
                       help="downward-API annotations file (default /etc/podinfo/annotations when it exists)")
    group.add_argument("--engine", type=_checked(parse_kind), help="vllm or sglang (default: detected)")
    group.add_argument("--disaggregation-mode", dest="role", type=_checked(parse_role),
                       help="null, prefill or decode (default: detected)")
    group.add_argument("--read-timeout", type=_number(0, False, "--read-timeout"),
                       default=constants.READ_TIMEOUT_S, metavar="SECONDS",
                       help=f"bound on one read (default {constants.READ_TIMEOUT_S:g})")
    group.add_argument("--max-body-bytes", type=_byte_count, default=constants.MAX_BODY_BYTES, metavar="BYTES",
                       help=f"a larger body counts as busy (default {constants.MAX_BODY_BYTES})")
    group.add_argument("--proc-root", default="/proc", help=argparse.SUPPRESS)  # tests: where argv is read


def add_drain_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--grace", type=_number(0, False, "--grace"), default=constants.DEFAULT_GRACE_S,
                        metavar="SECONDS",
                        help=f"the Pod's terminationGracePeriodSeconds (default {constants.DEFAULT_GRACE_S:g})")
    parser.add_argument("--route-wait", type=_number(0, True, "--route-wait"), default=constants.ROUTE_WAIT_S,
                        metavar="SECONDS", help=f"wait before the first read (default {constants.ROUTE_WAIT_S:g})")
    parser.add_argument("--exit-reserve", type=_number(0, True, "--exit-reserve"),
                        default=constants.EXIT_RESERVE_S, metavar="SECONDS",
                        help=f"return this long before the grace ends (default {constants.EXIT_RESERVE_S:g})")
    parser.add_argument("--interval", type=_number(0, False, "--interval"), default=constants.POLL_INTERVAL_S,
                        metavar="SECONDS", help=f"time between reads (default {constants.POLL_INTERVAL_S:g})")
    parser.add_argument("--quiet", action="store_true",
                        help="do not mirror the log lines to the container's log (PID 1's stdout)")
    parser.add_argument("--log-mirror", default=CONTAINER_LOG, help=argparse.SUPPRESS)  # tests: a file


def resolve_read_config(args: argparse.Namespace) -> ReadConfig:
    """Flags, then the Pod's annotations, then the engine's argv, then the engine's defaults."""
    warnings: list[str] = []
    flag_hint = EngineHint(kind=args.engine, role=args.role, source="flag" if args.engine else "none")
    proc_hint = hint_from_proc(args.proc_root)
    hint = flag_hint.merged(proc_hint)

    annotations: dict[str, str] = {}
    path = args.annotations or default_annotations_file()
    if path:
        try:
            annotations = read_annotations(path)
        except AnnotationsError as exc:
            warnings.append(f"annotations ignored: {exc}")

    def from_annotation(key: str, check):
        if key not in annotations:
            return None
        try:
            return check(annotations[key])
        except ValueError as exc:
            warnings.append(f"annotation {key} ignored: {exc}")
            return None

    sources = []
    port = args.port
    if port is not None:
        sources.append("flag")
    else:
        port = from_annotation(PORT_ANNOTATION, check_port)
        if port is not None:
            sources.append("annotation")
            if hint.port is not None and hint.port != port:
                warnings.append(f"annotation {PORT_ANNOTATION}={port} but the engine's argv says --port {hint.port}")
        elif hint.port is not None:
            port = hint.port
            sources.append("cmdline")
        else:
            kind = hint.kind or EngineKind.VLLM
            if hint.kind is None:
                warnings.append("engine not detected and no port given: using vLLM's default port")
            port = DEFAULT_PORTS[kind]
            sources.append("default")
    metrics_path = args.path or from_annotation(PATH_ANNOTATION, check_path) or DEFAULT_METRICS_PATH
    scheme = args.scheme or from_annotation(SCHEME_ANNOTATION, check_scheme) or ("https" if hint.tls else "http")
    return ReadConfig(
        target=Target(scheme=scheme, port=port, path=metrics_path, source=sources[0]),
        hint=hint,
        read_timeout_s=args.read_timeout,
        max_body_bytes=args.max_body_bytes,
        warnings=tuple(warnings),
    )


def resolve_drain_config(args: argparse.Namespace) -> DrainConfig:
    return DrainConfig(
        read=resolve_read_config(args),
        grace_s=args.grace,
        route_wait_s=args.route_wait,
        exit_reserve_s=args.exit_reserve,
        interval_s=args.interval,
        log_mirror=None if args.quiet else args.log_mirror,
    )
