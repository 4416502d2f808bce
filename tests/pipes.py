"""Pipes as a log reader that stopped reading leaves them: full."""

from __future__ import annotations

import os


def fill(fd: int) -> None:
    """Write into a pipe until it takes no more; the descriptor is left blocking, as it was."""
    os.set_blocking(fd, False)
    try:
        while True:
            os.write(fd, b"x" * 65536)
    except BlockingIOError:
        pass
    os.set_blocking(fd, True)
