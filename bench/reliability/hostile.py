"""The real `prestop` against every hostile input of the catalogue: crashes, false idles, overruns.

    .venv/bin/python -m bench.reliability.hostile [--executables bundle,console] [--jobs 3] [--json out.json]
        [--group TEXT ...]

Each case is one exec of the hook (the bundle dist/prestop and the console script .venv/bin/prestop)
against a real listener on loopback: a scripted one serving the case's bytes (the same on every
connection, or each read its own), none at all (a port held bound, never listening: a guessed
default port included), stand-in processes each listening on a socket of its own (their own
listeners to the kernel, bench/reliability/stand_in.py), or the engine emulator with two requests
in flight misbehaving. Its stdout and stderr are pipes the bench
reads (unless the case closes or stalls one); its $TMPDIR, /proc (what it sees of the engine's
processes) and annotations file are private to the run. Per run:

- exit code (negative: killed by that signal), and whether a Python traceback appeared anywhere;
- false idle: it said idle (exit 0, or a final `idle` outcome) while the engine was not idle;
- lateness: its exit, measured here from just before the exec, minus its deadline (G - reserve
  for a drain, one read's bound for `prestop check`): above OVERRUN_TOLERANCE_S is an overrun;
- the longest log line, lines dropped (its own count), and what it left in $TMPDIR.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Callable, Iterator

from bench.paths import PRESTOP_BUNDLE, PRESTOP_CONSOLE_SCRIPT, REPO
from bench.reliability import bodies
from bench.reliability.cases import (
    DRAIN_ARGS,
    Canned,
    Emulated,
    GuessedPort,
    HostileCase,
    Listeners,
    NothingListens,
    Scripted,
    Sequenced,
    StandIn,
    Stdio,
    Streamed,
    emulated_cases,
    scripted_cases,
)
from emulation.raw_server import RawServer, Responder, canned
from modeldrain.hook.events import MAX_LINE_BYTES

TRACEBACK = b"Traceback (most recent call last)"
# Past its deadline, a hook's exit may still wait on the scheduler of a loaded machine and on
# the bench noticing it (a pipe's EOF, waitpid): a return later than this is an overrun.
OVERRUN_TOLERANCE_S = 0.25
# A run that has not ended this long after its deadline is hung: it is killed and says so.
HUNG_AFTER_S = 30.0
# Every case runs a short G on purpose; the hook's warning that the operator would not admit it
# says nothing about the case.
ADMISSION_WARNING = "--grace "
# How long a case that spends the hook's descriptors waits for its first log line.
FIRST_LINE_WAIT_S = 5.0

Progress = Callable[[str], None]


@dataclass
class HostileRun:
    case: str
    group: str
    executable: str
    exit_code: int
    expected: list[int]
    seconds: float  # exec to exit, on this process's monotonic clock
    deadline_s: float
    traceback: bool
    outcome: str | None  # the drain's final outcome, or the check's read outcome
    own_elapsed_s: float | None  # the drain's own count, exec to its final line (drain_finished elapsed_s)
    said_idle: bool  # exit 0, or a final `idle`
    longest_log_line: int  # bytes, over every line it wrote that the bench could read
    stderr_lines: int | None  # non-empty lines on stderr; None when the case closes or stalls it
    log_lines_dropped: int | None
    temp_left: int  # entries left in its private $TMPDIR
    problems: list[str] = field(default_factory=list)
    detail: str = ""

    @property
    def lateness_s(self) -> float:
        return self.seconds - self.deadline_s

    @property
    def own_lateness_s(self) -> float | None:
        """Its final line's own elapsed_s past the deadline: when it decided, before its exit's teardown."""
        return None if self.own_elapsed_s is None else self.own_elapsed_s - self.deadline_s

    def as_dict(self) -> dict:
        own = self.own_lateness_s
        return dict(asdict(self), lateness_s=round(self.lateness_s, 3), seconds=round(self.seconds, 3),
                    own_lateness_s=None if own is None else round(own, 3))


def judge(case: HostileCase, run: HostileRun) -> list[str]:
    """What went wrong in a run, in words: empty when the hook did what a correct one does."""
    problems = []
    code = run.exit_code
    sent = case.signal.signum if case.signal else None
    if run.traceback:
        problems.append("crash: a traceback")
    elif code < 0 and -code != sent:
        problems.append(f"crash: killed by {signal.Signals(-code).name}")
    elif code >= 0 and code not in case.documented_codes:
        problems.append(f"crash: exit {code}, not a documented status")
    if not case.idle_is_true and run.said_idle:
        problems.append("false idle")
    if run.lateness_s > OVERRUN_TOLERANCE_S:
        problems.append(f"overrun: {run.lateness_s:.2f} s past its deadline")
    if code not in case.expected and not any(p.startswith("crash") for p in problems):
        problems.append(f"exit {code}, expected {'/'.join(str(c) for c in sorted(case.expected))}")
    if code == 2 and run.stderr_lines is not None and run.stderr_lines != 1:
        problems.append(f"a usage error of {run.stderr_lines} lines")  # one line says what is wrong
    if case.is_drain and code >= 0 and code != 2 and run.outcome is None:
        problems.append("no final line")
    if run.longest_log_line > MAX_LINE_BYTES:
        problems.append(f"a log line of {run.longest_log_line} bytes")
    if run.temp_left and code != -signal.SIGTERM:  # killed before its handler: the next start cleans up
        problems.append(f"left {run.temp_left} entries in $TMPDIR")
    return problems


# --- what the hook reads --------------------------------------------------------------------------

# An endless answer stops after this long even if its reader never leaves.
STREAM_MAX_S = 60.0


def streamed(served: Streamed) -> Responder:
    def respond(conn: socket.socket) -> None:
        conn.sendall(served.head)
        stop_at = time.monotonic() + STREAM_MAX_S
        while time.monotonic() < stop_at:  # until the reader leaves: then sendall raises
            conn.sendall(served.repeat)
            time.sleep(served.every_s)
    return respond


def in_turn(served: Sequenced) -> Responder:
    """The n-th connection's answer is the n-th payload; the last one answers every one after."""
    lock = threading.Lock()
    answered = [0]

    def respond(conn: socket.socket) -> None:
        with lock:
            n = answered[0]
            answered[0] += 1
        conn.sendall(served.payloads[min(n, len(served.payloads) - 1)])
    return respond


