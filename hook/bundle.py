"""Whether this process runs from the bundled static executable, and what the bundle knows.

The one module that knows how a bundle looks from inside (build/bundle.sh makes it):

- PyInstaller's onefile bootloader sets `sys.frozen` and unpacks the code into `sys._MEIPASS`,
  beside the build stamp build/stamp.py wrote;
- staticx's launcher, wrapped around that, runs the unpacked program and names the file that
  was exec'd in STATICX_PROG_PATH.

Everything else (the exec clock, `prestop install`, `prestop version`) asks here.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from typing import Mapping, TypedDict, cast

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
