"""drain-sidecar's flags, validated once at start into a frozen value.

The engine target flags and their resolution (flags, then the Pod's scrape annotations,
then the engine's argv, then its defaults) are prestop's own, imported from hook.config.
A bad flag is a usage error: a clear message and exit 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Mapping

from modeldrain.hook import __version__
from modeldrain.hook.config import add_leader_flags, add_target_flags, resolve_leader, resolve_read_config
from modeldrain.hook.constants import DEFAULT_GRACE_S, LWS_GROUP_SIZE_ENV, LWS_WORKER_INDEX_ENV, SIDECAR_PORT
from modeldrain.hook.engine import EngineHint
from modeldrain.hook.flags import Parser, arg, parse_listen, parse_port, seconds_arg, whole_number_arg
from modeldrain.hook.leader import LeaderConfig
from modeldrain.hook.settings import ReadConfig
from modeldrain.sidecar import constants
from modeldrain.sidecar.auth import DEFAULT_OVERLAP_S, TokenFileError, read_token
from modeldrain.sidecar.member import Member, PodIdentity, resolve_member

__all__ = ["DEFAULT_LISTEN_PORT", "SidecarConfig", "resolve_config", "sidecar_parser"]

# The Pod's containers share one network namespace, so the port must clash with nothing the
# engine binds: not vLLM's 8000 or SGLang's 30000 (and the ports SGLang derives above it),
# not 8080/9090 (proxies, Prometheus), not 9400 (NVIDIA's DCGM exporter), and below Linux's
# ephemeral range (32768+) where vLLM's and SGLang's randomly chosen internal ports land.
DEFAULT_LISTEN_PORT = SIDECAR_PORT
# The controller reads the sidecar by Pod IP, so it listens on every address, IPv4 and IPv6
# ("" in --listen ":PORT"); the engine read stays on loopback whatever this says.
DEFAULT_LISTEN_HOST = ""

# Lingering after SIGTERM ends when the engine's listener refuses a connection, or after this
# long. The default is the operator's default grace: a classic container gets SIGTERM at the
# delete, while the engine may drain until G, and kubelet kills both at G anyway.
DEFAULT_LINGER_MAX_S = DEFAULT_GRACE_S

# One controller and a few peers read a replica; 64 leaves room for a storm of retries while
# a connection flood cannot exhaust file descriptors. Excess connections get a 503 and close.
MAX_CONNECTIONS = 64

# The downward API gives these (fieldRef metadata.name, metadata.namespace, metadata.uid): Pod IPs
# are reused, so an answer names the Pod it comes from.
POD_NAME_ENV = "POD_NAME"
POD_NAMESPACE_ENV = "POD_NAMESPACE"
POD_UID_ENV = "POD_UID"


EPILOG = f"""\
default port: {DEFAULT_LISTEN_PORT}, chosen to clash with nothing an engine binds in the shared
  Pod network namespace (vLLM 8000, SGLang 30000 and up, 8080/9090, DCGM's 9400) and to sit below
  the ephemeral range where the engines' random internal ports land.

signals: SIGTERM keeps serving until the engine's listener refuses a connection (a native
  sidecar: at once; a classic container: when the engine has drained) or --linger-max passes,
  then exits 0. SIGINT exits 0 at once.

exit codes: 0 stopped by a signal; 2 usage error; 3 cannot listen on --listen.

drain-sidecar retirement URL [URL...]: the retirement protocol's verdict for one replica, read from
  its members' sidecars (see drain-sidecar retirement --help).
