"""The exec's start: walking up from Python to the bundle's outermost launcher, in a fake /proc."""

from __future__ import annotations

import os
import time
from pathlib import Path

from modeldrain.hook import clock


def fake_process(proc: Path, pid: int, ppid: int, start_ticks: int, exe: Path, comm: str = "prestop") -> None:
    entry = proc / str(pid)
    entry.mkdir(parents=True)
    # Fields 3.. after "(comm)": state, ppid, pgrp, session, ..., starttime is field 22.
    rest = ["S", str(ppid)] + ["0"] * 17 + [str(start_ticks)] + ["0"] * 10
    (entry / "stat").write_text(f"{pid} ({comm}) " + " ".join(rest) + "\n")
    (entry / "exe").symlink_to(exe)


def identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def bundle_tree(tmp_path: Path):
    """runc (1) -> staticx launcher (10) -> PyInstaller bootloader (20) -> Python (30)."""
    proc = tmp_path / "proc"
    static_file, inner_file, runc = (tmp_path / n for n in ("prestop", "inner-prestop", "runc"))
    for f in (static_file, inner_file, runc):
        f.write_bytes(b"\x7fELF")
    fake_process(proc, 1, 0, 100, runc, "runc")
    fake_process(proc, 10, 1, 500, static_file)
    fake_process(proc, 20, 10, 530, inner_file)
    fake_process(proc, 30, 20, 560, inner_file)
    return proc, {identity(static_file), identity(inner_file)}


def test_walks_up_to_the_static_launcher(tmp_path):
    proc, launchers = bundle_tree(tmp_path)
    assert clock.exec_root_pid(30, str(proc), launchers) == 10
    assert clock.process_start_boottime(10, str(proc)) == 500 / os.sysconf("SC_CLK_TCK")


def test_stops_at_a_process_that_is_not_a_launcher(tmp_path):
    proc, launchers = bundle_tree(tmp_path)
    only_pyinstaller = launchers - {identity(tmp_path / "prestop")}
    assert clock.exec_root_pid(30, str(proc), only_pyinstaller) == 20


def test_walks_at_most_two_launchers(tmp_path):
    proc, launchers = bundle_tree(tmp_path)
    fake_process(proc, 40, 30, 600, tmp_path / "inner-prestop")  # a bundle started by a bundle
    assert clock.exec_root_pid(40, str(proc), launchers) == 20


def test_not_a_bundle_is_its_own_exec(tmp_path):
    proc, _ = bundle_tree(tmp_path)
    assert clock.exec_root_pid(30, str(proc), set()) == 30


def test_unreadable_parent_ends_the_walk(tmp_path):
    proc, launchers = bundle_tree(tmp_path)
    (proc / "10" / "exe").unlink()  # as when /proc/<ppid>/exe may not be read
    assert clock.exec_root_pid(30, str(proc), launchers) == 20


def test_source_install_counts_from_its_own_start():
    # pytest is not frozen: no launchers, so the exec is this process, which started before now.
    assert clock.launcher_identities() == set()
    assert clock.exec_root_pid() == os.getpid()
    assert clock.exec_started_at() < time.monotonic()
