"""The catalogue of hostile inputs `prestop` is run against: what the engine, the Pod and the node do.

Each case says what answers on the engine's port, what else is hostile (flags, files, log pipes,
signals, descriptors), whether the engine is truly idle, and which exit codes a correct hook
gives. The truth comes from the case, never from the hook: a served body's work is what its
gauges say (for the corpus of bodies that once broke a reader, prometheus-client's parse of the
whole body, tests/hook/metrics_oracle.py, decides), and an emulated engine holds requests.

Every drain runs with a short window so that a case costs seconds: G = GRACE_S, exit reserve
EXIT_RESERVE_S, first read after ROUTE_WAIT_S, so the deadline is DEADLINE_S after the exec.
"""

from __future__ import annotations

import enum
import json
import signal
from dataclasses import dataclass
from typing import Callable, Sequence

from bench.reliability import bodies
from modeldrain.hook.constants import READ_TIMEOUT_S, SIDECAR_SCHEMA
from modeldrain.hook.exitcodes import ExitCode
from modeldrain.hook.gauges import EngineKind, Role
from tests.hook.metrics_oracle import oracle_series, oracle_verdict

GRACE_S = 4.0
EXIT_RESERVE_S = 2.0
ROUTE_WAIT_S = 0.5
DEADLINE_S = GRACE_S - EXIT_RESERVE_S
DRAIN_ARGS = ("--grace", f"{GRACE_S:g}", "--exit-reserve", f"{EXIT_RESERVE_S:g}", "--route-wait", f"{ROUTE_WAIT_S:g}")

# What a correct hook ends with.
DRAINED = frozenset({ExitCode.OK})
DEADLINE = frozenset({ExitCode.DEADLINE})
EITHER = frozenset({ExitCode.OK, ExitCode.DEADLINE})  # idle when it can be certain in time, else waiting
UNMEASURABLE = frozenset({ExitCode.UNMEASURABLE})
USAGE = frozenset({ExitCode.USAGE})
CHECK_BUSY = frozenset({ExitCode.NOT_CLEARED})
# A SIGTERM before the handler is installed (the interpreter starting, or a bundle's launchers
# unpacking: modeldrain/hook/bundle.py) ends the process by the signal's default action: documented, and the
# bundle's next start removes what it left in $TMPDIR.
TERMINATED_OR_KILLED_BEFORE_THE_HANDLER = frozenset({ExitCode.TERMINATED, -signal.SIGTERM})

# A worker whose leader never gave one answer it can trust: unknown, waited on to the deadline.
LEADER_UNREACHABLE = frozenset({ExitCode.LEADER_UNREACHABLE})

# Every status the drain and `prestop check` may end with (modeldrain/hook/cli.py EXIT_CODES_HELP).
DOCUMENTED_DRAIN_CODES = frozenset({0, 2, 10, 11, 12, 130, 131, 143})
DOCUMENTED_CHECK_CODES = frozenset({0, 1, 2, 11, 12})


@dataclass(frozen=True)
class Canned:
    """The whole response, sent after the request's head, then the connection closes."""

    payload: bytes


@dataclass(frozen=True)
class Streamed:
    """`head`, then `repeat` every `every_s` for as long as the reader stays: an answer that never ends."""

    head: bytes
    repeat: bytes
    every_s: float


@dataclass(frozen=True)
class Emulated:
    """The engine emulator (vLLM) with requests in flight, misbehaving in this mode
    (emulation/misbehaviour.py)."""

    mode: str


@dataclass(frozen=True)
class NothingListens:
    """A port nothing listens on: connections are refused."""


@dataclass(frozen=True)
class Sequenced:
    """The n-th connection gets the n-th payload, the last one every connection after: an engine whose
    answers change between reads."""

    payloads: tuple[bytes, ...]


@dataclass(frozen=True)
class GuessedPort:
    """Nothing names the engine's port, so the hook can only guess its engine's default (`port`),
    where nothing listens: the bench holds it bound and never listening on both loopback addresses,
    so every connection there is refused."""

    port: int