def responder(served: Canned | Streamed | Sequenced) -> Responder:
    if isinstance(served, Sequenced):
        return in_turn(served)
    return canned(served.payload) if isinstance(served, Canned) else streamed(served)


class NotRun(Exception):
    """A case whose precondition this machine does not meet (a port it needs is taken): not run."""


# One case at a time holds a guessed (fixed) port.
_GUESSED_PORT = threading.Lock()


@contextlib.contextmanager
def holding_refused(port: int) -> Iterator[int]:
    """`port` bound and never listening on 127.0.0.1 and [::1]: every connect there is refused, and
    no other process can listen there meanwhile."""
    with _GUESSED_PORT, contextlib.ExitStack() as stack:
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            sock = stack.enter_context(socket.socket(family, socket.SOCK_STREAM))
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind((host, port))
            except OSError as exc:
                raise NotRun(f"not run: {host} port {port} is taken on this machine ({exc.strerror})") from None
        yield port


@contextlib.contextmanager
def serving(served: Scripted) -> Iterator[int]:
    """The port the case's engine answers on, for as long as the run lasts (0 for stand-in processes:
    they are started with the run, bench/reliability/stand_in.py)."""
    if isinstance(served, Listeners):
        yield 0
        return
    if isinstance(served, GuessedPort):
        with holding_refused(served.port) as port:
            yield port
        return
    if not isinstance(served, NothingListens):
        with RawServer(responder(served)) as server:
            yield server.port
        return
    # Bound but never listening: refused, and no other process can take the port meanwhile.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def fake_engine(workdir: Path, argv: tuple[str, ...], python: bool = False) -> subprocess.Popen:
    """A real process whose command line is `python …/vllm <argv>`, as a console script's is; or
    `python <argv>` (python: a module in `workdir`, its working directory)."""
    program = sys.executable
    if not python:
        script = workdir / "vllm"
        script.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(600)\n")
        script.chmod(0o755)
        program = str(script)
    return subprocess.Popen([program, *argv], cwd=workdir,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


STAND_IN = REPO / "bench" / "reliability" / "stand_in.py"
STAND_IN_START_S = 20.0
BUSY_ANSWER = bodies.http_200(bodies.BUSY_VLLM)
IDLE_ANSWER = bodies.http_200(bodies.IDLE_VLLM)


def free_ports(count: int) -> list[int]:
    """`count` ports free on both loopback addresses just now, ascending."""
    ports: set[int] = set()
    while len(ports) < count:
        with socket.socket(socket.AF_INET) as v4, socket.socket(socket.AF_INET6) as v6:
            v4.bind(("127.0.0.1", 0))
            v6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                v6.bind(("::", v4.getsockname()[1]))
            except OSError:
                continue  # taken on IPv6: another
            ports.add(v4.getsockname()[1])
    return sorted(ports)


def stand_in(workdir: Path, index: int, which: StandIn, port: int) -> subprocess.Popen:
    """One stand-in process (StandIn), listening on `port` once this returns."""
    folder = workdir / f"stand-in-{index}"
    folder.mkdir()
    script = folder / which.name
    script.write_text(f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(STAND_IN)!r}, run_name='__main__')\n")
    script.chmod(0o755)
    (folder / "answer").write_bytes(BUSY_ANSWER if which.busy else IDLE_ANSWER)
    ready = folder / "ready"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "STAND_IN_PAYLOAD": str(folder / "answer"),
           "STAND_IN_READY": str(ready)}
    argv = [str(script), *(word.format(port=port) for word in which.argv)]
    with open(folder / "stderr", "wb") as stderr:
        process = subprocess.Popen(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=stderr)
    started = time.monotonic()
    while not ready.exists():
        if process.poll() is not None or time.monotonic() - started > STAND_IN_START_S:
            _end(process)
            said = (folder / "stderr").read_text("utf-8", "replace").strip().splitlines()
            raise NotRun(f"not run: the stand-in {' '.join(argv[1:])} did not listen ({said[-1] if said else ''})")
        time.sleep(0.02)
    return process


