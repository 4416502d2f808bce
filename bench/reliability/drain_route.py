"""Abuse of GET /v1/drain (issue 15): strangers who pre-answer, shorten or flood kubelet's drain call.

    .venv/bin/python -m bench.reliability.drain_route [--json out.json]

The real sidecar reads the real engine emulator; every client is a real socket on a loopback
address of its own (kubelet 127.0.0.1, strangers 127.0.0.2+), as a node and other Pods are in a
cluster. Per case, what kubelet's `GET /v1/drain?grace=G` got: status, outcome, seconds from its own
call, and the engine's own in-flight count right after the answer. A problem: a false idle (idle
while the engine holds work), an answer before kubelet's own route wait and two idle reads could
have passed (pre-answered), a deadline before its own G - 5 (shortened), a refusal (turned away:
kubelet ignores the status and sends SIGTERM), or a grace outside 15..3600 not refused.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from emulation.engine_process import EngineProcess
from modeldrain.hook.constants import EXIT_RESERVE_S, IDLE_CONFIRM_GAP_S, ROUTE_WAIT_S
from tests.engine_work import send_requests
from tests.sidecar.sidecar_process import SidecarProcess, kill_now

KUBELET = "127.0.0.1"
STRANGERS = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
KUBELET_GRACE_S = 30.0
# The least a correct answer to kubelet's call takes: its own route wait, then two idle reads 1 s apart.
LEAST_ANSWER_S = ROUTE_WAIT_S + IDLE_CONFIRM_GAP_S
# Client-side scheduling on a loaded machine: an answer this much early is not yet a problem.
SLACK_S = 0.3
CALL_TIMEOUT_S = 60.0


@dataclass
class RouteCase:
    case: str
    attack: str
    kubelet_status: int | None = None
    kubelet_outcome: str | None = None
    kubelet_seconds: float = 0.0
    in_flight_at_answer: float | None = None
    strangers: dict[str, int] = field(default_factory=dict)  # their statuses, counted
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def _get(sidecar: SidecarProcess, path: str, source: str) -> tuple[int | None, dict, float]:
    started = time.monotonic()
    try:
        status, body, _ = sidecar.request("GET", path, timeout_s=CALL_TIMEOUT_S, source=source)
        answer = json.loads(body)
    except (OSError, ValueError):
        return None, {}, time.monotonic() - started
    return status, answer, time.monotonic() - started


class _Strangers:
    """Stranger calls in threads; their statuses counted."""

    def __init__(self, sidecar: SidecarProcess):
        self._sidecar = sidecar
        self._threads: list[threading.Thread] = []
        self.statuses: dict[str, int] = {}
        self._lock = threading.Lock()

    def call(self, path: str, source: str) -> None:
        def run() -> None:
            status = _get(self._sidecar, path, source)[0]
            with self._lock:
                key = str(status)
                self.statuses[key] = self.statuses.get(key, 0) + 1
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self._threads.append(thread)

    def join(self) -> dict[str, int]:
        for thread in self._threads:
            thread.join(CALL_TIMEOUT_S)
        return dict(sorted(self.statuses.items()))


def _kubelet(sidecar: SidecarProcess, engine: EngineProcess, case: RouteCase, grace_s: float = KUBELET_GRACE_S) -> None:
    status, answer, seconds = _get(sidecar, f"/v1/drain?grace={grace_s:g}", KUBELET)
    case.kubelet_status, case.kubelet_outcome, case.kubelet_seconds = status, answer.get("outcome"), round(seconds, 3)
    case.in_flight_at_answer = engine.stats()["in_flight"]
    if status != 200:
        case.problems.append(f"turned away: HTTP {status}")
        return
    if case.kubelet_outcome == "idle" and case.in_flight_at_answer:
        case.problems.append("false idle")
    if seconds < LEAST_ANSWER_S - SLACK_S:
        case.problems.append("pre-answered: before its own route wait and two idle reads")
    if case.kubelet_outcome == "deadline" and seconds < grace_s - EXIT_RESERVE_S - SLACK_S:
        case.problems.append("shortened: before its own G - 5")


def _wait_idle(engine: EngineProcess, timeout_s: float) -> None:
    deadline_at = time.monotonic() + timeout_s
    while engine.stats()["in_flight"] and time.monotonic() < deadline_at:
        time.sleep(0.1)


def pre_answer(sidecar: SidecarProcess, engine: EngineProcess) -> RouteCase:
    case = RouteCase("pre-answer", "a stranger's grace=1000000, then grace=3600 drain ends idle; the engine takes "
                     "4 requests of 9 s; kubelet calls")
    huge = _get(sidecar, "/v1/drain?grace=1000000", STRANGERS[0])[0]
    done = _get(sidecar, "/v1/drain?grace=3600", STRANGERS[0])[0]
    for status in (huge, done):
        case.strangers[str(status)] = case.strangers.get(str(status), 0) + 1
    if huge != 400:
        case.problems.append(f"grace=1000000 answered {huge}, not 400")
    send_requests(engine, 4, duration_s=9.0)
    _kubelet(sidecar, engine, case)
    return case


def route_wait(sidecar: SidecarProcess, engine: EngineProcess) -> RouteCase:
    case = RouteCase("route wait", "a stranger's drain reads idle; kubelet calls 5.5 s after it; a request arrives "
                     "1.5 s into kubelet's own route wait")
    strangers = _Strangers(sidecar)
    strangers.call(f"/v1/drain?grace={KUBELET_GRACE_S:g}", STRANGERS[0])
    time.sleep(5.5)
    late = threading.Timer(1.5, lambda: send_requests(engine, 1, duration_s=5.0))
    late.start()
    _kubelet(sidecar, engine, case)
    late.join()
    case.strangers = strangers.join()
    _wait_idle(engine, 10.0)
    return case


def flood(sidecar: SidecarProcess, engine: EngineProcess, addresses: int, per_address: int,
          sources: tuple[str, ...] = STRANGERS) -> RouteCase:
    """`sources`: where the strangers call from; (KUBELET,) for clients SNAT'd to kubelet's own node address."""
    shared = sources == (KUBELET,)
    where = "kubelet's own address" if shared else f"{addresses} address{'es' if addresses > 1 else ''}"
    suffix = " from kubelet's address" if shared else ""
    case = RouteCase(f"flood {addresses}×{per_address}{suffix}",
                     f"{addresses * per_address} stranger calls open from {where}, then kubelet calls")
    strangers = _Strangers(sidecar)
    for source in sources[:addresses]:
        for _ in range(per_address):
            strangers.call(f"/v1/drain?grace={KUBELET_GRACE_S:g}", source)
    time.sleep(1.0)  # every stranger call is in (or refused) before kubelet's
    _kubelet(sidecar, engine, case)
    case.strangers = strangers.join()
    return case


def shorten(sidecar: SidecarProcess, engine: EngineProcess) -> RouteCase:
    case = RouteCase("shorten", "the engine holds a 20 s request; a stranger's grace=15; kubelet's grace=20 1 s later")
    send_requests(engine, 1, duration_s=20.0)
    strangers = _Strangers(sidecar)
    strangers.call("/v1/drain?grace=15", STRANGERS[0])
    time.sleep(1.0)
    _kubelet(sidecar, engine, case, grace_s=20.0)
    case.strangers = strangers.join()
    _wait_idle(engine, 10.0)
    return case


def measure() -> dict:
    with tempfile.TemporaryDirectory(prefix="drain-route-") as proc, EngineProcess("--kind", "vllm") as engine, \
            SidecarProcess("--port", str(engine.port), "--engine", "vllm", "--proc-root", proc) as sidecar:
        cases = [pre_answer(sidecar, engine), route_wait(sidecar, engine), flood(sidecar, engine, 1, 8),
                 flood(sidecar, engine, 4, 8), flood(sidecar, engine, 1, 8, sources=(KUBELET,)),
                 shorten(sidecar, engine)]
        traceback = "Traceback" in sidecar.log_text()
        kill_now(engine)
    return {"cases": [c.as_dict() for c in cases],
            "false_idles": sum("false idle" in c.problems for c in cases),
            "problems": sum(bool(c.problems) for c in cases),
            "traceback_in_log": traceback}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = measure()
    text = json.dumps(result, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
