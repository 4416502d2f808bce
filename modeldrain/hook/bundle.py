"""Whether this process runs from the bundled static executable, and what the bundle knows.

The one module that knows how a bundle looks from inside (build/bundle.sh makes it):

- PyInstaller's onefile bootloader sets `sys.frozen` and unpacks the code into `sys._MEIPASS`,
  beside the build stamp build/stamp.py wrote;
- staticx's launcher, wrapped around that, runs the unpacked program and names the file that
  was exec'd in STATICX_PROG_PATH.

Everything else (the exec clock, `prestop install`, `prestop version`) asks here.

Both launchers unpack into $TMPDIR (else /tmp) on every start and remove what they unpacked
when they exit, but each forwards signals only once it has started its child: a SIGTERM in
the first ~50 ms (staticx) or ~150 ms (PyInstaller) kills it mid-unpack with the default action,
before any code of ours runs, and SIGKILL always leaves its directory. So the next start
removes such leftovers: unpack directories older than a minute that no running process maps.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from typing import Mapping, TypedDict, cast

__all__ = [
    "BUILD_STAMP_FILE", "STATICX_PROG_PATH_ENV", "build_description", "executable_path", "is_bundle", "is_static",
    "launcher_paths", "read_build_stamp", "remove_stale_unpack_dirs", "stale_unpack_dirs", "tree_bytes",
]

# staticx tells the program it runs where the exec'd file is (its realpath).
STATICX_PROG_PATH_ENV = "STATICX_PROG_PATH"

# Written by build/stamp.py, added by the PyInstaller spec beside the bundled code.
BUILD_STAMP_FILE = "modeldrain-buildstamp.json"


class BuildStamp(TypedDict, total=False):
    commit: str
    built_at: str
    python: str
    build_os: str
    glibc: str
    machine: str
    tools: dict[str, str]


def is_bundle() -> bool:
    """True inside the PyInstaller (and staticx) executable; False for a Python install."""
    return bool(getattr(sys, "frozen", False))


def is_static(environ: Mapping[str, str] = os.environ) -> bool:
    """True when staticx's static launcher started this bundle."""
    return is_bundle() and bool(environ.get(STATICX_PROG_PATH_ENV))


def executable_path(environ: Mapping[str, str] = os.environ) -> str | None:
    """The file kubelet exec'd for this process; None for a Python install.

    Under staticx, sys.executable is the unpacked inner program, which only runs from its
    temporary directory; the file that runs anywhere is the static wrapper staticx names.
    """
    if not is_bundle():
        return None
    return environ.get(STATICX_PROG_PATH_ENV) or sys.executable


def launcher_paths(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The files this bundle's launcher processes run from (none for a Python install).

    PyInstaller's bootloader re-execs its own file (/proc/self/exe) for the Python process;
    staticx's launcher is the file it names.
    """
    if not is_bundle():
        return []
    paths = ["/proc/self/exe"]
    prog_path = environ.get(STATICX_PROG_PATH_ENV)
    if prog_path:
        paths.append(prog_path)
    return paths


# What staticx (staticx-XXXXXX) and PyInstaller's onefile bootloader (_MEIxxxxxx) unpack into.
UNPACK_DIR_PREFIXES = ("staticx-", "_MEI")
# Unpacking takes well under a second; a directory this old that nothing maps is a leftover, and
# a concurrent start (two hooks at once) is never mistaken for one.
STALE_UNPACK_DIR_AGE_S = 60.0


def stale_unpack_dirs(tmpdir: str, *, now_unix: float, proc_root: str = "/proc") -> list[str]:
    """Unpack directories in tmpdir, ours, older than STALE_UNPACK_DIR_AGE_S, that no process maps."""
    candidates = []
    try:
        entries = list(os.scandir(tmpdir))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.startswith(UNPACK_DIR_PREFIXES):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if entry.is_dir(follow_symlinks=False) and st.st_uid == os.getuid() \
                and now_unix - st.st_mtime >= STALE_UNPACK_DIR_AGE_S:
            candidates.append(entry.path)
    if not candidates:
        return []
    in_use = _mapped_paths(proc_root)
    return [d for d in candidates if not any(p.startswith(d + "/") for p in in_use)]


def _mapped_paths(proc_root: str) -> set[str]:
    """Every file path some process here maps (its executable and libraries included)."""
    paths: set[str] = set()
    try:
        pids = [p for p in os.listdir(proc_root) if p.isdigit()]
    except OSError:
        return paths
    for pid in pids:
        try:
            with open(os.path.join(proc_root, pid, "maps"), "rb") as f:
                for line in f:
                    fields = line.split(None, 5)
                    if len(fields) == 6 and fields[5].startswith(b"/"):
                        paths.add(fields[5].rstrip(b"\n").decode("utf-8", "replace"))
        except OSError:
            continue  # gone, or not ours to read: it cannot be one of our launchers' children
    return paths


def remove_stale_unpack_dirs(*, proc_root: str = "/proc") -> tuple[list[str], int]:
    """Remove leftovers of earlier starts in this bundle's temp dir: (paths removed, bytes freed)."""
    if not is_bundle():
        return [], 0
    import shutil  # only a bundle gets here

    removed, freed = [], 0
    # Where both launchers unpack: $TMPDIR, else /tmp.
    for path in stale_unpack_dirs(os.environ.get("TMPDIR") or "/tmp", now_unix=time.time(), proc_root=proc_root):
        size = tree_bytes(path)
        shutil.rmtree(path, ignore_errors=True)  # best effort: whatever stays is tried again next start
        if not os.path.exists(path):
            removed.append(path)
            freed += size
    return removed, freed


def tree_bytes(path: str) -> int:
    """The bytes of the files under path (what an unpack directory holds)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass  # vanished meanwhile: nothing to count
    return total


def read_build_stamp() -> BuildStamp | None:
    """The bundle's stamp; None for a Python install, or a bundle whose stamp is unreadable."""
    bundle_dir = getattr(sys, "_MEIPASS", None)
    if not is_bundle() or not bundle_dir:
        return None
    try:
        with open(os.path.join(bundle_dir, BUILD_STAMP_FILE), encoding="utf-8") as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        return None
    return cast(BuildStamp, stamp) if isinstance(stamp, dict) else None


def build_description() -> str:
    """One line for `version`: how this executable was built, or that it is a Python install."""
    running = f"Python {platform.python_version()} on {platform.machine()}"
    if not is_bundle():
        return f"Python package, {running}"
    stamp = read_build_stamp()
    if stamp is None:
        return f"bundled executable without a build stamp, {running}"
    tools = stamp.get("tools") or {}
    tool_list = ", ".join(f"{name} {version}" for name, version in sorted(tools.items()))
    static = "static" if is_static() else "dynamic"
    return (
        f"{static} bundled executable, commit {stamp.get('commit', 'unknown')}, "
        f"built {stamp.get('built_at', 'unknown')} on {stamp.get('build_os', 'unknown')} "
        f"({stamp.get('glibc', 'unknown libc')}), {running}; {tool_list}"
    )
