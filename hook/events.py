"""The drain's timeline as JSON lines, where people can see it.

kubelet discards a successful hook's output, and a failed hook's event says only
"PreStopHook failed". So each state change goes to stderr and is mirrored to the container's
own log stream (PID 1's stdout), which is what `kubectl logs` shows.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time

# PID 1's stdout is the container's log stream when the hook runs inside the container.
CONTAINER_LOG = "/proc/1/fd/1"


class EventLog:
    """Writes one JSON object per line; each line is a single write, so concurrent hooks never interleave."""

    def __init__(self, started_at: float, mirror_path: str | None, stream=None):
        self._started_at = started_at
        self._stream = stream if stream is not None else sys.stderr
        self._mirror_fd, self.mirror_status = _open_mirror(mirror_path, self._stream)

    def line(self, event: str, **fields) -> str:
        record = {
            "ts": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds"),
            "source": "prestop",
            "event": event,
            "elapsed_s": round(time.monotonic() - self._started_at, 3),
            "pid": os.getpid(),
        }
        record.update(fields)
        return json.dumps(record, separators=(",", ":"), default=str)

    def emit(self, event: str, **fields) -> str:
        text = self.line(event, **fields)
        self._write(text + "\n")
        return text

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):
            pass  # stderr closed by the caller: the mirror and the exit code still carry the drain
        if self._mirror_fd is not None:
            try:
                os.write(self._mirror_fd, text.encode())
            except OSError as exc:
                # The container's log went away (a pipe closed): stop mirroring, say so once.
                os.close(self._mirror_fd)
                self._mirror_fd = None
                self.mirror_status = f"lost: {exc}"

    def close(self) -> None:
        if self._mirror_fd is not None:
            os.close(self._mirror_fd)
            self._mirror_fd = None


def _open_mirror(path: str | None, stream) -> tuple[int | None, str]:
    """The mirror's descriptor, and a word for the log on what became of it."""
    if not path:
        return None, "off"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        # Not writable here (another user's PID 1, no /proc): stderr still carries every line.
        return None, f"unavailable: {exc.strerror or exc}"
    if _same_file(fd, stream):
        os.close(fd)  # our stderr already is the container's log: do not say everything twice
        return None, "same as stderr"
    return fd, path


def _same_file(fd: int, stream) -> bool:
    try:
        a = os.fstat(fd)
        b = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