@dataclass(frozen=True)
class StandIn:
    """A process of its own (bench/reliability/stand_in.py) listening on its own socket and answering
    every request busy or idle. Named `vllm` and run as `vllm serve m ...`, it is a vLLM engine to the
    hook; named otherwise, someone else. `host` with a `:` is IPv6 only. `shares`: the index of an
    earlier stand-in whose port it binds too (on the other address family), else a port of its own;
    `in_container`: whether the run's /proc shows it."""

    name: str
    busy: bool
    host: str = "0.0.0.0"
    shares: int | None = None
    in_container: bool = True

    @property
    def argv(self) -> tuple[str, ...]:
        serve = ("serve", "m") if self.name == "vllm" else ()
        return (*serve, "--host", self.host, "--port", "{port}")


@dataclass(frozen=True)
class Listeners:
    """Stand-in processes, each on its own socket; the ports of their own are free ports taken in
    ascending order, in the order given. "{port0}", "{port1}", ... in a case's args are their ports."""

    stand_ins: tuple[StandIn, ...]


Served = Canned | Streamed | Emulated | NothingListens | Sequenced | GuessedPort | Listeners
# What the bench's own listener (or none, or stand-in processes) serves.
Scripted = Canned | Streamed | NothingListens | Sequenced | GuessedPort | Listeners


class Stdio(enum.Enum):
    PIPES = "pipes"  # stdout and stderr are pipes the bench reads
    STDERR_CLOSED = "stderr closed"  # descriptor 2 closed at the exec
    STDERR_STALLED = "stderr stalled"  # stderr a pipe already full that nobody reads
    MIRROR_STALLED = "mirror stalled"  # not --quiet: the container-log mirror is a full FIFO nobody reads


@dataclass(frozen=True)
class Signal:
    signum: int
    at_s: float  # after the exec


@dataclass(frozen=True)
class HostileCase:
    name: str
    group: str
    served: Served
    idle_is_true: bool  # the engine is idle and says so: only then is "idle" (exit 0) right
    expected: frozenset[int]  # what a correct hook exits with
    subcommand: tuple[str, ...] = ()  # ("check",): `prestop check` instead of the drain
    args: tuple[str, ...] = ()
    stdio: Stdio = Stdio.PIPES
    annotations: bytes | None = None  # the downward-API annotations file's content
    annotations_fifo: bool = False  # the annotations file is a FIFO nobody writes
    annotations_link: str | None = None  # the annotations file is a symlink to this path
    engine_argv: tuple[str, ...] = ()  # a visible engine process: `vllm` with these arguments
    # The engine's own reading (issue 25): the hook is given no --port and must find the served port
    # where the engine reads it; "{port}" in engine_argv and in engine_files stands for that port.
    port_from_engine: bool = False
    engine_files: tuple[tuple[str, str], ...] = ()  # (path, text) written in the engine's working directory
    engine_is_python: bool = False  # the engine process is this Python with engine_argv (`-m …`), not `vllm`
    signal: Signal | None = None
    descriptors_spent: bool = False  # from its first log line on, no descriptor is left (EMFILE on connect)
    follows_leader: bool = False  # what answers is a worker's leader's drain-sidecar (--follow-leader), not its engine

    @property
    def is_drain(self) -> bool:
        return not self.subcommand

    @property
    def deadline_s(self) -> float:
        """When a correct hook has returned, after its exec: G - reserve, or one read's bound."""
        return DEADLINE_S if self.is_drain else READ_TIMEOUT_S

    @property
    def documented_codes(self) -> frozenset[int]:
        return DOCUMENTED_DRAIN_CODES if self.is_drain else DOCUMENTED_CHECK_CODES


def _body(name: str, group: str, body: bytes, *, idle: bool, content_type: str = bodies.TEXT,
          expected: frozenset[int] | None = None) -> HostileCase:
    served = Canned(bodies.http_200(body, content_type))
    return HostileCase(name, group, served, idle_is_true=idle,
                       expected=expected if expected is not None else (DRAINED if idle else DEADLINE))


BUSY = Canned(bodies.http_200(bodies.BUSY_VLLM))
_5_MB = 5 * 1024 * 1024
_0_9_MB = 900 * 1024


