"""Telling the Pod's own drain-sidecar that this hook started and how it ended, over loopback.

A native sidecar gets SIGTERM only after its engine has exited, so without a word from the hook
it reads the engine's whole drain as a normal replica's. The hook therefore posts two small JSON
messages to `POST /v1/hook-events` on 127.0.0.1 (the sidecar takes them from loopback peers
only): `started` as its drain begins, `finished` with the outcome as it returns. Both are best
effort and bounded: the start goes out on a daemon thread nobody waits on; the end is sent
before the exit, and a sidecar that does not take it within REPORT_BUDGET_S is left behind. No
sidecar (refused at once), a stuck one, or anything else on the port never delays the drain past
that budget nor changes its result: every failure here is swallowed by design and logged by
nobody (the drain's own line says what the drain did).

The message layout is defined here once and parsed by the sidecar (modeldrain/sidecar/drain_ledger.py).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from typing import Mapping

__all__ = [
    "DRAIN_ID_HEX", "FINISHED", "STARTED", "finished_message", "new_drain_id", "post", "post_in_background",
    "started_message",
]

PATH = "/v1/hook-events"
# The whole exchange (connect, send, the status line back) on loopback takes well under a
# millisecond; past this the sidecar is stuck or absent and the hook goes on without it.
REPORT_BUDGET_S = 0.1
# The sidecar refuses a body over 1 KiB; a message is ~200 bytes.
MAX_MESSAGE_BYTES = 1024
STARTED = "started"
FINISHED = "finished"
DRAIN_ID_HEX = 16  # random hex characters naming one drain in its two messages


def new_drain_id() -> str:
    return os.urandom(DRAIN_ID_HEX // 2).hex()


def started_message(drain_id: str, grace_s: float) -> dict[str, object]:
    return {"event": STARTED, "drain": drain_id, "grace_s": grace_s}


def finished_message(drain_id: str, *, outcome: str, exit_code: int, elapsed_s: float | None,
                     held_after_last_busy_s: float | None, in_flight: float | None) -> dict[str, object]:
    return {"event": FINISHED, "drain": drain_id, "outcome": outcome, "exit_code": exit_code, "elapsed_s": elapsed_s,
            "held_after_last_busy_s": held_after_last_busy_s, "in_flight": in_flight}


def post(port: int, message: Mapping[str, object], budget_s: float = REPORT_BUDGET_S) -> bool:
    """POST one message to 127.0.0.1:port within budget_s; True when the sidecar answered 2xx."""
    body = json.dumps(message, separators=(",", ":")).encode("ascii")
    if len(body) > MAX_MESSAGE_BYTES:
        return False
    request = (f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode("ascii") + body
    deadline_at = time.monotonic() + budget_s
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=budget_s) as sock:
            sock.sendall(request)
            answer = b""
            while b"\r\n" not in answer and len(answer) < 64:
                remaining_s = deadline_at - time.monotonic()
                if remaining_s <= 0:
                    return False
                sock.settimeout(remaining_s)
                chunk = sock.recv(64)
                if not chunk:
                    break
                answer += chunk
    except OSError:  # refused (no sidecar), timed out (a stuck one): the drain goes on regardless
        return False
    return answer.startswith(b"HTTP/1.1 2")


def post_in_background(port: int, message: Mapping[str, object]) -> threading.Thread:
    """The same, on a daemon thread nobody joins: the drain never waits on it."""
    thread = threading.Thread(target=post, args=(port, message), name="sidecar-report", daemon=True)
    thread.start()
    return thread
