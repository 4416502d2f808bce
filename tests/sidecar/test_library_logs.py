"""aiohttp's and asyncio's log records become the sidecar's own JSON lines."""

import json
import logging
import os

from modeldrain.hook.events import EventLog
from modeldrain.sidecar.library_logs import route_library_logs


def test_library_warnings_are_json_lines_and_info_is_not(tmp_path):
    r, w = os.pipe()
    os.set_blocking(r, False)
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        route_library_logs(EventLog("drain-sidecar", stream_fd=w))
        logging.getLogger("aiohttp.server").info("chatty")
        try:
            raise ConnectionResetError("peer went away")
        except ConnectionResetError:
            logging.getLogger("aiohttp.server").warning("Error handling request", exc_info=True)
        lines = [json.loads(line) for line in os.read(r, 65536).decode().splitlines()]
    finally:
        root.handlers[:], root.level = saved[0], saved[1]
        os.close(r)
        os.close(w)
    assert len(lines) == 1
    line = lines[0]
    assert (line["event"], line["level"], line["logger"]) == ("library_log", "warning", "aiohttp.server")
    assert line["message"] == "Error handling request"
    assert line["error"] == "ConnectionResetError('peer went away')"
