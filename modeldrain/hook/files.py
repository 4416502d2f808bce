"""Reading the small files the programs are given (annotations, a token) without being held by them.

Such a file is whatever the Pod mounts at that path. A FIFO would block a plain open() until
someone writes to it, and a huge or endless file would be read into memory. So the open never
blocks (O_NONBLOCK), only a regular file is read (a Secret's or the downward API's symlinks
lead to one), and no more than the cap: a larger file is an error, not a silent truncation.
"""

from __future__ import annotations

import os
import stat

__all__ = ["FileTooLargeError", "SmallFileError", "read_small_file"]


class SmallFileError(OSError):
    """The file cannot be read as a small regular file; the message says why, for a person."""


class FileTooLargeError(SmallFileError):
    """The file is larger than the caller's bound (a caller may word that in its own terms)."""


def read_small_file(path: str, max_bytes: int) -> bytes:
    """The whole content of `path`, a regular file of at most `max_bytes`; raises SmallFileError."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise SmallFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise SmallFileError(f"cannot read {path}: not a regular file ({_kind(mode)})")
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise FileTooLargeError(f"cannot read {path}: larger than {max_bytes} bytes")
        return b"".join(chunks)
    except SmallFileError:
        raise
    except OSError as exc:
        raise SmallFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"
