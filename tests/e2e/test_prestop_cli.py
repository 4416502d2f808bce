"""The command line as people and kubelet use it: flag errors, check, logs, the exec clock, signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from emulation.engine_process import EngineProcess, free_port
from modeldrain.hook.signals import IGNORED_SIGNALS
from tests.engine_work import send_requests
from tests.pipes import fill

from .prestop_run import FAST, NO_PROCESSES, PRESTOP, run_prestop, start_prestop


@pytest.mark.parametrize("args, message", [
    (["--grace", "abc"], "--grace must be a number of seconds, got 'abc'"),
    (["--grace", "0"], "--grace must be a number of seconds > 0"),
    (["--grace", "-5"], "--grace must be a number of seconds > 0"),
    (["--grace", "nan"], "--grace must be a number of seconds > 0"),
    (["--port", "70000"], "--port must be a whole number >= 1 and <= 65535"),
    (["--port", "http"], "--port must be a whole number >= 1 and <= 65535"),
    (["--path", "metrics"], "path must start with '/'"),
    (["--scheme", "ftp"], "scheme must be http or https"),
    (["--engine", "tgi"], "engine must be vllm or sglang"),
    (["--disaggregation-mode", "both"], "disaggregation mode must be null (unified), prefill or decode"),
    (["--interval", "0"], "--interval must be a number of seconds > 0"),
    (["--max-body-bytes", "lots"], "--max-body-bytes must be a whole number >= 1"),
    (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    # Values that pass a loose check and then overflow or fail to convert.
    (["--route-wait", "1e10"], "--route-wait must be a number of seconds >= 0 and <= 1000000"),
    (["--port", "\u00b2"], "--port must be a whole number >= 1 and <= 65535"),
    (["--path", "/m\u00e9trics"], "--path must be printable ASCII"),
])
def test_flag_errors_are_clear_usage_errors(args, message):
    proc = subprocess.run([PRESTOP, *args], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2
    assert message in proc.stderr
    # One line: what is wrong, and where the flags are explained.
    assert proc.stderr.count("\n") == 1 and "(see prestop --help)" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_help_documents_exit_codes_and_the_last_line():
    out = subprocess.run([PRESTOP, "--help"], capture_output=True, text=True, timeout=10).stdout
    for text in ("0   drained", "10  deadline", "11  nothing to measure", "2   usage error", "drain_finished"):
        assert text in out


def check(*args):
    proc = subprocess.run([PRESTOP, "check", "--proc-root", NO_PROCESSES, *args], capture_output=True, text=True,
                          timeout=10)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout else None


def test_check_reads_once_and_says_idle_busy_or_unmeasurable():
    with EngineProcess("--kind", "vllm") as engine:
        code, report = check("--port", str(engine.port))
        assert code == 0 and report["verdict"] == "idle" and report["engine"] == "vllm"
        assert report["gauges"] == {"vllm:num_requests_running": 0.0, "vllm:num_requests_waiting": 0.0}
        send_requests(engine, 2, duration_s=20)
        code, report = check("--port", str(engine.port))
        assert code == 1 and report["verdict"] == "busy" and report["in_flight"] == 2
        engine.misbehave("missing")
        code, report = check("--port", str(engine.port))
        assert code == 1 and report["outcome"] == "incomplete" and report["missing"]
    code, report = check("--port", str(free_port()), "--engine", "vllm")
    assert code == 11 and report["verdict"] == "unmeasurable" and report["outcome"] == "refused"


def test_state_changes_are_mirrored_to_the_container_log(tmp_path):
    mirror = tmp_path / "pid1-stdout"
    mirror.touch()
    with EngineProcess("--kind", "vllm") as engine:
        send_requests(engine, 1, duration_s=2.0)
        proc = subprocess.run([PRESTOP, "--proc-root", NO_PROCESSES, *FAST, "--grace", "30", "--port",
                               str(engine.port), "--log-mirror", str(mirror)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    mirrored = [json.loads(line) for line in mirror.read_text().splitlines()]
    assert [e["event"] for e in mirrored] == ["drain_started", "read_state", "read_state", "drain_finished"]
    assert [e["outcome"] for e in mirrored if e["event"] == "read_state"] == ["busy", "idle"]
    # One line per state change, not per poll: the stderr copy is the same lines.
    assert proc.stderr.splitlines() == mirror.read_text().splitlines()
    assert mirrored[0]["log_mirror"] == str(mirror)


def _run_on_a_terminal(argv: list[str], timeout_s: float = 60.0) -> tuple[int, str]:
    """Run argv with stdin, stdout and stderr on a real pseudo-terminal, as from a person's shell;
    returns its status and everything it wrote there."""
    import pty
    import select

    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    finally:
        os.close(slave)
    output = b""
    deadline_at = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline_at:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer of the terminal is gone
                    break
                if not chunk:
                    break
                output += chunk
            elif proc.poll() is not None:
                break
        return proc.wait(timeout=max(1.0, deadline_at - time.monotonic())), output.decode(errors="replace")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_run_from_an_interactive_terminal_it_mirrors_nothing(tmp_path):
    """As root at a shell, PID 1's stdout is the host's init's: the hook writes only to its terminal."""
    mirror = tmp_path / "pid1-stdout"
    mirror.touch()
    code, output = _run_on_a_terminal([PRESTOP, "--proc-root", NO_PROCESSES, "--route-wait", "0", "--grace", "15",
                                       "--engine", "vllm", "--port", str(free_port()), "--log-mirror", str(mirror)])
    assert code == 11, output  # nothing listens: unmeasurable, at once
    started = json.loads(next(line for line in output.splitlines() if '"drain_started"' in line))
    assert started["log_mirror"] == "off: run from an interactive terminal (stdin, stdout or stderr is a TTY)"
    assert mirror.read_text() == ""
    # The same command without a terminal (as kubelet runs it) does mirror: the terminal made the difference.
    piped = subprocess.run([PRESTOP, "--proc-root", NO_PROCESSES, "--route-wait", "0", "--grace", "15", "--engine",
                            "vllm", "--port", str(free_port()), "--log-mirror", str(mirror)],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert piped.returncode == 11 and '"drain_started"' in mirror.read_text()


def test_check_on_the_sidecars_port_says_it_is_not_an_engine(tmp_path):
    """The newcomer's misplaced probe: `prestop check --port 8490` reads drain-sidecar's own /metrics."""
    from tests.sidecar.sidecar_process import SidecarProcess

    with SidecarProcess("--engine", "vllm", "--port", str(free_port()), "--proc-root", NO_PROCESSES) as sidecar:
        code, report = check("--port", str(sidecar.port), "--engine", "vllm")
    assert code == 1 and report["verdict"] == "busy" and report["in_flight"] is None
    assert report["detail"].startswith("this is not an engine's /metrics: it looks like drain-sidecar's own")
    assert any("drain-sidecar's own" in warning for warning in report["warnings"])


def test_quiet_mirrors_nothing(tmp_path):
    mirror = tmp_path / "container.log"
    with EngineProcess("--kind", "vllm") as engine:
        proc = subprocess.run([PRESTOP, "--proc-root", NO_PROCESSES, *FAST, "--port", str(engine.port), "--quiet",
                               "--log-mirror", str(mirror)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert json.loads(proc.stderr.splitlines()[0])["log_mirror"] == "off" and not mirror.exists()


def test_an_unwritable_container_log_is_reported_not_fatal(tmp_path):
    with EngineProcess("--kind", "vllm") as engine:
        proc = subprocess.run([PRESTOP, "--proc-root", NO_PROCESSES, *FAST, "--port", str(engine.port), "--log-mirror",
                               str(tmp_path / "no" / "such" / "fd")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    started = json.loads(proc.stderr.splitlines()[0])
    assert started["log_mirror"].startswith("unavailable")


def test_deadline_counts_from_the_exec_not_from_the_end_of_imports(tmp_path):
    # A start-up slowed by 1.5 s before any of prestop's code runs (a bundle unpacking, a cold
    # page cache): the deadline must not move by that much.
    (tmp_path / "sitecustomize.py").write_text("import time\ntime.sleep(1.5)\n")
    with EngineProcess("--kind", "vllm") as engine:
        send_requests(engine, 1, duration_s=60)
        run = run_prestop("--route-wait", "1", "--grace", "9", "--port", str(engine.port),
                          env={"PYTHONPATH": str(tmp_path)})
    assert run.code == 10
    started = run.event("drain_started")
    assert started["elapsed_s"] >= 1.5  # the log knows the start-up cost
    assert 4.0 <= run.finished["elapsed_s"] <= 4.3
    assert run.elapsed_s <= 4.6  # the parent saw it return at G - 5, not G - 5 + 1.5


@pytest.mark.parametrize("signum, code, outcome", [
    (signal.SIGTERM, 143, "terminated"),
    (signal.SIGINT, 130, "interrupted"),  # a person at a terminal: the same final line, no traceback
    (signal.SIGQUIT, 131, "interrupted"),  # Ctrl-\ at that terminal: a stop too, with a final line
])
def test_a_stop_signal_ends_the_hook_with_a_final_line(signum, code, outcome):
    with EngineProcess("--kind", "vllm") as engine:
        hook = start_prestop(*FAST, "--grace", "30", "--port", str(engine.port))
        time.sleep(1.5)
        hook.send_signal(signum)
        out, err = hook.communicate(timeout=10)
    assert hook.returncode == code
    assert "Traceback" not in err
    finished = json.loads(out.splitlines()[-1])
    assert (finished["outcome"], finished["exit_code"]) == (outcome, code)
    assert finished["reason"] == f"{outcome} by {signal.Signals(signum).name} before the drain finished"
    assert 1.5 <= finished["elapsed_s"] < 5


def signal_mask(pid: int, field: str) -> int:
    """A signal set of the process from /proc/<pid>/status: SigCgt (handled) or SigIgn (ignored)."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1], 16) for line in f if line.startswith(f"{field}:"))


def catches(pid: int, signum: int) -> bool:
    """Whether the process has a handler for the signal."""
    return bool(signal_mask(pid, "SigCgt") & (1 << (signum - 1)))


def ignores_all(pid: int, signums) -> bool:
    mask = signal_mask(pid, "SigIgn")
    return all(mask & (1 << (signum - 1)) for signum in signums)


def test_every_other_signal_is_ignored_and_the_drain_runs_to_its_own_end():
    # A terminal's SIGHUP, a stray SIGUSR1 or SIGALRM, job control's SIGTSTP: each of them, one after
    # another, to one drain, from the moment it ignores them. It still ends as the engine says
    # (idle, 0) with its final line, neither killed without one (nor frozen, SIGTSTP) on the way.
    with EngineProcess("--kind", "vllm") as engine:
        hook = start_prestop("--route-wait", "2", "--grace", "30", "--port", str(engine.port))
        deadline_at = time.monotonic() + 10
        while not ignores_all(hook.pid, IGNORED_SIGNALS):
            assert time.monotonic() < deadline_at and hook.poll() is None
            time.sleep(0.0005)
        for signum in IGNORED_SIGNALS:
            hook.send_signal(signum)
        assert hook.poll() is None
        out, err = hook.communicate(timeout=15)
    assert hook.returncode == 0, err
    finished = json.loads(out.splitlines()[-1])
    assert (finished["outcome"], finished["exit_code"]) == ("idle", 0)
    assert finished["elapsed_s"] >= 2.0  # after its route wait, as if nothing had been sent


def test_from_the_moment_it_catches_the_signal_a_stop_ends_with_a_final_line():
    # The handler goes in before the imports, the exec clock, the /proc scan and the annotations:
    # a SIGTERM sent the instant it is caught lands in that start-up work, and still ends well.
    hook = start_prestop(*FAST, "--grace", "30", "--port", str(free_port()))
    deadline_at = time.monotonic() + 10
    while not catches(hook.pid, signal.SIGTERM):
        assert time.monotonic() < deadline_at and hook.poll() is None
        time.sleep(0.0005)
    hook.send_signal(signal.SIGTERM)
    sent_at = time.monotonic()
    out, err = hook.communicate(timeout=10)
    ended_after_s = time.monotonic() - sent_at
    assert hook.returncode == 143, err
    finished = json.loads(out.splitlines()[-1])
    assert finished["outcome"] == "terminated"
    # At once, not after the route wait's reads or at the 25 s deadline: the bound is what a loaded
    # 2-core worker adds (the interpreter's start-up alone has taken 1.7 s there).
    assert ended_after_s < 3.0, ended_after_s
    # Counted from the exec, as /proc records it: the interpreter's start-up is in it.
    assert finished["elapsed_s"] > 0.0


def test_closed_stdout_and_stderr_do_not_stop_the_drain():
    # Started with its standard streams closed, as a careless wrapper might: the drain still runs to
    # its end and exits with its code; nothing it opens can land on descriptors 1 and 2.
    with EngineProcess("--kind", "vllm") as engine:
        proc = subprocess.run([PRESTOP, "--proc-root", NO_PROCESSES, *FAST, "--port", str(engine.port), "--quiet"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              close_fds=True, timeout=30, preexec_fn=lambda: (os.close(1), os.close(2)))
    assert proc.returncode == 0


def test_a_log_reader_that_stalls_does_not_stall_the_drain(tmp_path):
    # stderr is a pipe nobody reads, already full: the drain still returns on time.
    read_end, write_end = os.pipe()
    fill(write_end)
    try:
        with EngineProcess("--kind", "vllm") as engine:
            started = time.monotonic()
            proc = subprocess.run([PRESTOP, "--proc-root", NO_PROCESSES, *FAST, "--port", str(engine.port), "--quiet"],
                                  stdout=subprocess.PIPE, stderr=write_end, timeout=30)
            elapsed_s = time.monotonic() - started
    finally:
        os.close(read_end)
        os.close(write_end)
    assert proc.returncode == 0
    assert elapsed_s < 3.5  # route wait 1 s + two reads, plus one bounded wait on the full pipe
    finished = json.loads(proc.stdout.decode().splitlines()[-1])
    assert finished["log_lines_dropped"] >= 1


def test_a_grace_the_operator_would_not_admit_is_warned_about():
    with EngineProcess("--kind", "vllm") as engine:
        run = run_prestop(*FAST, "--port", str(engine.port))  # G = 8
    assert run.code == 0
    assert "--grace 8 is outside the 15-3600 s" in run.event("config_warning")["message"]


def test_version():
    proc = subprocess.run([PRESTOP, "version"], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 0 and proc.stdout.startswith("prestop 0.1.0")