def scripted_cases() -> list[HostileCase]:
    """Every case a scripted listener (or no listener) serves, in the issue's order."""
    framing, values, paths, cost, logs, sigs, flags, resources = (
        "HTTP framing", "values", "paths and ports", "parse cost", "logs and files", "signals", "flags",
        "resources")
    heavy_lines = bodies.labels_to_fill(bodies.LINE_CAP_CHARS - 6)
    cases = [
        HostileCase("chunk size not hex (zz)", framing, Canned(bodies.chunked_200(bodies.BUSY_VLLM, b"zz")),
                    idle_is_true=False, expected=DEADLINE),
        HostileCase("chunk size of 40 hex digits", framing, Canned(bodies.chunked_200(bodies.BUSY_VLLM, b"f" * 40)),
                    idle_is_true=False, expected=DEADLINE),
        HostileCase("nothing listens (connection refused)", framing, NothingListens(), idle_is_true=False,
                    expected=UNMEASURABLE),
        HostileCase("endless 100 Continue", framing, Streamed(b"", b"HTTP/1.1 100 Continue\r\n\r\n", 0.01),
                    idle_is_true=False, expected=DEADLINE),
        HostileCase("endless headers", framing, Streamed(b"HTTP/1.1 200 OK\r\n", b"X-Pad: 1\r\n", 0.01),
                    idle_is_true=False, expected=DEADLINE),
        HostileCase("Content-Length of 31 digits", framing,
                    Canned(b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 31 + b"\r\n\r\n" + bodies.IDLE_VLLM),
                    idle_is_true=False, expected=DEADLINE),
        _body("a body that is not UTF-8", values, bodies.IDLE_VLLM + b"# \xff\xfe\n", idle=False),
        _body("work gauge: an integer too large for a float", values, bodies.vllm_body(bodies.TOO_LARGE_FOR_A_FLOAT),
              idle=False),
        _body("restart counter: an integer too large for a float", values,
              bodies.vllm_body("0", extra=f"vllm:request_success_total {bodies.TOO_LARGE_FOR_A_FLOAT}\n"), idle=True),
        _body("process_start_time_seconds: an integer too large for a float", values,
              bodies.vllm_body("0", extra=f"process_start_time_seconds {bodies.TOO_LARGE_FOR_A_FLOAT}\n"), idle=True),
        HostileCase("--path with non-ASCII (/m\u00e9trics)", paths, BUSY, idle_is_true=False, expected=USAGE,
                    args=("--path", "/m\u00e9trics")),
        HostileCase("prometheus.io/path annotation with non-ASCII", paths, BUSY, idle_is_true=False,
                    expected=DEADLINE, annotations='prometheus.io/path="/m\u00e9trics"\n'.encode()),
        HostileCase("visible engine with --port \u00b2 (isdigit, not int)", paths, BUSY, idle_is_true=False,
                    expected=DEADLINE, engine_argv=("serve", "--port", "\u00b2")),
        HostileCase("prestop check, visible engine with --port \u00b2", paths, BUSY, idle_is_true=False,
                    expected=CHECK_BUSY, subcommand=("check",), engine_argv=("serve", "--port", "\u00b2")),
        _body(f"one work line of {bodies.MANY_LABELS} labels (busy)", cost,
              (bodies.labelled_line("vllm:num_requests_running", bodies.MANY_LABELS, "1")
               + 'vllm:num_requests_waiting{engine="0"} 0\n').encode(), idle=False),
        _body(f"1.3 MB of {bodies.MANY_LABELS}-label lines (idle gauges)", cost,
              bodies.heavy_idle_body(1_300_000, bodies.MANY_LABELS), idle=True, expected=EITHER),
        _body(f"2.3 MB of {bodies.MANY_LABELS}-label lines (idle gauges)", cost,
              bodies.heavy_idle_body(2_300_000, bodies.MANY_LABELS), idle=True, expected=EITHER),
        _body(f"2.3 MB of lines at the {bodies.LINE_CAP_CHARS}-character cap (idle gauges)", cost,
              bodies.heavy_idle_body(2_300_000, heavy_lines), idle=True, expected=EITHER),
        _body("3000 work-gauge series (idle)", cost,
              "".join(f'vllm:num_requests_running{{rank="{i}"}} 0\nvllm:num_requests_waiting{{rank="{i}"}} 0\n'
                      for i in range(1500)).encode(), idle=True, expected=EITHER),
        HostileCase("stderr: a full pipe nobody reads", logs, BUSY, idle_is_true=False, expected=DEADLINE,
                    stdio=Stdio.STDERR_STALLED),
        HostileCase("container log (PID 1's stdout): a full FIFO nobody reads", logs, BUSY, idle_is_true=False,
                    expected=DEADLINE, stdio=Stdio.MIRROR_STALLED),
        HostileCase("stderr closed at exec", logs, BUSY, idle_is_true=False, expected=DEADLINE,
                    stdio=Stdio.STDERR_CLOSED),
        HostileCase("annotations file is a FIFO", logs, BUSY, idle_is_true=False, expected=DEADLINE,
                    annotations_fifo=True),
        HostileCase("annotations file is /dev/zero (endless)", logs, BUSY, idle_is_true=False, expected=DEADLINE,
                    annotations_link="/dev/zero"),
        HostileCase("a 5 MB annotation value", logs, BUSY, idle_is_true=False, expected=DEADLINE,
                    annotations=b'prometheus.io/path="/' + b"a" * _5_MB + b'"\n'),
        HostileCase("a 0.9 MB annotation value (under the file's cap)", logs, BUSY, idle_is_true=False,
                    expected=DEADLINE, annotations=b'prometheus.io/path="' + b"a" * _0_9_MB + b'"\n'),
        HostileCase("SIGINT mid-drain (at 1 s)", sigs, BUSY, idle_is_true=False,
                    expected=frozenset({ExitCode.INTERRUPTED}), signal=Signal(signal.SIGINT, 1.0)),
        HostileCase("SIGTERM mid-drain (at 1 s)", sigs, BUSY, idle_is_true=False,
                    expected=frozenset({ExitCode.TERMINATED}), signal=Signal(signal.SIGTERM, 1.0)),
        HostileCase("SIGQUIT mid-drain (at 1 s)", sigs, BUSY, idle_is_true=False,
                    expected=frozenset({ExitCode.QUIT}), signal=Signal(signal.SIGQUIT, 1.0)),
        # Stray signals (modeldrain/hook/signals.py): ignored, so the busy drain still ends at its deadline.
        *[HostileCase(f"{signal.Signals(signum).name} mid-drain (at 1 s): ignored", sigs, BUSY, idle_is_true=False,
                      expected=DEADLINE, signal=Signal(signum, 1.0))
          for signum in (signal.SIGHUP, signal.SIGUSR1, signal.SIGALRM, signal.SIGPIPE, signal.SIGTSTP)],
        *[HostileCase(f"SIGTERM at {ms} ms", sigs, BUSY, idle_is_true=False,
                      expected=TERMINATED_OR_KILLED_BEFORE_THE_HANDLER, signal=Signal(signal.SIGTERM, ms / 1000))
          for ms in (100, 200, 300, 500)],
        HostileCase("--route-wait 1e10", flags, BUSY, idle_is_true=False, expected=USAGE,
                    args=("--route-wait", "1e10")),
        HostileCase("no descriptor left at connect (EMFILE)", resources, BUSY, idle_is_true=False,
                    expected=DEADLINE, descriptors_spent=True),
    ]
    return (cases + issue_15_cases() + issue_25_framing_cases() + corpus_cases() + leader_cases() + issue_25_cases()
            + issue_25_listener_cases() + issue_25_stale_zero_cases())