def stand_ins(workdir: Path, served: Listeners, stack: contextlib.ExitStack) -> list[int]:
    """Every stand-in of the case, running until `stack` closes; the port of each, in order. In
    the run's /proc: those in the container."""
    own = free_ports(sum(1 for s in served.stand_ins if s.shares is None))
    ports: list[int] = []
    for index, which in enumerate(served.stand_ins):
        port = own.pop(0) if which.shares is None else ports[which.shares]
        process = stand_in(workdir, index, which, port)
        stack.callback(_end, process)
        if which.in_container:
            (workdir / "proc" / str(process.pid)).symlink_to(f"/proc/{process.pid}")
        ports.append(port)
    return ports


def _engine_text(text: str, port: int) -> str:
    """A case's engine argv word or file with its port in place, in each spelling the cases use;
    {other}: a port nothing listens on (port 1, below every engine's)."""
    return text.format(port=port, other=1, port_hex=hex(port), port_octal=f"0{port:o}",
                       port_underscored=f"{port // 1000}_{port % 1000:03d}")


@contextlib.contextmanager
def stalled_fifo(path: Path) -> Iterator[None]:
    """A FIFO at `path` whose reader is open and never reads, filled to the brim."""
    os.mkfifo(path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    writer = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    try:
        _fill(writer)
        yield
    finally:
        os.close(writer)
        os.close(reader)


def _fill(fd: int) -> None:
    os.set_blocking(fd, False)
    try:
        while True:
            os.write(fd, b"x" * 65536)
    except BlockingIOError:
        pass  # full: what the case needs


def _lowest_free_fd(pid: int) -> int:
    used = {int(name) for name in os.listdir(f"/proc/{pid}/fd")}
    fd = 0
    while fd in used:
        fd += 1
    return fd


def spend_descriptors(pid: int) -> int:
    """Lower `pid`'s descriptor limit to its lowest free descriptor: its next socket() or open()
    fails with EMFILE, as a connect does when the node's ephemeral ports or the process's
    descriptors are exhausted, while the engine listens. Returns the limit set."""
    limit = _lowest_free_fd(pid)
    _, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, hard))
    return limit


