"""The programs' log: one JSON object per line, written so that it can never stall or flood them.

`prestop` and `drain-sidecar` both log through `EventLog`: the same fields (ts, source, level,
event, pid), the same RFC 3339 UTC timestamp, the same bounds.

kubelet discards a successful hook's output, and a failed hook's event says only
"PreStopHook failed". So the hook mirrors each line to the container's own log stream (PID 1's
stdout), which is what `kubectl logs` shows. Those streams are pipes to a log reader the
programs do not control, and a reader that stalls must not stop a drain: every write is
non-blocking with a short bounded wait, a line that cannot be written is dropped and counted,
and a line is at most PIPE_BUF bytes, so one write is atomic and concurrent writers (two hooks,
the engine) never interleave within a line.
"""

from __future__ import annotations

import errno
import json
import os
import select
import stat
import time
from typing import Any

__all__ = [
    "CONTAINER_LOG", "EventLog", "MAX_FIELD_CHARS", "MAX_LINE_BYTES", "Sink", "WRITE_WAIT_S", "fit_line", "mirror_for",
    "utc_timestamp",
]

# PID 1's stdout is the container's log stream when the hook runs inside the container.
CONTAINER_LOG = "/proc/1/fd/1"
# Why the mirror is off for a hook run by hand: a person at a terminal reads stderr already, and
# outside a container PID 1 is the host's init, whose stdout is no log of ours.
INTERACTIVE_MIRROR_OFF = "off: run from an interactive terminal (stdin, stdout or stderr is a TTY)"


def interactive_terminal(fds: tuple[int, ...] = (0, 1, 2)) -> bool:
    """A person runs this from a terminal: kubelet's exec of a hook gives it pipes or /dev/null,
    never a TTY, so a TTY on any standard stream means the hook was not run as a Pod's hook."""
    return any(os.isatty(fd) for fd in fds)


def mirror_for(path: str | None) -> tuple[str | None, str]:
    """The mirror to open and, when none, why: never from an interactive terminal."""
    if path is None:
        return None, "off"
    if interactive_terminal():
        return None, INTERACTIVE_MIRROR_OFF
    return path, "off"

# POSIX guarantees a write of at most PIPE_BUF bytes to a pipe is atomic (4096 on Linux).
MAX_LINE_BYTES = 4096
# A value longer than this is cut (the line says which fields were): an annotation or an
# engine's error text cannot make a line of megabytes.
MAX_FIELD_CHARS = 512

# How long one line may wait for a full pipe to drain, per destination. A destination that
# timed out is "stalled": later lines try it once without waiting until a write succeeds.
WRITE_WAIT_S = 0.05

# Every line carries these; `_fit` never drops them.
_BOOKKEEPING = ("ts", "source", "level", "event", "pid", "elapsed_s")