# What each --config file says, in a form PyYAML (so vLLM) reads as the served port, which a reader
# of its own did not; "{port}" and "{other}" stand for the served port and for a port nothing serves.
ENGINE_CONFIGS = {
    "a quoted value spanning lines with a port line": 'port: {port}\nchat-template: "a\nport: {other}\nlast: line"\n',
    "a UTF-8 BOM": "\ufeffport: {port}\n",
    "JSON lines": '"port": {port}\n"host": "127.0.0.1"\n',
    "a JSON object": '{{"port": {port}}}\n',
    "a YAML 1.1 hex integer": "port: {port_hex}\n",
    "a YAML 1.1 integer with underscores": "port: {port_underscored}\n",
    "a YAML 1.1 octal integer": "port: {port_octal}\n",
    "a %YAML 1.1 directive": "%YAML 1.1\n---\nport: {port}\n",
    "a merge key": "<<: {{port: {port}}}\n",
}
# --config files the hook cannot read as the engine does: the port is unknown, never the default.
UNREADABLE_CONFIGS = {
    "an alias bomb": "".join(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}" if i else '"lol"'] * 9) + "]\n"
                             for i in range(9)) + "port: {port}\n",
    "not YAML": "port: [{port}\n",
}
_STUB_MODULE = (("vllm/__init__.py", ""), ("vllm/entrypoints/__init__.py", ""),
                ("vllm/entrypoints/openai/__init__.py", ""),
                ("vllm/entrypoints/openai/api_server.py", "import time\ntime.sleep(600)\n"))


