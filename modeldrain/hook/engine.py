"""Which engine, and which role, a replica runs: from flags, the engine's command line, or its metrics.

The hook runs inside the engine container, so /proc shows the engine's own argv: that is the
most direct evidence (it is also what the operator's protocol reads the role from). When the
argv is not visible, the exposition says the rest: metric prefixes name the engine, SGLang's
engine_type label names its role.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from typing import Mapping

from modeldrain.hook.engine_argv import EngineArgs
from modeldrain.hook.flags import parse_port
from modeldrain.hook.gauges import EngineKind, Role

__all__ = [
    "EngineHint", "PROC_ROOT_ENV", "SGLANG_FORCE_SHUTDOWN_ENV", "default_proc_root", "engine_invocation", "engine_kind",
    "engine_processes", "force_shutdown_of", "hint_from_argv", "hint_from_proc", "hint_of", "python_program",
]

# Where the engine's argv is read: this PID namespace's /proc, which in a Pod shows the engine.
PROC_ROOT = "/proc"
# An engine's command line is read whole up to this (Linux caps argv at a quarter of the stack
# limit: 2 MiB under the default 8 MiB); a longer one is cut, and the flags past the cut are not known.
MAX_CMDLINE_BYTES = 8 << 20
# Another tree to read instead, for the test suite: a test machine's /proc shows every engine run
# there, which a Pod never would. --proc-root, where given, wins over it.
PROC_ROOT_ENV = "MODELDRAIN_PROC_ROOT"


def default_proc_root(env: Mapping[str, str] = os.environ) -> str:
    """The tree the engine's argv is read from when --proc-root does not say: $MODELDRAIN_PROC_ROOT, else /proc."""
    return env.get(PROC_ROOT_ENV) or PROC_ROOT


@dataclass(frozen=True)
class EngineHint:
    """What is known about the engine before a read; None where the read must tell."""

    kind: EngineKind | None = None
    role: Role | None = None
    port: int | None = None  # the engine's own --port, when its argv names one
    # Why the engine's --port could not be read where its argv is seen (its argv cut, its --config
    # unreadable, a word its parser would refuse): its port is then not known, never its default.
    port_unknown: str | None = None
    host: str | None = None  # the engine's own --host, when its argv names one
    uds: str | None = None  # vLLM's --uds: it serves on this Unix socket, on no TCP port at all
    tls: bool = False  # the engine's argv names a certificate (--ssl-certfile): it serves https
    source: str = "none"  # "flag", "cmdline", "none"
    # The argv words that make it one half of a prefill/decode pair (disaggregation_marks); () when none.
    disaggregation: tuple[str, ...] = ()
    # What of the engine's argv could not be followed (hook.engine_argv), for the config's warnings.
    warnings: tuple[str, ...] = ()
    # SGLang's --node-rank from its argv (0 when the argv omits it); None when not read from an argv
    # or not a number. A node of rank >= 1 is a worker of a multi-node server, not the one that drains.
    node_rank: int | None = None
    # SGL_FORCE_SHUTDOWN in the engine's environment (/proc/PID/environ): True when SGLang reads it as
    # set (`true` or `1`, any case), False when every engine process's environment was read without
    # it, None when one could not be read (another user's process) or no process was seen.
    force_shutdown: bool | None = None
    # vLLM's --enable-server-load-tracking: its GET /load counts the API server's requests (modeldrain/hook/server_load.py).
    server_load_tracking: bool = False
    # vLLM: how many data-parallel engine cores this API server fronts (its `engine` label values);
    # SGLang: its --pp-size. None when not read from an argv or not a number.
    data_parallel_engines: int | None = None
    pipeline_parallel_size: int | None = None
    # vLLM: how many API server processes serve its port (--api-server-count, or vLLM's default);
    # each answers GET /load with its own count only. None when not read from an argv or not a number.
    api_servers: int | None = None
    # vLLM as a KV producer (--kv-transfer-config kv_role kv_producer or kv_both): its role and
    # connector in words ("kv_role=kv_producer, NixlConnector"); None when not one, or its argv unseen.
    kv_producer: str | None = None

    def merged(self, fallback: "EngineHint") -> "EngineHint":
        """Fill what this hint leaves open from a weaker one."""
        return replace(
            self,
            kind=self.kind or fallback.kind,
            role=self.role or fallback.role,
            port=self.port if self.port is not None else fallback.port,
            port_unknown=self.port_unknown if self.port is not None or self.port_unknown else fallback.port_unknown,
            host=self.host if self.host is not None else fallback.host,
            uds=self.uds if self.uds is not None else fallback.uds,
            tls=self.tls or fallback.tls,
            source=self.source if self.kind else fallback.source,
            disaggregation=self.disaggregation or fallback.disaggregation,
            warnings=self.warnings + fallback.warnings,
            node_rank=self.node_rank if self.node_rank is not None else fallback.node_rank,
            force_shutdown=self.force_shutdown if self.force_shutdown is not None else fallback.force_shutdown,
            server_load_tracking=self.server_load_tracking or fallback.server_load_tracking,
            data_parallel_engines=(self.data_parallel_engines if self.data_parallel_engines is not None
                                   else fallback.data_parallel_engines),
            pipeline_parallel_size=(self.pipeline_parallel_size if self.pipeline_parallel_size is not None
                                    else fallback.pipeline_parallel_size),
            api_servers=self.api_servers if self.api_servers is not None else fallback.api_servers,
            kv_producer=self.kv_producer if self.kv_producer is not None else fallback.kv_producer,
        )


