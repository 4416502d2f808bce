"""The sidecar's log: one JSON object per line on stderr, which is its container's log."""

from __future__ import annotations

import datetime
import json
import logging
import os
import sys
from typing import TextIO

SOURCE = "drain-sidecar"


class EventLog:
    def __init__(self, stream: TextIO | None = None):
        self._stream = stream if stream is not None else sys.stderr
        self.lost = 0  # lines that could not be written

    def emit(self, event: str, level: str = "info", **fields) -> None:
        record = {
            "ts": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds"),
            "source": SOURCE,
            "level": level,
            "event": event,
            "pid": os.getpid(),
        }
        record.update(fields)
        try:
            self._stream.write(json.dumps(record, separators=(",", ":"), default=str) + "\n")
            self._stream.flush()
        except (OSError, ValueError):
            # stderr closed: the container's log is gone, and serving must not fail for it.
            self.lost += 1

    def warning(self, event: str, **fields) -> None:
        self.emit(event, level="warning", **fields)


class JsonLogHandler(logging.Handler):
    """Routes library log records (aiohttp's) into the same JSON lines, one per record."""

    def __init__(self, log: EventLog):
        super().__init__(logging.WARNING)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        error = None
        if record.exc_info and record.exc_info[1] is not None:
            error = repr(record.exc_info[1])
        self._log.emit("library_log", level=record.levelname.lower(), logger=record.name,
                       message=record.getMessage(), error=error)


def route_library_logs(log: EventLog) -> None:
    root = logging.getLogger()
    root.handlers[:] = [JsonLogHandler(log)]
    root.setLevel(logging.WARNING)