def issue_25_cases() -> list[HostileCase]:
    """A busy engine whose port only its own argv or --config says, in the spellings its own readers
    (PyYAML, argparse, CPython) accept: a correct hook reads it busy to the deadline. A hook that
    reads another port is refused there (exit 11) or reads what else answers."""
    group = "the engine's own reading (issue 25)"
    cases = [HostileCase(f"--config with {name}", group, BUSY, idle_is_true=False, expected=DEADLINE,
                         port_from_engine=True, engine_argv=("serve", "m", "--config", "serve.yaml"),
                         engine_files=(("serve.yaml", text),))
             for name, text in ENGINE_CONFIGS.items()]
    cases += [HostileCase(f"--config with {name}: the port unknown", group, BUSY, idle_is_true=False,
                          expected=DEADLINE, port_from_engine=True, engine_argv=("serve", "m", "--config", "serve.yaml"),
                          engine_files=(("serve.yaml", text),))
              for name, text in UNREADABLE_CONFIGS.items()]
    cases += [
        HostileCase("argv: --port past 64 KiB of --chat-template", group, BUSY, idle_is_true=False, expected=DEADLINE,
                    port_from_engine=True, engine_argv=("serve", "m", "--chat-template", "{{ messages }}" * 8000,
                                                        "--port", "{port}")),
        HostileCase("argv: a unique prefix (--por)", group, BUSY, idle_is_true=False, expected=DEADLINE,
                    port_from_engine=True, engine_argv=("serve", "m", "--port", "{other}", "--por", "{port}")),
        HostileCase("argv: python -mvllm.entrypoints.openai.api_server", group, BUSY, idle_is_true=False,
                    expected=DEADLINE, port_from_engine=True, engine_is_python=True, engine_files=_STUB_MODULE,
                    engine_argv=("-mvllm.entrypoints.openai.api_server", "--port", "{port}")),
        HostileCase("argv: python --check-hash-based-pycs never -Bm …", group, BUSY, idle_is_true=False,
                    expected=DEADLINE, port_from_engine=True, engine_is_python=True, engine_files=_STUB_MODULE,
                    engine_argv=("--check-hash-based-pycs", "never", "-X", "utf8", "-Bm",
                                 "vllm.entrypoints.openai.api_server", "--port", "{port}")),
    ]
    return cases


def issue_25_listener_cases() -> list[HostileCase]:
    """Where the engine listens is what the kernel says (issue 25, items 3 and 4): stand-in processes
    on sockets of their own, the engine's among them busy. An IPv6-only engine on `--host ::` with
    another process answering idle on IPv4 at its port; several vLLM engines in one container, one
    busy; and a port nothing named, guessed (the engine's default), refused there. Each hides a busy
    or unknown engine: the drain waits to its deadline, the check says not cleared."""
    group = "where the engine listens (issue 25)"
    engine_v6 = StandIn("vllm", busy=True, host="::", shares=0)

    def listening(name: str, *stand_ins: StandIn, args: tuple[str, ...] = (),
                  subcommand: tuple[str, ...] = ()) -> HostileCase:
        return HostileCase(name, group, Listeners(stand_ins), idle_is_true=False,
                           expected=CHECK_BUSY if subcommand else DEADLINE, subcommand=subcommand, args=args,
                           port_from_engine=True)

    idle, busy = StandIn("vllm", busy=False), StandIn("vllm", busy=True)
    impostor = StandIn("exporter", busy=False, host="127.0.0.1", in_container=False)
    impostor_any = StandIn("exporter", busy=False, host="0.0.0.0", in_container=False)
    cases = [
        listening("IPv6-only engine on --host ::, busy; another process idle on 127.0.0.1 at its port",
                  impostor, engine_v6),
        listening("IPv6-only engine on --host ::, busy; another process idle on 0.0.0.0 at its port",
                  impostor_any, engine_v6),
        listening("IPv6-only engine, busy, its port named by --port; another process idle on 127.0.0.1 there",
                  impostor, engine_v6, args=("--port", "{port1}")),
        listening("prestop check, IPv6-only engine busy; another process idle on 127.0.0.1 at its port",
                  impostor, engine_v6, subcommand=("check",)),
        listening("two vLLM engines, the idle one on the lower port, no port named", idle, busy),
        listening("two vLLM engines, the idle one on the higher port, no port named", busy, idle),
        listening("two vLLM engines, --port names the idle one", idle, busy, args=("--port", "{port0}")),
        listening("three vLLM engines, the busy one between two idle ones", idle, busy, idle),
        listening("prestop check, two vLLM engines, one idle, one busy", idle, busy, subcommand=("check",)),
    ]
    guessed = {"vllm": 8000, "sglang": 30000}
    cases += [HostileCase(f"a refusal at a guessed port ({kind}'s default {port}, nothing names it)", group,
                          GuessedPort(port), idle_is_true=False, expected=DEADLINE, port_from_engine=True,
                          args=("--engine", kind))
              for kind, port in guessed.items()]
    cases += [
        HostileCase("a refusal at a guessed port (a vLLM engine seen, listening nowhere, no --port)", group,
                    GuessedPort(guessed["vllm"]), idle_is_true=False, expected=DEADLINE, port_from_engine=True,
                    engine_argv=("serve", "m")),
        HostileCase("prestop check, a refusal at a guessed port (vLLM's default)", group, GuessedPort(guessed["vllm"]),
                    idle_is_true=False, expected=CHECK_BUSY, subcommand=("check",), port_from_engine=True,
                    args=("--engine", "vllm")),
    ]
    return cases


