"""Root filesystems to run the bundle in, as a container would: chroot in private namespaces.

Each run gets its own mount and PID namespaces (`unshare`), so every mount made for it — /proc,
a read-only bind of the root, a tmpfs, an emptyDir stand-in — vanishes with it, even when a
test times out. Needs root (CI runs as root).
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .runner import Ran, run

NOBODY = "65534:65534"


@dataclass
class Mounts:
    """What the run mounts into the root, each path as seen inside it."""

    binds: list[tuple[Path, str]] = field(default_factory=list)  # (host path, path in root)
    tmpfs: list[tuple[str, str]] = field(default_factory=list)  # (path in root, mount options)


def scratch_root(path: Path, executable: Path | None, dirs: tuple[str, ...] = ("tmp",)) -> Path:
    """A root holding only /prestop (when given), /proc and `dirs`: a FROM-scratch image."""
    path.mkdir(parents=True)
    path.chmod(0o755)
    (path / "proc").mkdir()
    for name in dirs:
        (path / name).mkdir(parents=True)
        (path / name).chmod(0o1777 if name == "tmp" else 0o755)
    if executable is not None:
        shutil.copy2(executable, path / "prestop")
        (path / "prestop").chmod(0o755)
    return path


def run_in_root(root: Path, argv: list[str], *, user: str = NOBODY, env: dict[str, str] | None = None,
                read_only: bool = False, mounts: Mounts | None = None, timeout_s: float = 60) -> Ran:
    """Run argv (paths inside the root) chrooted into `root` as `user`, with only `env` set."""
    if os.geteuid() != 0:
        raise RuntimeError("run_in_root needs root")
    mounts = mounts or Mounts()
    q = shlex.quote
    steps = ["set -eu"]
    if read_only:
        # readOnlyRootFilesystem: the root itself cannot be written, whoever runs in it.
        steps += [f"mount --bind {q(str(root))} {q(str(root))}",
                  f"mount -o remount,bind,ro {q(str(root))}"]
    steps.append(f"mount -t proc proc {q(str(root / 'proc'))}")
    for host_path, inside in mounts.binds:
        steps.append(f"mount --bind {q(str(host_path))} {q(str(root) + inside)}")
    for inside, options in mounts.tmpfs:
        steps.append(f"mount -t tmpfs -o {q(options)} tmpfs {q(str(root) + inside)}")
    env_args = " ".join(q(f"{k}={v}") for k, v in (env or {}).items())
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"  # env -i leaves no PATH to find it by
    steps.append(f"exec env -i {env_args} {q(chroot)} --userspec={q(user)} {q(str(root))} "
                 + " ".join(q(a) for a in argv))
    script = "\n".join(steps)
    return run(["unshare", "--mount", "--pid", "--fork", "--kill-child", "bash", "-c", script],
               timeout_s=timeout_s)
