"""Library log records (aiohttp's, asyncio's) as the sidecar's own JSON lines.

aiohttp and asyncio report through the `logging` module; without this, a connection error
would print a plain-text traceback into a log that is otherwise one JSON object per line.
"""

from __future__ import annotations

import logging

from modeldrain.hook.events import EventLog

__all__ = ["route_library_logs"]


class JsonLogHandler(logging.Handler):
    """One `library_log` event per record at WARNING or above."""

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