# --- one run --------------------------------------------------------------------------------------

class _Collector:
    """Reads one of the hook's pipes to its end on a thread; notes its first JSON line's pid."""

    def __init__(self, stream: IO[bytes] | None) -> None:
        assert stream is not None
        self.data = bytearray()
        self.first_line = threading.Event()
        self.first_pid: int | None = None
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        while chunk := os.read(stream.fileno(), 65536):
            self.data += chunk
            if not self.first_line.is_set() and b"\n" in self.data:
                line = bytes(self.data.split(b"\n", 1)[0])
                try:
                    self.first_pid = int(json.loads(line)["pid"])
                except (ValueError, KeyError, TypeError):
                    self.first_pid = None  # not a log line of ours: nothing to spend
                self.first_line.set()

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)


def _argv(case: HostileCase, executable: Path, port: int, work: Path, ports: list[int]) -> list[str]:
    argv = [str(executable), *case.subcommand]
    if case.is_drain:
        argv += [*DRAIN_ARGS]
        argv += ["--log-mirror", str(work / "pid1-stdout")] if case.stdio is Stdio.MIRROR_STALLED else ["--quiet"]
    if case.follows_leader:  # a worker: what answers on `port` is its leader's drain-sidecar
        argv += ["--follow-leader", f"http://127.0.0.1:{port}"]
    argv += ([] if case.port_from_engine else ["--port", str(port)]) + ["--proc-root", str(work / "proc")]
    if case.annotations is not None or case.annotations_fifo or case.annotations_link:
        argv += ["--annotations", str(work / "annotations")]
    named = {f"port{i}": p for i, p in enumerate(ports)}
    return argv + [word.format(**named) if named else word for word in case.args]


@dataclass(frozen=True)
class _Final:
    """What the hook printed last on stdout: the drain's final line, or the check's report."""

    outcome: str | None = None
    elapsed_s: float | None = None
    dropped: int | None = None


def _final(case: HostileCase, stdout: bytes) -> _Final:
    text = stdout.decode("utf-8", "replace").strip()
    if not text:
        return _Final()
    try:
        report = json.loads(text if not case.is_drain else text.splitlines()[-1])
    except ValueError:
        return _Final()
    if not isinstance(report, dict) or (case.is_drain and report.get("event") != "drain_finished"):
        return _Final()
    dropped, elapsed = report.get("log_lines_dropped"), report.get("elapsed_s")
    return _Final(str(report.get("outcome")), float(elapsed) if isinstance(elapsed, (int, float)) else None,
                  dropped if isinstance(dropped, int) else None)


@dataclass(frozen=True)
class _Arranged:
    stderr: int  # a descriptor, or subprocess.PIPE / DEVNULL
    ports: list[int]  # the stand-in processes' ports, in the case's order


def _arrange(case: HostileCase, work: Path, stack: contextlib.ExitStack, port: int) -> _Arranged:
    """The run's private $TMPDIR, /proc, stand-in processes and annotations file, and its stderr;
    what must outlive the run's start goes on `stack`."""
    (work / "tmp").mkdir()
    (work / "proc").mkdir()
    ports = stand_ins(work, case.served, stack) if isinstance(case.served, Listeners) else []
    return _Arranged(_arrange_files(case, work, stack, port), ports)


