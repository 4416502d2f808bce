"""vLLM's `GET /load` (`{"server_load": N}`): the API server's requests from arrival to the end of
their response, before and after the engine core's gauges count them.

Measured on vLLM 0.32 (docs/engines.md): 16 long prompts read 0 in the two gauges for 0.71 s while
they were tokenized; `/load` counted them 0.11 s after they were sent. It counts only with
`--enable-server-load-tracking` (without it the route answers 0 forever), so the reader reads it
only where the engine's argv turns it on (modeldrain/hook/engine.py), never by probing.

It is one API server process's count: each process keeps its own in its app state, and with
`--api-server-count` N > 1 (vLLM's default with `--data-parallel-size` N) an answer is whichever
process accepted that connection (measured: docs/engines.md). So a count above 0 is work (busy),
but a 0 is no word on the other N - 1: there the hook does not trust /load alone, the gauges'
idle read and its confirming read decide as without the flag, and the read's detail says
"one of N API servers" (modeldrain/hook/reader.py).
"""

from __future__ import annotations

import json
import math

__all__ = ["LOAD_PATH", "MAX_LOAD_BODY_BYTES", "ServerLoadError", "parse_server_load"]

LOAD_PATH = "/load"
# {"server_load": N} is a few bytes; a bigger body is no such answer.
MAX_LOAD_BODY_BYTES = 4096


class ServerLoadError(ValueError):
    """The body is not vLLM's /load answer."""


def parse_server_load(body: bytes) -> float:
    """N from `{"server_load": N}`; raises ServerLoadError saying what is wrong."""
    try:
        answer = json.loads(body)
    except ValueError:
        raise ServerLoadError(f"{LOAD_PATH} answered no JSON: {body[:80]!r}") from None
    value = answer.get("server_load") if isinstance(answer, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ServerLoadError(f"{LOAD_PATH} answered no server_load count: {body[:80]!r}")
    return float(value)
