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
import stat
import sys
from dataclasses import asdict, dataclass

from modeldrain.hook.bundle import executable_path
from modeldrain.hook.exitcodes import ExitCode
from modeldrain.hook.flags import Parser

__all__ = ["InstallError", "TMP_MODE", "TMP_SUBDIR", "install", "install_executable"]

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
    """Copy `source` to directory/prestop and make directory/tmp; raises InstallError.

    Everything inside DIR is reached through DIR's own descriptor and never through a symlink:
    DIR is an emptyDir that survives container restarts, so whatever the engine container left
    there (DIR/tmp or DIR/prestop a symlink to /etc, say) must not get chmod 1777 or 0755."""
    _check_directory(directory)
    try:
        with open(source, "rb") as f:
            content = f.read()
    except OSError as exc:
        raise InstallError(f"cannot read this executable at {source}: {exc.strerror or exc}") from None
    target = os.path.join(directory, EXECUTABLE_NAME)
    directory_fd = _open_directory(directory)
    try:
        changed = not _keep_identical_copy(directory_fd, content, directory)
        if changed:
            _write_atomically(directory_fd, content, directory)
        tmp_dir = _make_tmp_dir(directory_fd, directory)
    finally:
        os.close(directory_fd)
    return InstallReport(path=target, bytes=len(content), sha256=hashlib.sha256(content).hexdigest(),
                         changed=changed, tmpdir=tmp_dir)


def _check_directory(directory: str) -> None:
    if not os.path.exists(directory):
        raise InstallError(f"{directory} does not exist (mount the emptyDir there first)")
    if not os.path.isdir(directory):
        raise InstallError(f"{directory} is not a directory")


def _open_directory(directory: str) -> int:
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise InstallError(_cannot_write(directory, exc)) from None


def _keep_identical_copy(directory_fd: int, content: bytes, directory: str) -> bool:
    """Whether DIR/prestop is already this executable (then made 0755); a symlink there never is."""
    try:
        fd = os.open(EXECUTABLE_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory_fd)
    except OSError:
        return False  # absent, unreadable, or a symlink (ELOOP): write it, the rename replaces the link
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(content):
            return False
        with os.fdopen(os.dup(fd), "rb") as f:
            if f.read() != content:
                return False
        os.fchmod(fd, EXECUTABLE_MODE)
        return True
    except OSError as exc:
        raise InstallError(_cannot_write(directory, exc)) from None
    finally:
        os.close(fd)


def _write_atomically(directory_fd: int, content: bytes, directory: str) -> None:
    # The temporary name is in DIR itself, so the rename never crosses filesystems; O_EXCL never
    # follows a symlink, and the rename replaces one at DIR/prestop rather than writing through it.
    temp = f".{EXECUTABLE_NAME}.{os.getpid()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=directory_fd)
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
        os.rename(temp, EXECUTABLE_NAME, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
    except OSError as exc:
        _remove_quietly(temp, directory_fd)
        raise InstallError(_cannot_write(directory, exc)) from None
    _fsync_directory(directory)


def _make_tmp_dir(directory_fd: int, directory: str) -> str:
    path = os.path.join(directory, TMP_SUBDIR)
    try:
        os.mkdir(TMP_SUBDIR, 0o700, dir_fd=directory_fd)  # 0700 until the chmod below: never briefly wider
    except FileExistsError:
        pass  # an earlier install's, or a restart's: checked below like a new one
    except OSError as exc:
        raise InstallError(_cannot_write(directory, exc)) from None
    try:
        fd = os.open(TMP_SUBDIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            kind = "a symlink" if os.path.islink(path) else "not a directory"
            raise InstallError(f"{path} exists and is {kind} (the bundle unpacks there; remove it: "
                               "install never follows or replaces it)") from None
        raise InstallError(_cannot_write(directory, exc)) from None
    try:
        os.fchmod(fd, TMP_MODE)
    except OSError as exc:
        raise InstallError(_cannot_write(directory, exc)) from None
    finally:
        os.close(fd)
    return path


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


def _remove_quietly(name: str, directory_fd: int) -> None:
    """Clean up after a failed install; the error being reported is the one that matters."""
    try:
        os.unlink(name, dir_fd=directory_fd)
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
