"""The emulated engine's configuration: parsed and validated once, from the command line, into a value.

Bad input ends the program here with a clear message and exit status 2 (argparse's own), never a
traceback; past this point nothing re-checks it.
"""

from __future__ import annotations

import argparse
import enum
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from emulation import constants
from emulation.misbehaviour import Misbehaviour
from modeldrain.hook.flags import Parser, arg, parse_port, seconds_arg, whole_number_arg


class EngineKind(enum.Enum):
    VLLM = "vllm"
    SGLANG = "sglang"


class Role(enum.Enum):
    """SGLang's --disaggregation-mode; vLLM is always unified."""

    UNIFIED = "unified"
    PREFILL = "prefill"
    DECODE = "decode"


class SigtermPolicy(enum.Enum):
    """What the engine does on SIGTERM (see docs/engines.md)."""

    ABORT = "abort"  # vLLM default: listener closes, in-flight requests get no response
    DRAIN_TIMEOUT = "drain-timeout"  # vLLM --shutdown-timeout N: finish work, refuse new with 500
    DRAIN = "drain"  # SGLang: /health 503, keep serving everything, exit when empty
    IGNORE = "ignore"  # not a real engine: one that only SIGKILL stops (kubelet tests)


class ExpositionFormat(enum.Enum):
    TEXT = "text"  # Prometheus text 0.0.4, or OpenMetrics when the reader asks, like prometheus_client
    OPENMETRICS = "openmetrics"  # OpenMetrics whatever the reader asks


@dataclass(frozen=True)
class EngineConfig:
    kind: EngineKind
    role: Role
    dp: int
    host: str
    port: int
    tls_cert: Path | None
    tls_key: Path | None
    exposition_format: ExpositionFormat
    body_kb: int | None  # None: the real engine's natural size
    max_running: int
    on_sigterm: SigtermPolicy
    shutdown_timeout_s: float
    drain_teardown_s: float
    split_role_exit_wait_s: float
    misbehaviour: Misbehaviour
    ready_file: Path | None
    stats_file: Path | None
    model_name: str
    multiprocess: bool
    legacy_prefill_name: bool
    without_http_gauge: bool
    without_metrics: bool = False  # SGLang without --enable-metrics: /metrics answers 404
    server_load_tracking: bool = False  # vLLM's --enable-server-load-tracking: GET /load counts
    api_servers: int = 1  # vLLM's --api-server-count: each /load answer is one of them

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    @property
    def metric_prefix(self) -> str:
        return f"{self.kind.value}:"


