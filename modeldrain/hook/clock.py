"""When the hook was exec'd, on the monotonic clock.

kubelet's grace clock starts before the exec; Python's imports (and a bundle's unpacking)
come after it. The kernel records each process's start in /proc/<pid>/stat on the boot-time
clock, so the deadline is measured from there, never from the end of the imports.

The bundled executable (dist/prestop) is not one process: kubelet execs staticx's launcher,
which unpacks into $TMPDIR and forks PyInstaller's bootloader, which unpacks Python and forks
the process that runs this code. Hundreds of milliseconds can pass before Python starts, more
on a loaded node, so the start that counts is the outermost launcher's.
"""

from __future__ import annotations

import os
import time

from modeldrain.hook.bundle import launcher_paths

__all__ = ["exec_root_pid", "exec_started_at", "launcher_identities", "parent_pid", "process_start_boottime"]

# staticx's launcher, then PyInstaller's onefile bootloader: at most two processes stand
# between the exec and Python. Walking further could reach something that is not ours.
MAX_LAUNCHER_DEPTH = 2


def process_start_boottime(pid: int | str = "self", proc_root: str = "/proc") -> float:
    """Seconds since boot at which `pid` started (field 22 of /proc/<pid>/stat)."""
    start_ticks = int(_stat_fields(pid, proc_root)[19])
    return start_ticks / os.sysconf("SC_CLK_TCK")


def parent_pid(pid: int | str, proc_root: str = "/proc") -> int:
    """The parent of `pid` (field 4 of /proc/<pid>/stat); 0 when it has none here."""
    return int(_stat_fields(pid, proc_root)[1])


def _stat_fields(pid: int | str, proc_root: str) -> list[bytes]:
    """The fields of /proc/<pid>/stat after the command name (fields 3 and on)."""
    with open(f"{proc_root}/{pid}/stat", "rb") as f:
        stat = f.read()
    # The command name (field 2) is in parentheses and may itself hold spaces or ')'.
    return stat[stat.rindex(b")") + 2 :].split()


def _file_identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def launcher_identities() -> set[tuple[int, int]]:
    """(device, inode) of the files this bundle's launchers run from; none for a console script,
    which kubelet exec'd as this very process."""
    return {identity for path in launcher_paths() if (identity := _file_identity(path)) is not None}


def exec_root_pid(pid: int | str = "self", proc_root: str = "/proc",
                  launchers: set[tuple[int, int]] | None = None) -> int:
    """The outermost process of this exec: `pid`, or the launcher that started it.

    Walks up the parents while each one runs a launcher's file (compared by device and
    inode via /proc/<ppid>/exe, so a renamed or re-installed file still matches the process
    that ran it). A parent this process may not inspect ends the walk.
    """
    if launchers is None:
        launchers = launcher_identities()
    current = os.getpid() if pid == "self" else int(pid)
    for _ in range(MAX_LAUNCHER_DEPTH):
        if not launchers:
            break
        try:
            parent = parent_pid(current, proc_root)
        except (OSError, ValueError, IndexError):
            break
        if parent <= 0 or _file_identity(f"{proc_root}/{parent}/exe") not in launchers:
            break
        current = parent
    return current


def exec_started_at(pid: int | str | None = None) -> float:
    """The monotonic time at which `pid` (default: this exec's outermost process) started.

    Now, if /proc cannot say.
    """
    now_mono = time.monotonic()
    try:
        target = exec_root_pid() if pid is None else pid
        started_boot = process_start_boottime(target)
        now_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
    except (OSError, ValueError, IndexError):
        return now_mono
    age_s = max(0.0, now_boot - started_boot)
    return now_mono - age_s