def _arrange_files(case: HostileCase, work: Path, stack: contextlib.ExitStack, port: int) -> int:
    for name, text in case.engine_files:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(_engine_text(text, port), encoding="utf-8")
    if case.engine_argv:
        argv = tuple(_engine_text(word, port) for word in case.engine_argv) if case.port_from_engine else case.engine_argv
        engine = fake_engine(work, argv, python=case.engine_is_python)
        stack.callback(_end, engine)
        (work / "proc" / str(engine.pid)).symlink_to(f"/proc/{engine.pid}")
    if case.annotations is not None:
        (work / "annotations").write_bytes(case.annotations)
    if case.annotations_fifo:
        os.mkfifo(work / "annotations")
    if case.annotations_link:
        (work / "annotations").symlink_to(case.annotations_link)
    if case.stdio is Stdio.MIRROR_STALLED:
        stack.enter_context(stalled_fifo(work / "pid1-stdout"))
    elif case.stdio is Stdio.STDERR_STALLED:
        read_end, write_end = os.pipe()
        stack.callback(os.close, read_end)
        stack.callback(os.close, write_end)
        _fill(write_end)
        os.set_blocking(write_end, True)
        return write_end
    elif case.stdio is Stdio.STDERR_CLOSED:
        return subprocess.DEVNULL
    return subprocess.PIPE