SGLANG_IDLE_GAUGES = ('sglang:num_running_reqs{engine_type="unified"} 0\n'
                      'sglang:num_queue_reqs{engine_type="unified"} 0\n'
                      '# TYPE sglang:scheduler_process_cpu_seconds_total counter\n')
# The heartbeat series of the n-th read: (tp_rank, value) in body order.
RanksOfRead = Callable[[int], Sequence[tuple[str, str]]]
# Reads a stale-zero case's engine answers at most (the last repeated): more than one drain makes.
_SEQUENCE_READS = 16


def sglang_idle_body(*ranks: tuple[str, str]) -> bytes:
    """SGLang's work gauges at zero, and one scheduler heartbeat series per (tp_rank, value) in the
    order given: none, a heartbeat absent from the body."""
    return (SGLANG_IDLE_GAUGES + "".join(
        f'sglang:scheduler_process_cpu_seconds_total{{engine_type="unified",tp_rank="{rank}"}} {value}\n'
        for rank, value in ranks)).encode()


def _answers(ranks_of_read: RanksOfRead) -> Sequenced:
    return Sequenced(tuple(bodies.http_200(sglang_idle_body(*ranks_of_read(n))) for n in range(_SEQUENCE_READS)))


def issue_25_stale_zero_cases() -> list[HostileCase]:
    """SGLang's stale-zero rule (issue 25, item 6): every work gauge zero on every read, and a scheduler
    heartbeat that never shows every scheduler ran since the previous read (NaN or +-Inf; absent,
    then present; ranks whose series swap order, are relabelled or go, one of them frozen). Each zero
    may be a long forward pass's, so the engine is not known idle: the drain waits to its deadline.
    The control: every rank's heartbeat advancing, in whatever order, is a fresh zero (idle)."""
    group = "SGLang's stale zero (issue 25)"

    def stale(name: str, ranks_of_read: RanksOfRead) -> HostileCase:
        return HostileCase(name, group, _answers(ranks_of_read), idle_is_true=False, expected=DEADLINE)

    def swapped(*ranks: tuple[str, str], n: int) -> tuple[tuple[str, str], ...]:
        return ranks if n % 2 == 0 else tuple(reversed(ranks))

    cases = [
        stale("heartbeat NaN after the first read", lambda n: [("0", "3.0" if n == 0 else "NaN")]),
        stale("heartbeat +Inf after the first read", lambda n: [("0", "3.0" if n == 0 else "+Inf")]),
        stale("heartbeat -Inf after the first read", lambda n: [("0", "3.0" if n == 0 else "-Inf")]),
        stale("one of two ranks' heartbeat NaN, the other advancing",
              lambda n: [("0", f"{3 + n}.0"), ("1", "3.0" if n == 0 else "NaN")]),
        stale("heartbeat absent on the first read, constant after", lambda n: [] if n == 0 else [("0", "4.0")]),
        stale("two ranks swapping order every read, rank 0 frozen",
              lambda n: swapped(("0", "5.0"), ("1", f"{3 + 6 * n}.0"), n=n)),
        stale("a rank relabelled every read, each series advancing",
              lambda n: [("0", f"{5 + n}.0"), (str(n + 1), f"{3 + n}.0")]),
        stale("a rank's series gone after the first read, the other advancing",
              lambda n: [("0", f"{5 + n}.0"), ("1", "3.0")] if n == 0 else [("0", f"{5 + n}.0")]),
        HostileCase("control: two ranks swapping order, both advancing (a fresh zero)", group,
                    _answers(lambda n: swapped(("0", f"{5 + n}.0"), ("1", f"{3 + n}.0"), n=n)), idle_is_true=True,
                    expected=DRAINED),
    ]
    return cases