def utc_timestamp(unix_s: float | None = None) -> str:
    """RFC 3339 UTC with milliseconds and a Z: the one timestamp format of every line and answer."""
    now = time.time() if unix_s is None else unix_s
    whole = int(now)
    millis = int((now - whole) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{millis:03d}Z"


class Sink:
    """One file descriptor the log writes to, never blocked on for longer than a bound."""

    def __init__(self, fd: int, name: str, *, owned: bool, nonblocking: bool):
        self.fd: int | None = fd
        self.name = name
        self._owned = owned
        self._nonblocking = nonblocking
        self.stalled = False
        self.problem = ""

    @classmethod
    def for_stream(cls, fd: int, name: str) -> "Sink":
        """An inherited descriptor (stderr, stdout). A pipe or FIFO is reopened through /proc as
        a private non-blocking description, so the O_NONBLOCK flag never leaks to the process that
        shares it; anything else is written after poll() says it can take a line."""
        try:
            mode = os.fstat(fd).st_mode
        except OSError as exc:
            sink = cls(fd, name, owned=False, nonblocking=False)
            sink._lose(exc)
            return sink
        if stat.S_ISFIFO(mode):
            try:
                private = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                pass  # no /proc here: poll before each write instead
            else:
                return cls(private, name, owned=True, nonblocking=True)
        return cls(fd, name, owned=False, nonblocking=False)

    @classmethod
    def open_path(cls, path: str) -> "Sink":
        """A path opened for appending without ever blocking: a FIFO with no reader fails at once."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_NOCTTY | os.O_CLOEXEC | os.O_NONBLOCK
        fd = os.open(path, flags)
        return cls(fd, path, owned=True, nonblocking=True)

    def write(self, data: bytes) -> bool:
        """Write all of `data`, waiting at most WRITE_WAIT_S (none while stalled); False if not."""
        if self.fd is None:
            return False
        deadline_at = time.monotonic() + (0.0 if self.stalled else WRITE_WAIT_S)
        view = memoryview(data)
        while view:
            if not self._nonblocking and not self._wait_writable(deadline_at):
                return self._timed_out()
            try:
                written = os.write(self.fd, view)
            except BlockingIOError:
                if not self._wait_writable(deadline_at):
                    return self._timed_out()
                continue
            except OSError as exc:  # the reader went away (EPIPE), or the descriptor did
                self._lose(exc)
                return False
            view = view[written:]
        self.stalled = False
        return True

    def _wait_writable(self, deadline_at: float) -> bool:
        assert self.fd is not None
        remaining_s = deadline_at - time.monotonic()
        poller = select.poll()
        poller.register(self.fd, select.POLLOUT)
        try:
            events = poller.poll(max(0, int(remaining_s * 1000)))
        except OSError:
            return False
        return any(mask & select.POLLOUT for _, mask in events)

    def _timed_out(self) -> bool:
        self.stalled = True
        return False

    def _lose(self, exc: OSError) -> None:
        self.problem = f"lost: {exc.strerror or errno.errorcode.get(exc.errno or 0, exc)}"
        self.close()

    def close(self) -> None:
        if self.fd is not None and self._owned:
            try:
                os.close(self.fd)
            except OSError:
                pass  # already closed by the kernel's view: nothing left to release
        self.fd = None


def same_file(a: int, b: int) -> bool:
    try:
        sa, sb = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


class EventLog:
    """JSON lines to stderr and, optionally, a mirror (the container's log stream)."""

    def __init__(self, source: str, *, started_at: float | None = None, stream_fd: int = 2,
                 mirror_path: str | None = None, mirror_off: str = "off"):
        self._source = source
        self._started_at = started_at
        self._stream = Sink.for_stream(stream_fd, "stderr")
        self._mirror: Sink | None = None
        self.mirror_status = mirror_off  # what drain_started says when there is no mirror
        self.dropped = 0  # lines not written to every destination
        if mirror_path:
            self._open_mirror(mirror_path)

    def _open_mirror(self, path: str) -> None:
        try:
            mirror = Sink.open_path(path)
        except OSError as exc:
            # Not writable here (another user's PID 1, no /proc, a FIFO nobody reads): stderr
            # still carries every line.
            self.mirror_status = f"unavailable: {exc.strerror or exc}"
            return
        if self._stream.fd is not None and mirror.fd is not None and same_file(mirror.fd, self._stream.fd):
            mirror.close()  # stderr already is the container's log: do not say everything twice
            self.mirror_status = "same as stderr"
            return
        self._mirror = mirror
        self.mirror_status = path

    def line(self, event: str, *, level: str = "info", **fields: Any) -> str:
        record: dict[str, Any] = {
            "ts": utc_timestamp(),
            "source": self._source,
            "level": level,
            "event": event,
            "pid": os.getpid(),
        }
        if self._started_at is not None:
            record["elapsed_s"] = round(time.monotonic() - self._started_at, 3)
        record.update(fields)
        return fit_line(record)

    def emit(self, event: str, *, level: str = "info", **fields: Any) -> str:
        """Log one event; returns its line (the hook also prints its last one on stdout)."""
        text = self.line(event, level=level, **fields)
        data = (text + "\n").encode("ascii")
        ok = self._stream.write(data)
        if self._mirror is not None:
            ok = self._mirror.write(data) and ok
            if self._mirror.fd is None:
                self.mirror_status = self._mirror.problem
                self._mirror = None
        if not ok:
            self.dropped += 1
        return text

    def warning(self, event: str, **fields: Any) -> str:
        return self.emit(event, level="warning", **fields)

    def error(self, event: str, **fields: Any) -> str:
        return self.emit(event, level="error", **fields)

    def close(self) -> None:
        self._stream.close()
        if self._mirror is not None:
            self._mirror.close()
            self._mirror = None


def fit_line(record: dict[str, Any]) -> str:
    """The record as one JSON line of at most MAX_LINE_BYTES - 1 bytes (room for the newline).

    Long values are cut to MAX_FIELD_CHARS first; if the line is still too long, the largest
    fields go. Either way `truncated` lists the fields that were cut or dropped.
    """
    text = _dumps(record)
    if len(text) < MAX_LINE_BYTES:
        return text
    fitted = dict(record)
    cut: list[str] = []
    for key, value in record.items():
        if key in _BOOKKEEPING:
            continue
        encoded = value if isinstance(value, str) else _dumps(value)
        if len(encoded) > MAX_FIELD_CHARS:
            fitted[key] = encoded[:MAX_FIELD_CHARS] + f"...[{len(encoded) - MAX_FIELD_CHARS} more]"
            cut.append(key)
    fitted["truncated"] = cut
    text = _dumps(fitted)
    by_size = sorted((k for k in fitted if k not in _BOOKKEEPING and k != "truncated"),
                     key=lambda k: len(_dumps(fitted[k])), reverse=True)
    for key in by_size:
        if len(text) < MAX_LINE_BYTES:
            break
        del fitted[key]
        if key not in cut:
            cut.append(key)
        fitted["truncated"] = cut
        text = _dumps(fitted)
    return text


def _dumps(value: Any) -> str:
    # ASCII only: a control or non-ASCII character from the engine or the Pod is escaped, so a
    # line stays one line and its length in characters is its length in bytes.
    return json.dumps(value, separators=(",", ":"), default=str, ensure_ascii=True)