DEFAULT_SIGTERM_POLICY = {EngineKind.VLLM: SigtermPolicy.ABORT, EngineKind.SGLANG: SigtermPolicy.DRAIN}


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m emulation.engine",
        description="An emulated vLLM or SGLang server: real HTTP, the real engines' /metrics "
        "families, their SIGTERM behaviour, and switchable misbehaviour for tests.",
    )
    parser.add_argument("--kind", type=EngineKind, choices=list(EngineKind), default=EngineKind.VLLM,
                        metavar="{vllm,sglang}")
    parser.add_argument("--role", type=Role, choices=list(Role), default=Role.UNIFIED,
                        metavar="{unified,prefill,decode}", help="SGLang disaggregation role")
    parser.add_argument("--dp", type=whole_number_arg("--dp", minimum=1), default=1,
                        help="data-parallel engines: one series per rank")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=arg(lambda text: parse_port(text, what="--port", allow_zero=True)), default=0, help="0 picks a free port")
    parser.add_argument("--tls-cert", type=Path)
    parser.add_argument("--tls-key", type=Path)
    parser.add_argument("--format", dest="exposition_format", type=ExpositionFormat,
                        choices=list(ExpositionFormat), default=ExpositionFormat.TEXT,
                        metavar="{text,openmetrics}")
    parser.add_argument("--body-kb", type=whole_number_arg("--body-kb", minimum=1), default=None,
                        help="pad /metrics to about this many KB (default: the real engine's size)")
    parser.add_argument("--max-running", type=whole_number_arg("--max-running", minimum=1), default=constants.DEFAULT_MAX_RUNNING,
                        help="scheduler slots per engine; the rest wait")
    parser.add_argument("--on-sigterm", type=SigtermPolicy, choices=list(SigtermPolicy), default=None,
                        metavar="{abort,drain,drain-timeout,ignore}",
                        help="default: abort for vllm, drain for sglang")
    parser.add_argument("--shutdown-timeout", dest="shutdown_timeout_s", type=seconds_arg("--shutdown-timeout"), default=0.0,
                        help="vLLM --shutdown-timeout: seconds to drain on SIGTERM (implies drain-timeout)")
    parser.add_argument("--drain-teardown-s", type=seconds_arg("--drain-teardown-s"), default=constants.VLLM_DRAIN_TEARDOWN_S,
                        help="vLLM teardown after a drain-timeout drain")
    parser.add_argument("--split-role-exit-wait-s", type=seconds_arg("--split-role-exit-wait-s"),
                        default=constants.SGLANG_SPLIT_ROLE_SCHEDULER_WAIT_S,
                        help="SGLang prefill/decode: extra wait for the scheduler after the drain")
    parser.add_argument("--misbehave", type=Misbehaviour, choices=list(Misbehaviour),
                        default=Misbehaviour.NONE, metavar="MODE",
                        help="initial misbehaviour: " + ", ".join(m.value for m in Misbehaviour))
    parser.add_argument("--ready-file", type=Path, help="write the bound port here once listening")
    parser.add_argument("--stats-file", type=Path, help="write final JSON stats here at exit")
    parser.add_argument("--model-name", default="tiny")
    parser.add_argument("--multiprocess", action="store_true",
                        help="prometheus multiprocess mode: no process_*/python_* families")
    parser.add_argument("--legacy-prefill-name", action="store_true",
                        help="SGLang before May 2026: num_prefill_prealloc_queue_reqs")
    parser.add_argument("--without-http-gauge", action="store_true",
                        help="an SGLang release without sglang:http_requests_active (the scheduler's gauges alone)")
    parser.add_argument("--without-metrics", action="store_true",
                        help="SGLang started without --enable-metrics: /metrics answers 404 as its FastAPI does")
    parser.add_argument("--server-load-tracking", action="store_true",
                        help="vLLM --enable-server-load-tracking: GET /load counts requests from arrival (else 0)")
    parser.add_argument("--api-servers", type=whole_number_arg("--api-servers", minimum=1), default=1,
                        help="vLLM --api-server-count: GET /load answers one server's count in turn")
    return parser


def parse_engine_args(argv: Sequence[str] | None = None) -> EngineConfig:
    """Parse and validate; on bad input argparse prints usage and a reason and exits 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    for path in (args.tls_cert, args.tls_key):
        if path is not None and not os.access(path, os.R_OK):
            parser.error(f"cannot read {path}")
    if args.kind is EngineKind.VLLM and args.role is not Role.UNIFIED:
        parser.error("--role prefill/decode is SGLang's; vLLM is always unified")
    if args.legacy_prefill_name and args.kind is not EngineKind.SGLANG:
        parser.error("--legacy-prefill-name is SGLang's")
    if args.without_http_gauge and args.kind is not EngineKind.SGLANG:
        parser.error("--without-http-gauge is SGLang's")
    if args.without_metrics and args.kind is not EngineKind.SGLANG:
        parser.error("--without-metrics is SGLang's (vLLM always serves /metrics)")
    if (args.server_load_tracking or args.api_servers > 1) and args.kind is not EngineKind.VLLM:
        parser.error("--server-load-tracking and --api-servers are vLLM's")
    on_sigterm = args.on_sigterm
    if on_sigterm is None:
        if args.kind is EngineKind.VLLM and args.shutdown_timeout_s > 0:
            on_sigterm = SigtermPolicy.DRAIN_TIMEOUT
        else:
            on_sigterm = DEFAULT_SIGTERM_POLICY[args.kind]
    multiprocess = args.multiprocess or args.kind is EngineKind.SGLANG  # SGLang always is
    return EngineConfig(
        kind=args.kind,
        role=args.role,
        dp=args.dp,
        host=args.host,
        port=args.port,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        exposition_format=args.exposition_format,
        body_kb=args.body_kb,
        max_running=args.max_running,
        on_sigterm=on_sigterm,
        shutdown_timeout_s=args.shutdown_timeout_s,
        drain_teardown_s=args.drain_teardown_s,
        split_role_exit_wait_s=args.split_role_exit_wait_s,
        misbehaviour=args.misbehave,
        ready_file=args.ready_file,
        stats_file=args.stats_file,
        model_name=args.model_name,
        multiprocess=multiprocess,
        legacy_prefill_name=args.legacy_prefill_name,
        without_http_gauge=args.without_http_gauge,
        without_metrics=args.without_metrics,
        server_load_tracking=args.server_load_tracking,
        api_servers=args.api_servers,
    )