# The operator refuses to retire a prefill or decode replica, and reads that from the member's own
# command (spec "Drain read refusals"): SGLang's --disaggregation-mode prefill or decode, and for
# vLLM its data-parallel balance flags, which the operator renders on a prefill or decode role.
# vLLM's own KV-transfer role of a producer or consumer says the same and counts too: a refusal
# holds the replica in place, so a mark too many costs capacity, never a request.
# Each balance flag with its short alias and its negation (argparse's BooleanOptionalAction: the
# last of the three given decides).
VLLM_DATA_PARALLEL_BALANCE_FLAGS = (
    (("--data-parallel-external-lb", "-dpe"), "--no-data-parallel-external-lb"),
    (("--data-parallel-hybrid-lb", "-dph"), "--no-data-parallel-hybrid-lb"),
)
VLLM_SPLIT_KV_ROLES = frozenset({"kv_producer", "kv_consumer"})
# The KV-transfer roles that send: their connector keeps a finished request's blocks for a peer.
VLLM_SENDING_KV_ROLES = frozenset({"kv_producer", "kv_both"})
SGLANG_SPLIT_MODES = frozenset({"prefill", "decode"})
_KV_TRANSFER_CONFIG = "--kv-transfer-config"


def disaggregation_marks(kind: EngineKind, args: EngineArgs) -> tuple[str, ...]:
    """The words of the engine's flags that make it one half of a prefill/decode pair; () when none."""
    if kind is EngineKind.SGLANG:
        mode = args.value("--disaggregation-mode")
        return (f"--disaggregation-mode={mode}",) if mode in SGLANG_SPLIT_MODES else ()
    marks = [word for names, negation in VLLM_DATA_PARALLEL_BALANCE_FLAGS
             if (word := args.switch(names, negation)) is not None]
    kv_role = _kv_role(args)
    if kv_role in VLLM_SPLIT_KV_ROLES:
        marks.append(f"--kv-transfer-config kv_role={kv_role}")
    return tuple(marks)


def _kv_role(args: EngineArgs) -> str | None:
    """vLLM's KV-transfer role."""
    return _kv_transfer_value(args, "kv_role")


def _kv_producer(args: EngineArgs) -> str | None:
    """A sending role and its connector, in words; None when the role does not send."""
    role = _kv_role(args)
    if role not in VLLM_SENDING_KV_ROLES:
        return None
    connector = _kv_transfer_value(args, "kv_connector")
    return f"kv_role={role}" + (f", {connector}" if connector else "")