def issue_15_cases() -> list[HostileCase]:
    """A work gauge hidden from prometheus-client's parse, and framing RFC 9112 does not trust: each
    read idle with a busy series behind it. The truth is the case's: busy (the hidden line holds work)."""
    hidden, framing = "work gauge hidden", "HTTP framing (RFC 9112)"
    cases = [_body(name, hidden, bodies.hidden_work_body(line), idle=False)
             for name, line in bodies.HIDDEN_WORK_LINES.items()]
    cases += [HostileCase(name, framing, Canned(wire), idle_is_true=False, expected=DEADLINE)
              for name, wire in bodies.UNTRUSTED_FRAMING.items()]
    cases += [HostileCase("103 and 102 before a busy 200", framing, Canned(bodies.INTERIM_THEN_BUSY),
                          idle_is_true=False, expected=DEADLINE),
              HostileCase("103 Early Hints before an idle 200", framing, Canned(bodies.INTERIM_THEN_IDLE),
                          idle_is_true=True, expected=DRAINED)]
    return cases


def issue_25_framing_cases() -> list[HostileCase]:
    """Issue 25's HTTP framing classes: a parse that backtracked past the deadline on long whitespace
    runs in a field value (drained and `prestop check`ed), and bytes behind a body that ends by its
    own framing (a chunked body's last chunk and trailer, a 204). Each hides a busy engine: the drain
    waits to its deadline and no later, the check says busy within its read timeout."""
    group = "HTTP framing (issue 25)"
    cases = [HostileCase(name, group, Canned(wire), idle_is_true=False, expected=DEADLINE)
             for name, wire in {**bodies.WHITESPACE_HEADS, **bodies.BEHIND_FRAMED_BODIES}.items()]
    cases += [HostileCase(f"prestop check, {name}", group, Canned(wire), idle_is_true=False, expected=CHECK_BUSY,
                          subcommand=("check",))
              for name, wire in bodies.WHITESPACE_HEADS.items()]
    cases.append(HostileCase(f"prestop check, {next(iter(bodies.BEHIND_FRAMED_BODIES))}", group,
                             Canned(next(iter(bodies.BEHIND_FRAMED_BODIES.values()))), idle_is_true=False,
                             expected=CHECK_BUSY, subcommand=("check",)))
    return cases


def corpus_cases() -> list[HostileCase]:
    """Every body of tests/hook/corpus/exposition: leading whitespace, the name as a __name__ label
    or quoted, OpenMetrics' duplicate series, an SGLang role's queues on an undetected role, ...
    Their truth is prometheus-client's parse of the whole body (the engine's role unknown, as the
    hook sees it: every queue of the engine counts); an OpenMetrics body is idle only when the
    text grammar reads it idle too, since OpenMetrics keeps the first of two samples of a series
    where the text grammar keeps both (the issue's series-twice body: 0, then 4 in flight)."""
    cases = []
    for name, body, content_type in bodies.corpus_bodies():
        kind = EngineKind.SGLANG if b"sglang:" in body else EngineKind.VLLM
        grammars = [(body, content_type)]
        if content_type == bodies.OPENMETRICS:
            grammars.append((body.replace(b"# EOF\n", b"").replace(b"# EOF", b""), bodies.TEXT))
        idle = all(_oracle_idle(text, grammar, kind) for text, grammar in grammars)
        cases.append(_body(name, "bodies that broke a reader", body, idle=idle, content_type=content_type))
    return cases


def _oracle_idle(body: bytes, content_type: str, kind: EngineKind) -> bool:
    series = oracle_series(body, content_type)
    return series is not None and oracle_verdict(series, kind, Role.UNIFIED).status == "idle"