"""


@dataclass(frozen=True)
class SidecarConfig:
    read: ReadConfig
    listen_host: str  # "": every address
    listen_port: int  # 0: any free port (tests)
    token_file: str | None
    token_overlap_s: float  # how long the tokens the file held before a change stay accepted
    pod: PodIdentity
    member: Member
    stated: EngineHint  # what the sidecar's own --engine / --disaggregation-mode say (modeldrain/sidecar/command.py)
    proc_root: str  # where the engine's argv is read (the process table)
    net_root: str  # where the socket tables and the Pod's addresses are read (this namespace's /proc)
    service_ports: tuple[int, ...]  # where outside connections are counted (modeldrain/sidecar/connections.py)
    linger_max_s: float
    max_connections: int
    ready_file: str | None
    warnings: tuple[str, ...] = ()  # logged at start as config_warning
    # A worker: the leader whose answers it remembers for its hook (modeldrain/sidecar/leader_watch.py).
    leader: LeaderConfig | None = None


def sidecar_parser() -> Parser:
    parser = Parser(
        prog="drain-sidecar",
        description="Serve one fresh read of this Pod's engine work gauges to the ModelDeployment operator's controller,\n"
        "by Pod IP: GET /v1/work (OpenAPI at /v1/openapi.json), /healthz, /readyz, /metrics.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"drain-sidecar {__version__}")
    parser.add_argument("--listen", type=arg(parse_listen),
                        default=(DEFAULT_LISTEN_HOST, DEFAULT_LISTEN_PORT),
                        metavar="HOST:PORT",
                        help=f"where to serve (default :{DEFAULT_LISTEN_PORT}, every address)")
    parser.add_argument("--token-file", metavar="FILE",
                        help="require 'Authorization: Bearer <token>' on /v1/*, the token read from FILE "
                        "(re-read when it changes; one token per line, two during a rotation); without it /v1/* "
                        "is open")
    parser.add_argument("--token-overlap", type=seconds_arg("--token-overlap"), default=DEFAULT_OVERLAP_S,
                        metavar="SECONDS",
                        help="after the token file changes, keep accepting the tokens it held before for this long "
                        "(kubelet refreshes a Secret on each node at its own time); 0 to revoke at once "
                        f"(default {DEFAULT_OVERLAP_S:g})")
    parser.add_argument("--pod-name", help=f"this Pod's name (default ${POD_NAME_ENV})")
    parser.add_argument("--pod-namespace", help=f"this Pod's namespace (default ${POD_NAMESPACE_ENV})")
    parser.add_argument("--pod-uid", help=f"this Pod's UID (default ${POD_UID_ENV})")
    parser.add_argument("--configuration", metavar="TEXT",
                        help="what this replica was created from, the same on every member "
                        f"(default ${constants.MEMBER_CONFIGURATION_ENV})")
    parser.add_argument("--worker-index", metavar="N",
                        help=f"this member's index in its group (default ${LWS_WORKER_INDEX_ENV})")
    parser.add_argument("--group-size", metavar="N",
                        help=f"members in the replica (default ${LWS_GROUP_SIZE_ENV}, else 1)")
    parser.add_argument("--linger-max", type=seconds_arg("--linger-max"), default=DEFAULT_LINGER_MAX_S, metavar="SECONDS",
                        help="after SIGTERM, keep serving until the engine refuses connections or this long "
                        f"passes; set it to the Pod's terminationGracePeriodSeconds "
                        f"(default {DEFAULT_LINGER_MAX_S:g})")
    parser.add_argument("--max-connections", type=whole_number_arg("--max-connections", minimum=1), default=MAX_CONNECTIONS, metavar="N",
                        help=f"concurrent client connections; more get a 503 (default {MAX_CONNECTIONS})")
    parser.add_argument("--ready-file", metavar="FILE",
                        help="once listening, write HOST:PORT here (for scripts and tests; port 0 resolved)")
    parser.add_argument("--service-port", type=arg(lambda text: parse_port(text, what="--service-port")),
                        action="append", metavar="PORT",
                        help="count connections from outside the Pod on this port, the one the Service targets "
                        "(repeatable; default: the engine's port). A Pod whose Service targets a routing proxy "
                        "names the proxy's port")
    # Where the kernel's socket tables and the Pod's addresses are read (net/tcp, net/fib_trie...):
    # the real /proc of this network namespace. Apart from --proc-root (the process table, which
    # tests empty so that no test reads another's engine): a test that feeds hostile tables says so.
    parser.add_argument("--net-root", default="/proc", help=argparse.SUPPRESS)
    add_target_flags(parser)
    add_leader_flags(parser.add_argument_group("a worker's leader"),
                     "read the leader's drain-sidecar (http://HOST[:PORT]) now and then, and tell this Pod's hook "
                     "which leader Pod answered and when it last did (/v1/work's leader; the token: --token-file "
                     "unless --leader-token-file)")
    return parser


def resolve_config(args: argparse.Namespace, parser: argparse.ArgumentParser,
                   env: Mapping[str, str] | None = None) -> SidecarConfig:
    """Validate what argparse cannot check alone; a problem ends in parser.error (exit 2)."""
    env = os.environ if env is None else env
    try:
        member = resolve_member(args.worker_index, args.group_size, env, args.configuration)
    except ValueError as exc:
        parser.error(str(exc))
    if args.token_file is not None:
        try:
            read_token(args.token_file)
        except TokenFileError as exc:
            parser.error(f"--token-file: {exc}")
    host, port = args.listen
    read = resolve_read_config(args)
    # The engine's serving ports: the target's, any other port it can be found on (its own --port),
    # and the container's other engines' (hook.settings.ReadConfig.others).
    engine_ports = [read.target.port, *(alternate.port for alternate in read.alternates),
                    *(other.target.port for other in read.others)]  # sorted and deduped below
    pod = PodIdentity(
        namespace=args.pod_namespace or env.get(POD_NAMESPACE_ENV) or None,
        name=args.pod_name or env.get(POD_NAME_ENV) or None,
        uid=args.pod_uid or env.get(POD_UID_ENV) or None,
    )
    warnings = list(_unnamed_pod(pod))
    leader = resolve_leader(args, env, warnings)
    if leader is not None and leader.token_file is None:
        # One Secret for every member in the shipped manifests: the leader wants this sidecar's own token.
        leader = LeaderConfig(leader.target, args.token_file, leader.source)
    return SidecarConfig(
        warnings=tuple(warnings),
        leader=leader,
        read=read,
        listen_host=host,
        listen_port=port,
        token_file=args.token_file,
        token_overlap_s=args.token_overlap,
        pod=pod,
        member=member,
        stated=EngineHint(kind=args.engine, role=args.role, source="flag"),
        proc_root=args.proc_root,
        net_root=args.net_root,
        service_ports=tuple(sorted(set(args.service_port or engine_ports))),
        linger_max_s=args.linger_max,
        max_connections=args.max_connections,
        ready_file=args.ready_file,
    )


def _unnamed_pod(pod: PodIdentity) -> tuple[str, ...]:
    """What a Pod that does not name itself costs: the retirement protocol trusts no answer that
    does not name its Pod (Pod IPs are reused), so every retirement of it holds wrong_pod."""
    missing = [f"{env} (--{flag})" for env, flag, value in (
        (POD_NAMESPACE_ENV, "pod-namespace", pod.namespace),
        (POD_NAME_ENV, "pod-name", pod.name),
        (POD_UID_ENV, "pod-uid", pod.uid)) if value is None]
    if not missing:
        return ()
    return (f"this Pod is not named: {', '.join(missing)} not set (the downward API's metadata.namespace, "
            "metadata.name, metadata.uid); /v1/work cannot say which Pod answers, so every retirement of this "
            "replica holds wrong_pod until its budget ends (docs/controller.md)",)