def _kv_transfer_value(args: EngineArgs, key: str) -> str | None:
    """One string field of vLLM's --kv-transfer-config. Its parser gathers the dotted words
    (--kv-transfer-config.kv_role X) into one JSON value it appends after every other word, so where
    any dotted word is given, that value replaces a whole --kv-transfer-config JSON, the key or not."""
    dotted = [i for i, word in enumerate(args.words) if word.split("=", 1)[0].startswith(_KV_TRANSFER_CONFIG + ".")]
    if dotted:
        return args.value(f"{_KV_TRANSFER_CONFIG}.{key}")
    text = args.value(_KV_TRANSFER_CONFIG)
    if text is None:
        return None
    try:
        config = json.loads(text)
    except ValueError:
        return None  # vLLM would refuse to start on it: nothing to read
    value = config.get(key) if isinstance(config, dict) else None
    return value if isinstance(value, str) else None


def hint_from_argv(argv: list[str], cwd: str | None = None, cut: str | None = None) -> EngineHint | None:
    """Recognize `vllm serve …`, vLLM's api_server module, and SGLang's launch_server; read their
    flags as the engine's parser does (hook.engine_argv). `cwd`: the engine's working directory,
    where a relative --config path is; `cut`: why argv is not whole (then its flags are not known)."""
    command = engine_invocation(argv)
    if command is None:
        return None
    kind, engine_words = command
    args = EngineArgs.read(engine_words, kind, cwd, cut)
    role = None
    if kind is EngineKind.SGLANG:
        mode = args.value("--disaggregation-mode")
        role = Role.UNIFIED
        if mode in SGLANG_SPLIT_MODES:
            role = Role(mode)
    return EngineHint(
        kind=kind,
        role=role,
        port=_port(args.value("--port")),
        port_unknown=None if args.known("--port") else args.unknown,
        host=args.value("--host") or None,
        uds=args.value("--uds") or None if kind is EngineKind.VLLM else None,
        tls=bool(args.value("--ssl-certfile")),
        source="cmdline",
        disaggregation=disaggregation_marks(kind, args),
        warnings=args.warnings,
        node_rank=_node_rank(args.value("--node-rank")) if kind is EngineKind.SGLANG and args.known("--node-rank")
        else None,
        server_load_tracking=kind is EngineKind.VLLM and args.switch(
            ("--enable-server-load-tracking",), "--no-enable-server-load-tracking") is not None,
        data_parallel_engines=_data_parallel_engines(args) if kind is EngineKind.VLLM else None,
        api_servers=_api_servers(args) if kind is EngineKind.VLLM else None,
        kv_producer=_kv_producer(args) if kind is EngineKind.VLLM else None,
        pipeline_parallel_size=(_positive(args.value("--pp-size", "--pipeline-parallel-size"), 1)
                                if kind is EngineKind.SGLANG else None),
    )


def _data_parallel_engines(args: EngineArgs) -> int | None:
    """The engine cores a vLLM API server fronts: one with an external load balancer (each rank its own
    server), the local ones with the hybrid one, all of them otherwise."""
    external = args.switch(("--data-parallel-external-lb", "-dpe"), "--no-data-parallel-external-lb")
    if external is not None or args.value("--data-parallel-rank", "-dpn") is not None:
        return 1
    local = args.value("--data-parallel-size-local", "-dpl")
    if local is not None:
        return _positive(local, 1)
    return _positive(args.value("--data-parallel-size", "-dp"), 1)


def _api_servers(args: EngineArgs) -> int | None:
    """vLLM's API server processes (0.32's `vllm serve`): --api-server-count, else one with an external
    load balancer, the local data-parallel size with the hybrid one, the data-parallel size otherwise."""
    given = args.value("--api-server-count", "-asc")
    if given is not None:
        return _positive(given, 1)
    external = args.switch(("--data-parallel-external-lb", "-dpe"), "--no-data-parallel-external-lb")
    if external is not None or args.value("--data-parallel-rank", "-dpn") is not None:
        return 1
    hybrid = args.switch(("--data-parallel-hybrid-lb", "-dph"), "--no-data-parallel-hybrid-lb")
    if hybrid is not None or args.value("--data-parallel-start-rank", "-dpr") is not None:
        return _positive(args.value("--data-parallel-size-local", "-dpl"), 1)
    return _positive(args.value("--data-parallel-size", "-dp"), 1)