def run_case(case: HostileCase, executable: Path, name: str, port: int) -> HostileRun:
    """One exec of `executable` on `case`, its engine answering on `port`."""
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp, contextlib.ExitStack() as stack:
        work = Path(tmp)
        arranged = _arrange(case, work, stack, port)
        stderr = arranged.stderr
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": str(work / "tmp")}
        close_stderr = (lambda: os.close(2)) if case.stdio is Stdio.STDERR_CLOSED else None
        started = time.monotonic()
        process = subprocess.Popen(_argv(case, executable, port, work, arranged.ports), env=env, start_new_session=True,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
                                   preexec_fn=close_stderr)
        out = _Collector(process.stdout)
        err = _Collector(process.stderr) if stderr == subprocess.PIPE else None
        detail = ""
        if case.signal is not None:
            _signal_at(process, case.signal.signum, started + case.signal.at_s)
        if case.descriptors_spent:
            detail = _spend_when_started(err)
        try:
            process.wait(timeout=case.deadline_s + HUNG_AFTER_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # its own session: only what this run started
            process.wait()
            detail = f"hung: killed {case.deadline_s + HUNG_AFTER_S:g} s after its exec"
        seconds = time.monotonic() - started
        out.join(5.0)
        stderr_data = b""
        if err is not None:
            err.join(5.0)
            stderr_data = bytes(err.data)
        stdout_data = bytes(out.data)
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
        final = _final(case, stdout_data)
        lines = stdout_data.splitlines() + stderr_data.splitlines()
        code = process.returncode
        run = HostileRun(
            case=case.name, group=case.group, executable=name, exit_code=code, expected=sorted(case.expected),
            seconds=seconds, deadline_s=case.deadline_s,
            traceback=TRACEBACK in stdout_data or TRACEBACK in stderr_data,
            outcome=final.outcome,
            own_elapsed_s=final.elapsed_s,
            said_idle=code == 0 or final.outcome == "idle",
            longest_log_line=max((len(line) for line in lines), default=0),
            stderr_lines=sum(1 for line in stderr_data.splitlines() if line.strip()) if err is not None else None,
            log_lines_dropped=final.dropped,
            temp_left=len(os.listdir(work / "tmp")),
            # The run's private directory is named by what it is, not by where this machine put it.
            detail="; ".join(w for w in (detail, _last_words(stderr_data)) if w).replace(str(work), "$WORK"),
        )
        run.problems = judge(case, run)
        return run


def not_run(case: HostileCase, executable: str, why: str) -> HostileRun:
    """A case this machine could not set up: reported as a problem, never as a pass."""
    return HostileRun(case=case.name, group=case.group, executable=executable, exit_code=-1,
                      expected=sorted(case.expected), seconds=0.0, deadline_s=case.deadline_s, traceback=False,
                      outcome=None, own_elapsed_s=None, said_idle=False, longest_log_line=0, stderr_lines=None,
                      log_lines_dropped=None, temp_left=0, problems=[why], detail=why)


def _end(process: subprocess.Popen) -> None:
    process.kill()
    process.wait()


def _signal_at(process: subprocess.Popen, signum: int, at: float) -> None:
    def send() -> None:
        time.sleep(max(0.0, at - time.monotonic()))
        if process.poll() is None:
            process.send_signal(signum)
    threading.Thread(target=send, name="signal", daemon=True).start()


def _spend_when_started(err: _Collector | None) -> str:
    """Once the hook has logged its first line (its imports done), leave it no descriptor."""
    if err is None or not err.first_line.wait(FIRST_LINE_WAIT_S) or err.first_pid is None:
        return "descriptors not spent: no first log line"
    try:
        limit = spend_descriptors(err.first_pid)
    except OSError as exc:
        return f"descriptors not spent: {exc}"
    return f"RLIMIT_NOFILE lowered to {limit} after its first line"


def _last_words(stderr: bytes) -> str:
    """What the hook last said about its reads (or a traceback's last line), for the table's notes."""
    lines = [line for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    if any(line.startswith("Traceback") for line in lines):
        return lines[-1][:300]
    words = ""
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            return line[:300]  # not one of its JSON lines: a usage error, say
        if not isinstance(event, dict):
            continue
        message = str(event.get("message", ""))
        if event.get("event") == "read_state":
            words = f"{event.get('outcome')}: {event.get('detail', '')}"
        elif event.get("level") in ("warning", "error") and not message.startswith(ADMISSION_WARNING):
            words = message or str(event.get("event"))
    return words[:300]


# --- the catalogue ----------------------------------------------------------------------------------

def executables_present(wanted: list[str]) -> dict[str, Path]:
    """name -> path of the executables asked for that exist here (the bundle only after `make bundle`)."""
    known = {"bundle": PRESTOP_BUNDLE, "console": PRESTOP_CONSOLE_SCRIPT}
    return {name: known[name] for name in wanted if known[name].is_file()}


def run_scripted(cases: list[HostileCase], executables: dict[str, Path], jobs: int,
                 progress: Progress = lambda message: None) -> list[HostileRun]:
    def one(case: HostileCase, name: str, path: Path) -> HostileRun:
        assert isinstance(case.served, (Canned, Streamed, NothingListens, Sequenced, GuessedPort, Listeners))
        try:
            with serving(case.served) as port:
                return run_case(case, path, name, port)
        except NotRun as exc:
            return not_run(case, name, str(exc))

    pairs = [(case, name, path) for case in cases for name, path in executables.items()]
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        runs = list(pool.map(lambda pair: one(*pair), pairs))
    progress(f"hostile inputs: {len(runs)} scripted runs")
    return runs


def run_emulated(cases: list[HostileCase], executables: dict[str, Path],
                 progress: Progress = lambda message: None) -> list[HostileRun]:
    """One emulated vLLM with two requests in flight; each misbehaviour in turn, every executable
    reading it at once."""
    from emulation.engine_process import EngineProcess
    from tests.engine_work import send_requests
    from tests.sidecar.sidecar_process import kill_now

    runs: list[HostileRun] = []
    with EngineProcess("--kind", "vllm") as engine:
        port = engine.port
        assert port is not None
        send_requests(engine, 2, duration_s=3600)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(executables))) as pool:
            for case in cases:
                assert isinstance(case.served, Emulated)
                engine.misbehave(case.served.mode)
                futures = [pool.submit(run_case, case, path, name, port) for name, path in executables.items()]
                runs += [f.result() for f in futures]
                engine.misbehave("none")
        kill_now(engine)
    progress(f"hostile inputs: {len(runs)} runs against the emulator")
    return runs


