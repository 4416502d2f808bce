"""What an executable costs a Pod, measured the same way for prestop and drain-sidecar.

Both cost benches run an executable (the static bundle, the console script) as its own session
and ask the same questions of it: how much memory its processes hold (summed over the session:
the bundle is three processes), what `/usr/bin/time -v` saw as the largest, what it carries on
disk. One home for those answers, so the two tables in bench/RESULTS.md cannot drift apart.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, TypeVar

GNU_TIME = Path("/usr/bin/time")

_MAX_RSS = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")


def max_rss_kib(time_report: Path) -> int | None:
    """The largest single process's peak RSS from a `/usr/bin/time -v -o FILE` report, or None."""
    match = _MAX_RSS.search(time_report.read_text(errors="replace"))
    return int(match.group(1)) if match else None


def session_sum_kib(session_id: int, exclude: int | None, key: str, *, source: str = "status") -> int:
    """`key` (a kiB field of /proc/PID/`source`: VmHWM in status, Pss in smaps_rollup) summed over
    every process of the session, less `exclude` (a wrapper such as /usr/bin/time)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == exclude:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            if int(stat[stat.rindex(b")") + 2:].split()[3]) != session_id:
                continue
            with open(f"/proc/{entry}/{source}") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith(key + ":"))
        except (OSError, ValueError, IndexError, StopIteration):
            continue  # the process ended between the listing and the read
    return total


def tree_bytes(path: Path) -> int:
    """Bytes of the regular files below `path` (links counted as themselves, not their targets)."""
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file())


def footprint(name: str, path: Path, packages: tuple[str, ...]) -> dict:
    """Bytes a Pod has to carry for this executable: the bundle alone, or the console script and
    the packages it imports beyond the standard library."""
    if name == "bundle":
        return {"bytes": path.stat().st_size, "note": "one static file: no Python needed in the image"}
    parts = {"script": path.stat().st_size}
    for package in packages:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin:
            parts[package.replace(".", "/") + "/"] = tree_bytes(Path(spec.origin).parent)
    return {"bytes": sum(parts.values()), "parts": parts,
            "note": "plus a Python ≥ 3.11 interpreter in the image (not counted)"}


def version_line(path: Path, flag: str) -> str:
    """What the executable says of its own version (`flag`: its version command or option)."""
    try:
        return subprocess.run([str(path), flag], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"({flag} failed: {exc})"



@dataclass
class ExecutableRuns:
    """One executable's samples over a bench; each cost bench adds the figures it times."""

    name: str
    path: str
    max_rss_kib: list[int] = field(default_factory=list)
    session_hwm_kib: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def samples(self) -> dict:
        """Every list of samples, by name, for results.json."""
        return {k: v for k, v in asdict(self).items() if k not in ("name", "path")}


R = TypeVar("R", bound=ExecutableRuns)


def alternate(all_runs: dict[str, R], rounds: int, *, tmp_prefix: str,
              timed: Callable[[R, dict], None], memory: Callable[[R, dict, Path], None]) -> None:
    """Runs each executable once to warm the page cache (as a node that ran the image before has;
    those figures are not kept), then `rounds` timed runs and, where /usr/bin/time exists, `rounds`
    memory runs, alternating the executables so drift on the machine falls on all alike. Each
    executable unpacks into a TMPDIR of its own, removed after."""
    unpack_dirs = {name: tempfile.mkdtemp(prefix=f"{tmp_prefix}-{name}-") for name in all_runs}
    envs = {name: {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": unpack_dirs[name]}
            for name in all_runs}
    time_report = Path(tempfile.mkstemp(prefix="bench-time-")[1])
    try:
        for name, r in all_runs.items():
            timed(type(r)(r.name, r.path), envs[name])
        for _ in range(rounds):
            for name, r in all_runs.items():
                timed(r, envs[name])
        if GNU_TIME.exists():
            for _ in range(rounds):
                for name, r in all_runs.items():
                    memory(r, envs[name], time_report)
    finally:
        time_report.unlink(missing_ok=True)
        for d in unpack_dirs.values():
            shutil.rmtree(d, ignore_errors=True)


def measure(runs_type: type[R], executables: dict[str, Path], rounds: int, *, tmp_prefix: str,
            timed: Callable[[R, dict], None], memory: Callable[[R, dict, Path], None], version_flag: str,
            packages: tuple[str, ...], **settings: object) -> dict:
    """`alternate` over `executables` (name -> path), then a cost part's entry in results.json: the
    rounds and `settings`, and per executable its version, footprint and every list of samples."""
    all_runs = {name: runs_type(name, str(path)) for name, path in executables.items()}
    alternate(all_runs, rounds, tmp_prefix=tmp_prefix, timed=timed, memory=memory)
    return {
        "runs": rounds,
        **settings,
        "gnu_time": GNU_TIME.exists(),
        "executables": {
            name: {"path": r.path, "version": version_line(Path(r.path), version_flag),
                   "footprint": footprint(name, Path(r.path), packages), **r.samples()}
            for name, r in all_runs.items()
        },
    }
