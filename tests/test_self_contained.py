"""The repository stands alone: no file in it names a file outside it or a path of the machine
it was written on, so a fresh clone with nothing beside it has everything `make test` reads."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.conftest import REPO

# Without git (an unpacked sdist): what a fresh clone does not have, by name.
NOT_SOURCE = {".git", ".venv", "dist", ".pytest_cache", ".mypy_cache", ".hypothesis", ".setuptools-build",
              "__pycache__"}
NOT_SOURCE_PATHS = {REPO / "build" / "out"}

# A sibling folder of the checkout, and the machine-local folders this was written in. Named in
# pieces, so that this file is held to its own rule like every other (and so is any scanner's).
SIBLING_FOLDER = "shared"
MACHINE_FOLDERS = ("work/", "tmp/research", r"home/\w+/", r"root/[\w.]")
OUTSIDE = re.compile(r"\.\./" + SIBLING_FOLDER + r"/|(?<![\w.])(" + "|".join("/" + f for f in MACHINE_FOLDERS) + ")")


def source_files() -> list[Path]:
    """The tree: what git tracks, and new files it does not ignore."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                            capture_output=True, timeout=60)
    if listed.returncode == 0:
        return [REPO / name for name in listed.stdout.decode().split("\0") if name and (REPO / name).is_file()]
    files = []
    for folder, subfolders, names in os.walk(REPO):
        subfolders[:] = [d for d in subfolders if d not in NOT_SOURCE and not d.endswith(".egg-info")
                         and Path(folder, d) not in NOT_SOURCE_PATHS]
        files += [Path(folder, name) for name in names if name not in NOT_SOURCE]  # a worktree's .git is a file
    return files


def test_no_file_refers_outside_the_repository():
    offenders = []
    for path in source_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary: scrapes are text, so nothing readable is skipped
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_the_scan_sees_the_tree():
    names = {p.relative_to(REPO).as_posix() for p in source_files()}
    assert {"README.md", "LICENSE", "docs/engines.md", "emulation/templates/SHA256SUMS"} <= names
    assert not any(name.startswith((".venv/", "build/out/")) for name in names)