def leader_answer(schema: str = SIDECAR_SCHEMA, **read: object) -> bytes:
    """A 200 with a drain-sidecar's /v1/work answer (an idle one, with `read`'s fields replaced)."""
    fields = {"seq": 1, "outcome": "idle", "verdict": "idle", "complete": True, "idle": True, "in_flight": 0,
              "detail": "every work gauge reads zero", **read}
    body = {"schema": schema, "sidecar": {"instance": "f" * 32}, "engine": {"incarnation": 0}, "read": fields}
    return bodies.http_200(json.dumps(body).encode(), "application/json")


def leader_cases() -> list[HostileCase]:
    """A worker's hook (--follow-leader) against leaders whose answers it cannot trust: a schema it
    was not written for, fields that contradict each other, a frozen answer, an error, nothing. Its
    leader's work is unknown in each, so idle is never right; a leader that never gave one answer to
    trust is unreachable (exit 12) at the deadline, and one that did but never a fresh idle pair is
    the deadline (10)."""
    group = "hostile leader answers"

    def leader(name: str, payload: bytes, expected: frozenset[int] = LEADER_UNREACHABLE) -> HostileCase:
        return HostileCase(name, group, Canned(payload), idle_is_true=False, expected=expected, follows_leader=True)

    return [
        leader("schema modeldrain.sidecar/v999, idle", leader_answer("modeldrain.sidecar/v999")),
        leader("schema modeldrain.sidecar/v1, idle", leader_answer("modeldrain.sidecar/v1")),
        leader("no schema, idle", leader_answer("")),
        leader("idle: true while outcome busy", leader_answer(outcome="busy", verdict="busy", in_flight=4)),
        leader("outcome idle with 3 in flight", leader_answer(in_flight=3)),
        leader("verdict idle, outcome busy", leader_answer(outcome="busy", idle=False, in_flight=2)),
        leader("complete: false, outcome idle", leader_answer(complete=False)),
        leader("outcome busy with 0 in flight", leader_answer(outcome="busy", verdict="busy", idle=False)),
        leader("an outcome the hook does not know", leader_answer(outcome="drained")),
        leader("in_flight as a string", leader_answer(in_flight="0")),
        leader("in_flight negative", leader_answer(in_flight=-1)),
        leader("a JSON array", bodies.http_200(b"[]", "application/json")),
        leader("an HTML page (a wrong port)", bodies.http_200(b"<html>not found</html>", "text/html")),
        leader("401 (a wrong token)", b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
        HostileCase("nothing listens (a wrong host or port)", group, NothingListens(), idle_is_true=False,
                    expected=LEADER_UNREACHABLE, follows_leader=True),
        # A sidecar that repeats one idle answer (its seq never moves): never a fresh second idle read.
        leader("a frozen leader repeating one idle answer", leader_answer(), expected=DEADLINE),
        HostileCase("prestop check, schema modeldrain.sidecar/v999", group, Canned(leader_answer("modeldrain.sidecar/v999")),
                    idle_is_true=False, expected=LEADER_UNREACHABLE, subcommand=("check",), follows_leader=True),
        HostileCase("prestop check, idle: true while outcome busy", group,
                    Canned(leader_answer(outcome="busy", verdict="busy", in_flight=4)), idle_is_true=False,
                    expected=LEADER_UNREACHABLE, subcommand=("check",), follows_leader=True),
    ]


# The emulator's misbehaviours, each with two requests in flight: what a correct hook ends with.
EMULATED_EXPECTED: dict[str, frozenset[int]] = {
    "hang": DEADLINE, "drip": DEADLINE, "slow-headers": DEADLINE, "garbage": DEADLINE, "nan": DEADLINE,
    "negative": DEADLINE, "inf": DEADLINE, "huge": DEADLINE, "missing": DEADLINE,
    # An HTTP error status ends the drain (nothing to measure), redirects included: never followed
    # to the idle-looking decoy.
    "http500": UNMEASURABLE, "redirect": UNMEASURABLE,
}


def emulated_cases() -> list[HostileCase]:
    return [HostileCase(f"emulator: {mode}", "engine misbehaviours", Emulated(mode), idle_is_true=False,
                        expected=expected) for mode, expected in EMULATED_EXPECTED.items()]