def in_groups(cases: list[HostileCase], groups: list[str]) -> list[HostileCase]:
    """The cases whose group names hold one of `groups` (every case when there is none)."""
    return [case for case in cases if not groups or any(g in case.group for g in groups)]


def measure(executables: dict[str, Path], jobs: int, progress: Progress = lambda message: None,
            groups: list[str] | None = None) -> list[HostileRun]:
    scripted, emulated = in_groups(scripted_cases(), groups or []), in_groups(emulated_cases(), groups or [])
    return (run_scripted(scripted, executables, jobs, progress) if scripted else []) + (
        run_emulated(emulated, executables, progress) if emulated else [])


def summary(runs: list[HostileRun]) -> dict:
    """The figures: runs, crashes, false idles, overruns, the worst lateness, the longest line."""
    def count(prefix: str) -> int:
        return sum(1 for r in runs if any(p.startswith(prefix) for p in r.problems))
    worst = max(runs, key=lambda r: r.lateness_s) if runs else None
    own = [r.own_lateness_s for r in runs if r.own_lateness_s is not None]
    return {
        "cases": len({r.case for r in runs}),
        "runs": len(runs),
        "crashes": count("crash"),
        "false_idles": count("false idle"),
        "overruns": count("overrun"),
        "unexpected_exits": count("exit "),
        "runs_with_problems": sum(1 for r in runs if r.problems),
        "max_lateness_s": round(worst.lateness_s, 3) if worst else None,
        "max_lateness_case": f"{worst.case}, {worst.executable}" if worst else None,
        "max_own_lateness_s": round(max(own), 3) if own else None,
        "longest_log_line": max((r.longest_log_line for r in runs), default=0),
        "overrun_tolerance_s": OVERRUN_TOLERANCE_S,
        "by_group": by_group(runs),
    }


def by_group(runs: list[HostileRun]) -> dict[str, dict[str, int]]:
    """Per class of hostile input (a case's group): cases, runs, crashes, false idles, overruns."""
    groups: dict[str, list[HostileRun]] = {}
    for r in runs:
        groups.setdefault(r.group, []).append(r)

    def count(rs: list[HostileRun], prefix: str) -> int:
        return sum(1 for r in rs if any(p.startswith(prefix) for p in r.problems))
    return {group: {"cases": len({r.case for r in rs}), "runs": len(rs), "crashes": count(rs, "crash"),
                    "false_idles": count(rs, "false idle"), "overruns": count(rs, "overrun")}
            for group, rs in groups.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reliability.hostile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--executables", default="bundle,console",
                        help="comma-separated: bundle (dist/prestop, when built), console (.venv/bin/prestop)")
    parser.add_argument("--jobs", type=int, default=3, help="scripted cases run at once (default 3)")
    parser.add_argument("--json", type=Path, help="also write every run here")
    parser.add_argument("--group", action="append", default=[], metavar="TEXT",
                        help="only the cases whose group holds TEXT (repeatable; e.g. 'issue 25')")
    args = parser.parse_args(argv)
    wanted = [e.strip() for e in args.executables.split(",") if e.strip()]
    executables = executables_present(wanted)
    if not executables:
        parser.error("none of those executables exists here")
    if "bundle" in wanted and "bundle" not in executables:
        print(f"{parser.prog}: {PRESTOP_BUNDLE.relative_to(REPO)} is not built (`make bundle`): the console "
              "script alone", file=sys.stderr)
    runs = measure(executables, args.jobs, progress=lambda message: print(message, file=sys.stderr), groups=args.group)
    if not runs:
        parser.error("no case is in those groups")
    for r in runs:
        mark = "; ".join(r.problems) or "ok"
        print(f"{r.executable:8} {r.exit_code:>4} {r.lateness_s:+7.2f} s  {r.case}: {mark}")
    print(json.dumps(summary(runs), indent=1))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary(runs), "runs": [r.as_dict() for r in runs]}, indent=1))
    return 1 if any(r.problems for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
