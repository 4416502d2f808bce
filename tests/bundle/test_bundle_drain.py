"""dist/prestop, the static executable kubelet runs, drains like the Python package does."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from modeldrain.hook.signals import IGNORED_SIGNALS
from tests.builds import make

from .conftest import TOOLCHAIN_BIN, elf_machine
from .engine import BUSY_REQUESTS
from .runner import drain_argv, free_port, json_lines, run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def unpacked_leftovers(env) -> list[str]:
    return os.listdir(env["TMPDIR"])


def wait_for_line(stream, needle: str) -> str:
    """Read `stream` until a line holding `needle` (the module's timeout bounds the wait);
    what was read comes back. Fails if the stream ends first."""
    read = ""
    for line in stream:
        read += line
        if needle in line:
            return read
    pytest.fail(f"the program ended before printing {needle}:\n{read}")


def test_idle_engine_drains_at_once(build, bundle, engine, bundle_env):
    ran = run(drain_argv(str(bundle), engine.port), env=bundle_env)
    assert ran.code == 0, ran.stderr
    assert ran.finished["outcome"] == "idle"
    assert ran.finished["reads"] == 2
    assert ran.finished["elapsed_s"] < 3 + build.start_allowance_s  # counted from the exec
    assert unpacked_leftovers(bundle_env) == []  # staticx and PyInstaller both cleaned up


def test_busy_engine_drains_when_idle(build, bundle, engine, bundle_env):
    busy_s = 2.0 + build.start_allowance_s  # still busy when Python first reads, however slow its start
    engine.busy_for(busy_s)
    ran = run(drain_argv(str(bundle), engine.port), env=bundle_env)
    assert ran.code == 0, ran.stderr
    assert ran.finished["outcome"] == "idle"
    assert ran.finished["elapsed_s"] >= busy_s
    assert ran.event("read_state")["outcome"] == "busy"
    assert ran.event("read_state")["in_flight"] == BUSY_REQUESTS


def test_busy_engine_hits_the_deadline(build, bundle, engine, bundle_env):
    engine.busy_for(60)
    # Deadline = grace - reserve after the exec, past the launchers' start-up (slower under qemu).
    deadline_s = 2.0 + build.start_allowance_s
    ran = run(drain_argv(str(bundle), engine.port, grace_s=deadline_s + 1, exit_reserve_s=1), env=bundle_env)
    assert ran.code == 10, ran.stderr
    assert ran.finished["outcome"] == "deadline"
    assert ran.event("read_state")["outcome"] == "busy"  # it read, and kept reading, until then
    # Not before the deadline, and not late by much.
    assert deadline_s <= ran.finished["elapsed_s"] < deadline_s + 0.6 * build.slowdown


def test_refused_read_ends_the_drain(bundle, bundle_env):
    ran = run(drain_argv(str(bundle), free_port()), env=bundle_env)
    assert ran.code == 11, ran.stderr
    assert ran.finished["outcome"] == "unmeasurable"
    assert "refused" in ran.finished["reason"]


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_sigint_reach_python_through_both_launchers(bundle, engine, bundle_env, signum, code):
    """kubelet signals the process it exec'd: staticx's launcher must pass it on to Python."""
    engine.busy_for(60)
    process = subprocess.Popen(drain_argv(str(bundle), engine.port), env=bundle_env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # Unpacked, running, busy: Python has read the engine (however long the launchers took).
        before = wait_for_line(process.stderr, '"read_state"')
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=20)
        stderr = before + stderr
    finally:
        process.kill()
    assert process.returncode == code, stderr
    assert json_lines(stdout)[-1]["exit_code"] == code
    assert unpacked_leftovers(bundle_env) == []


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(child) for child in f.read().split()]


def ignored_mask(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1], 16) for line in f if line.startswith("SigIgn:"))


def bundle_processes(launcher: subprocess.Popen, deadline_at: float) -> tuple[int, int]:
    """(PyInstaller's bootloader, Python) under staticx's launcher, once Python ignores its signals."""
    wanted = sum(1 << (signum - 1) for signum in IGNORED_SIGNALS)
    while True:
        assert time.monotonic() < deadline_at and launcher.poll() is None
        for bootloader in children(launcher.pid):
            for python in children(bootloader):
                if ignored_mask(python) & wanted == wanted:
                    return bootloader, python
        time.sleep(0.005)


# PyInstaller's bootloader forwards every signal but SIGTSTP (which stops the bootloader itself).
FORWARDED_BY_PYINSTALLER = tuple(s for s in IGNORED_SIGNALS if s != signal.SIGTSTP)


def test_the_signals_the_hook_ignores_are_ignored_by_the_bundled_python(native_bundle, engine, bundle_env):
    """What PyInstaller's bootloader passes on, the bundled hook ignores as the package does."""
    process = subprocess.Popen([*drain_argv(str(native_bundle), engine.port), "--route-wait", "2"], env=bundle_env,
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        bootloader, _python = bundle_processes(process, time.monotonic() + 20)
        for signum in FORWARDED_BY_PYINSTALLER:
            os.kill(bootloader, signum)
        stdout, stderr = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == 0, stderr
    assert json_lines(stdout)[-1]["outcome"] == "idle"
    assert unpacked_leftovers(bundle_env) == []


@pytest.mark.parametrize("signum, code", [(signal.SIGHUP, 0), (signal.SIGUSR1, 0), (signal.SIGQUIT, 131)])
def test_signals_to_the_launcher_kubelet_execd_end_as_the_package_says(native_bundle, engine, bundle_env, signum,
                                                                       code):
    """staticx's launcher, patched (build/staticx-signals.patch), passes each on: the drain ignores
    SIGHUP and SIGUSR1 and ends idle; SIGQUIT ends it with 131 and its final line."""
    process = subprocess.Popen([*drain_argv(str(native_bundle), engine.port), "--route-wait", "2"], env=bundle_env,
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        bundle_processes(process, time.monotonic() + 20)
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == code, stderr
    assert json_lines(stdout)[-1]["exit_code"] == code


def test_every_signal_the_hook_ignores_leaves_the_launcher_kubelet_execd_running(native_bundle, engine, bundle_env):
    """All of them to the PID kubelet exec'd, job control and the real-time signals included: none
    ends or stops the launcher, and the drain still ends idle, cleaned up, with its final line."""
    process = subprocess.Popen([*drain_argv(str(native_bundle), engine.port), "--route-wait", "2"], env=bundle_env,
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        bundle_processes(process, time.monotonic() + 20)
        for signum in IGNORED_SIGNALS:
            process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=20)  # a stopped launcher would never end
    finally:
        process.kill()
    assert process.returncode == 0, stderr
    assert json_lines(stdout)[-1]["outcome"] == "idle"
    assert unpacked_leftovers(bundle_env) == []


def test_version_names_the_build(build, bundle, bundle_env):
    ran = run([str(bundle), "version"], env=bundle_env)
    assert ran.code == 0, ran.stderr
    line = ran.stdout.strip()
    assert line.startswith("prestop 0.")
    for part in ("static bundled executable", "commit ", "built 20", f"Python 3.11.2 on {build.machine}",
                 "pyinstaller 6.22.3", "staticx 0.14.2", "prometheus-client 0.26.0"):
        assert part in line, line


def test_bad_flag_is_a_usage_error(bundle, bundle_env):
    ran = run([str(bundle), "--grace", "soon"], env=bundle_env)
    assert ran.code == 2
    assert "--grace must be a number" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_bundle_is_static_and_holds_no_sidecar_dependencies(build, bundle):
    with open(bundle, "rb") as f:
        head = f.read(4096)
    assert head[:4] == b"\x7fELF"
    assert elf_machine(head) == build.elf_machine
    # A static ELF has no program interpreter: no PT_INTERP path in its first page.
    assert b"/lib64/ld-linux" not in head and build.loader not in head
    # The archive format is the same on every architecture: the amd64 toolchain reads arm64's.
    make("bundle", arch="amd64")
    viewer = TOOLCHAIN_BIN / "pyi-archive_viewer"
    listing = subprocess.run([str(viewer), "--list", "--recursive", "--brief", str(build.onefile("prestop"))],
                             capture_output=True, text=True, timeout=60, check=True).stdout
    assert "prometheus_client" in listing and "modeldrain.hook.cli" in listing
    for excluded in ("aiohttp", "uvloop", "modeldrain.sidecar", "emulation"):
        assert excluded not in listing


def test_an_early_sigterm_leaves_no_final_line_but_the_next_start_cleans_up(bundle, bundle_env):
    """Both launchers forward signals only once they have started their child: a SIGTERM while they
    unpack kills them before any code of ours runs. What they left is removed by the next start."""
    tmp = bundle_env["TMPDIR"]
    for delay_s in (0.01, 0.03, 0.08, 0.12):
        process = subprocess.Popen(drain_argv(str(bundle), free_port()), env=bundle_env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(delay_s)
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=20)
    # Whatever an early SIGTERM (or a SIGKILL) left, aged past the bound a concurrent start needs:
    old = time.time() - 120
    for name in os.listdir(tmp):
        os.utime(os.path.join(tmp, name), (old, old))
    fake = os.path.join(tmp, "_MEI0000dead00aaaa")  # as a SIGKILL mid-drain leaves one
    os.mkdir(fake)
    with open(os.path.join(fake, "libpython3.11.so.1.0"), "wb") as f:
        f.write(b"\0" * 4096)
    os.utime(fake, (old, old))
    ran = run(drain_argv(str(bundle), free_port()), env=bundle_env)
    assert ran.code == 11, ran.stderr
    removed = ran.event("stale_unpack_dirs_removed")
    assert fake in removed["paths"] and removed["bytes"] >= 4096
    assert unpacked_leftovers(bundle_env) == []