def _positive(text: str | None, default: int) -> int | None:
    """A count flag's value: its default when absent, None when not a positive number."""
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value >= 1 else None


def _node_rank(text: str | None) -> int | None:
    if text is None:
        return 0  # SGLang's default
    try:
        return int(text)
    except ValueError:
        return None  # SGLang would refuse to start on it: unknown, never taken for rank 0


# SGLang's watchdog exits at once, without draining, when this is set (tokenizer_manager's
# sigterm_watchdog): SGLang 0.5.23's get_bool_env_var reads only `true` and `1`, in any case, as set;
# anything else, `''` and `yes` included, is false.
SGLANG_FORCE_SHUTDOWN_ENV = "SGL_FORCE_SHUTDOWN"
SGLANG_TRUE_WORDS = frozenset({"true", "1"})
# /proc/PID/environ is the process's initial environment; more than this is not read.
MAX_ENVIRON_BYTES = 1 << 20


def force_shutdown_of(proc_root: str, pid: str) -> bool | None:
    """Whether SGL_FORCE_SHUTDOWN is set in one process's environment; None when it cannot be read
    (the process ended, or runs as another user: the sidecar's case) or is cut at the cap.

    A name given twice is read as CPython's os.environ reads it: the first one wins (the engine
    is a Python program, and /proc shows the environment it was exec'd with)."""
    try:
        with open(os.path.join(proc_root, pid, "environ"), "rb") as f:
            raw = f.read(MAX_ENVIRON_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_ENVIRON_BYTES:
        return None
    prefix = SGLANG_FORCE_SHUTDOWN_ENV.encode() + b"="
    values = [entry[len(prefix):] for entry in raw.split(b"\0") if entry.startswith(prefix)]
    if not values:
        return False
    return values[0].decode("utf-8", "surrogateescape").lower() in SGLANG_TRUE_WORDS


def _force_shutdown(proc_root: str, pids: list[str]) -> bool | None:
    """Across every process of the engine: set in any is set; unread in any is unknown."""
    seen = [force_shutdown_of(proc_root, pid) for pid in pids]
    if any(value is True for value in seen):
        return True
    if not seen or any(value is None for value in seen):
        return None
    return False


def hint_from_proc(proc_root: str = PROC_ROOT) -> EngineHint:
    """The engine hint from the processes visible here; none when zero or several engines differ."""
    return hint_of(engine_processes(proc_root), proc_root)


def engine_processes(proc_root: str = PROC_ROOT) -> dict[EngineHint, list[str]]:
    """Each distinct engine the processes visible here run, with the PIDs that run it.

    Only this process's own PID namespace counts. In a Pod that is all /proc shows (the
    container's, or the Pod's with shareProcessNamespace); on a node /proc also shows every
    container's processes, and those engines are not this hook's.
    """
    hints: dict[EngineHint, list[str]] = {}
    try:
        pids = [p for p in os.listdir(proc_root) if p.isdigit()]
    except OSError:
        return hints
    own_namespace = _pid_namespace(proc_root, "self")
    for pid in pids:
        if own_namespace is not None and _pid_namespace(proc_root, pid) not in (own_namespace, None):
            continue  # another PID namespace: another container's process
        try:
            with open(os.path.join(proc_root, pid, "cmdline"), "rb") as f:
                raw = f.read(MAX_CMDLINE_BYTES + 1)
        except OSError:
            continue  # the process ended, or is not ours to read
        cut = None
        if len(raw) > MAX_CMDLINE_BYTES:
            raw = raw[:raw.rfind(b"\0", 0, MAX_CMDLINE_BYTES) + 1]  # the words read whole; the rest unknown
            cut = f"its command line is longer than the {MAX_CMDLINE_BYTES} bytes read"
        argv = [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0")]
        argv = argv[:-1] if argv and argv[-1] == "" else argv
        hint = hint_from_argv(argv, cwd=os.path.join(proc_root, pid, "cwd"), cut=cut)
        if hint is not None:
            hints.setdefault(hint, []).append(pid)
    return hints


def hint_of(engines: dict[EngineHint, list[str]], proc_root: str = PROC_ROOT) -> EngineHint:
    """The one engine's hint, with what its environment says; none when zero or several differ."""
    if len(engines) != 1:
        return EngineHint()
    (hint, engine_pids), = engines.items()
    if hint.kind is not EngineKind.SGLANG:
        return hint
    return replace(hint, force_shutdown=_force_shutdown(proc_root, engine_pids))


def _pid_namespace(proc_root: str, pid: str) -> str | None:
    """The PID namespace a process is in ("pid:[4026531836]"); None when it cannot be told (the
    process ended, or belongs to another user): such a process still counts, as it always did."""
    try:
        return os.readlink(os.path.join(proc_root, pid, "ns", "pid"))
    except OSError:
        return None


# CPython's own options (`python3 --help`; Python/getopt.c): those that take a value, in the same
# word (`-mvllm…`, `-Wx`) or the next; those that take none, combinable in one word (`-Bm mod`); and
# the long ones (exact words only: `--check-hash-based-pycs never`). -c and -m end the options.
_PYTHON_VALUE_OPTIONS = frozenset("cmWX")
_PYTHON_PLAIN_OPTIONS = frozenset("bBdEhiIOPqRsStuvVx?")
_PYTHON_LONG_OPTIONS = {"--check-hash-based-pycs": True, "--help-env": False, "--help-xoptions": False,
                        "--help-all": False}
_PYTHON_EXITS = frozenset("hV?")  # prints and exits: no engine runs


def python_program(args: list[str]) -> tuple[str, str, list[str]] | None:
    """What a Python interpreter given `args` (its argv after the program) runs, read as CPython
    reads its options: ("-m", module, its args), ("-c", command, args) or ("file", path, args);
    None when it runs nothing of ours (stdin, an option it refuses, --help)."""
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word == "--":
            break
        if word in ("--help", "--version"):
            return None
        if not word.startswith("-") or word == "-":
            i -= 1
            break
        if word.startswith("--"):
            if word not in _PYTHON_LONG_OPTIONS:
                return None  # CPython refuses it (`--check-hash-based-pycs=never` too)
            if _PYTHON_LONG_OPTIONS[word]:
                if i >= len(args):
                    return None
                i += 1
            elif word.startswith("--help"):
                return None
            continue
        for at, letter in enumerate(word[1:], start=1):
            if letter in _PYTHON_VALUE_OPTIONS:
                value = word[at + 1:]
                if not value:
                    if i >= len(args):
                        return None
                    value, i = args[i], i + 1
                if letter in "cm":
                    return "-" + letter, value, args[i:]
                break
            if letter not in _PYTHON_PLAIN_OPTIONS or letter in _PYTHON_EXITS:
                return None
    if i >= len(args) or args[i] == "-":
        return None
    return "file", args[i], args[i + 1:]


def engine_invocation(argv: list[str]) -> tuple[EngineKind, list[str]] | None:
    """The engine argv runs and the words its own parser reads: its program, or the script or
    module a Python interpreter runs."""
    if not argv:
        return None
    program, rest = os.path.basename(argv[0]), argv[1:]
    if program.startswith("python"):
        run = python_program(rest)
        if run is None or run[0] == "-c":
            return None
        how, what, rest = run
        if how == "-m":
            if what.startswith("vllm.entrypoints"):
                return EngineKind.VLLM, rest
            if what == "sglang.launch_server":
                return EngineKind.SGLANG, rest
            return None
        program = os.path.basename(what)
    if program == "vllm" and rest[:1] == ["serve"]:
        return EngineKind.VLLM, rest[1:]
    if program == "sglang" and rest[:1] == ["serve"]:
        return EngineKind.SGLANG, rest[1:]
    return None


def engine_kind(argv: list[str]) -> EngineKind | None:
    """The engine argv runs, or None: also what `modeldrain lint` and `modeldrain inject` recognise
    an engine container by."""
    command = engine_invocation(argv)
    return command[0] if command is not None else None


def _port(text: str | None) -> int | None:
    """The engine's --port when it is a valid port; an engine that would not start on it has none."""
    if text is None:
        return None
    try:
        return parse_port(text)
    except ValueError:
        return None
