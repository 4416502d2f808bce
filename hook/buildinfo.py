"""How this prestop was built: a bundle carries a build stamp; a source install says so.

build/stamp.py writes the stamp at build time and build/prestop.spec adds it to the bundle,
where PyInstaller unpacks it beside the code (sys._MEIPASS).
"""

from __future__ import annotations

import json
import os
import platform
import sys

from hook.clock import STATICX_PROG_PATH_ENV

BUILD_STAMP_FILE = "modeldrain-buildstamp.json"


def read_build_stamp() -> dict | None:
    """The bundle's stamp; None for a source install, or a bundle whose stamp is unreadable."""
    bundle_dir = getattr(sys, "_MEIPASS", None)
    if not getattr(sys, "frozen", False) or not bundle_dir:
        return None
    try:
        with open(os.path.join(bundle_dir, BUILD_STAMP_FILE), encoding="utf-8") as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def build_description() -> str:
    running = f"Python {platform.python_version()} on {platform.machine()}"
    if not getattr(sys, "frozen", False):
        return f"Python package, {running}"
    stamp = read_build_stamp()
    if stamp is None:
        return f"bundled executable without a build stamp, {running}"
    tools = stamp.get("tools") or {}
    tool_list = ", ".join(f"{name} {version}" for name, version in sorted(tools.items()))
    # staticx names its own file to the program it runs: the static wrapper is in use.
    static = "static" if os.environ.get(STATICX_PROG_PATH_ENV) else "dynamic"
    return (
        f"{static} bundled executable, commit {stamp.get('commit', 'unknown')}, "
        f"built {stamp.get('built_at', 'unknown')} on {stamp.get('build_os', 'unknown')} "
        f"({stamp.get('glibc', 'unknown libc')}), {running}; {tool_list}"
    )
