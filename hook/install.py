"""`prestop install DIR`: copy this bundled executable into DIR, for an init container.

An engine image without the hook gets it at Pod start: an init container running the
scratch image from Dockerfile.hook copies the executable into an emptyDir that the engine
container mounts, and the engine's preStop hook execs it from there (deploy/).

The copy is atomic (a temporary file in DIR, then a rename), so a hook never execs a
half-written file, and idempotent: an identical file already there is left alone. DIR/tmp is
made for the bundle to unpack into (TMPDIR=DIR/tmp), so a read-only root filesystem works.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sys
from dataclasses import asdict, dataclass

from modeldrain.hook.bundle import executable_path
from modeldrain.hook.exitcodes import ExitCode
from modeldrain.hook.flags import Parser

EXECUTABLE_NAME = "prestop"
EXECUTABLE_MODE = 0o755  # the engine container may run as any user: all may execute

# The bundle unpacks itself (tens of MB) on every start, into $TMPDIR or /tmp. With a
# read-only root, the engine container sets TMPDIR=DIR/tmp. Sticky and world-writable like
# /tmp, because the init container and the engine container may run as different users.
TMP_SUBDIR = "tmp"
TMP_MODE = 0o1777


class InstallError(Exception):
    """Something that stops the install, already worded for the person reading the log."""


@dataclass(frozen=True)
class InstallReport:
    path: str
    bytes: int
    sha256: str
    changed: bool  # False: an identical file was already there
    tmpdir: str


def _parser() -> Parser:
    parser = Parser(
        prog="prestop install",
        description=f"Copy this executable to DIR/{EXECUTABLE_NAME} (mode 0755, atomically; an identical "
        f"file is left alone) and make DIR/{TMP_SUBDIR} for it to unpack into. For an init "
        "container that installs the hook into an emptyDir the engine container mounts.",
        epilog="exit codes: 0 installed or already there, 2 usage error or DIR not writable",
    )
    parser.add_argument("dir", metavar="DIR", help="an existing directory, e.g. an emptyDir mount")
    return parser


def install(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    source = executable_path()
    if source is None:
        print("prestop install: this prestop runs from the Python package; only the bundled "
              "executable (dist/prestop, built by `make bundle`) can install itself", file=sys.stderr)
        return ExitCode.USAGE
    try:
        report = install_executable(source, args.dir)
    except InstallError as exc:
        print(f"prestop install: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    print(json.dumps({"event": "installed", **asdict(report)}), flush=True)
    return ExitCode.OK


def install_executable(source: str, directory: str) -> InstallReport:
    """Copy `source` to directory/prestop and make directory/tmp; raises InstallError."""
    _check_directory(directory)
    try:
        with open(source, "rb") as f:
            content = f.read()
    except OSError as exc:
        raise InstallError(f"cannot read this executable at {source}: {exc.strerror or exc}") from None
    target = os.path.join(directory, EXECUTABLE_NAME)
    changed = not _same_file_content(target, content)
    if changed:
        _write_atomically(target, content, directory)
    else:
        _chmod(target, EXECUTABLE_MODE, directory)
    tmp_dir = _make_tmp_dir(directory)
    return InstallReport(path=target, bytes=len(content), sha256=hashlib.sha256(content).hexdigest(),
                         changed=changed, tmpdir=tmp_dir)


def _check_directory(directory: str) -> None:
    if not os.path.exists(directory):
        raise InstallError(f"{directory} does not exist (mount the emptyDir there first)")
    if not os.path.isdir(directory):
        raise InstallError(f"{directory} is not a directory")


def _same_file_content(path: str, content: bytes) -> bool:
    try:
        if os.path.getsize(path) != len(content):
            return False
        with open(path, "rb") as f:
            return f.read() == content
    except OSError:
        return False  # absent or unreadable: write it


def _write_atomically(target: str, content: bytes, directory: str) -> None:
    # The temporary name is in DIR itself, so the rename never crosses filesystems.
    temp = os.path.join(directory, f".{EXECUTABLE_NAME}.{os.getpid()}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise InstallError(_cannot_write(directory, exc)) from None
    try:
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, EXECUTABLE_MODE)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, target)
    except OSError as exc:
        _remove_quietly(temp)
        raise InstallError(_cannot_write(directory, exc)) from None
    _fsync_directory(directory)


def _make_tmp_dir(directory: str) -> str:
    path = os.path.join(directory, TMP_SUBDIR)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise InstallError(_cannot_write(directory, exc)) from None
    if not os.path.isdir(path):
        raise InstallError(f"{path} exists and is not a directory (the bundle unpacks there)")
    _chmod(path, TMP_MODE, directory)
    return path


def _chmod(path: str, mode: int, directory: str) -> None:
    try:
        os.chmod(path, mode)
    except OSError as exc:
        raise InstallError(_cannot_write(directory, exc)) from None


def _fsync_directory(directory: str) -> None:
    # Makes the rename durable; some filesystems refuse to open or fsync a directory.
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # durability is best effort here: the rename itself has already happened
    finally:
        os.close(fd)


def _remove_quietly(path: str) -> None:
    """Clean up after a failed install; the error being reported is the one that matters."""
    try:
        os.unlink(path)
    except OSError:
        pass  # already gone, or the directory itself is what failed


def _cannot_write(directory: str, exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    hint = ""
    if exc.errno in (errno.EACCES, errno.EPERM):
        hint = f" (running as uid {os.getuid()}; make the volume writable for it, e.g. with fsGroup)"
    elif exc.errno == errno.EROFS:
        hint = " (mount a writable volume there, e.g. an emptyDir)"
    elif exc.errno == errno.ENOSPC:
        hint = " (the volume is full: the executable needs 11 MB, and each start unpacks 27 MB more)"
    return f"cannot write {directory}: {reason}{hint}"
