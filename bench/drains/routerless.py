"""A router-less scale-down of an idle replica, measured for real: before, Aborted at the 30 s withdrawal
budget; now, the time from the endpoint's removal to the delete, and the requests cut.

The Pod (engine emulator on `::`, drain-sidecar) and a client live in two network namespaces joined
by a link-local-only veth pair (tests/e2e/link_local.py). The client sends requests over keep-alive
connections, then stops: that instant is the endpoint's removal (the client has no more reason to
send). The controller runs `retirement.retire(router=False)`; at its decision the engine is stopped,
and a request the client started but had no answer to counts as cut. "Before" is the same with a sidecar that
cannot count connections (an empty --net-root: no evidence, as without this release). Also the
connection scan's own cost with thousands of sockets in one namespace. Root.

    sudo .venv/bin/python -m bench.drains.routerless   # merges "routerless" into bench/results.json
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import shutil
import socket
import statistics
import sys
import tempfile
import time

from bench import report
from emulation.engine_process import EngineProcess, free_port
from modeldrain.retirement import client as retirement
from modeldrain.sidecar.connections import count_connections
from tests.e2e.link_local import LinkLocalPair
from tests.sidecar.sidecar_process import SidecarProcess, kill_now

POD = retirement.ExpectedPod("team-a", "llm-0", "uid-llm-0")
POD_ENV = {"POD_NAMESPACE": "team-a", "POD_NAME": "llm-0", "POD_UID": "uid-llm-0"}
RUNS = 3  # "now" runs; "before" is one run of 30 s (its time is the budget, by construction)
CLIENT_CONNECTIONS = 3
REQUESTS_PER_CONNECTION = 4
REQUEST_S = 0.2  # each completion runs this long in the emulator
SCAN_CONNECTIONS = 5000
SCAN_REPEATS = 10
COMMAND = "sudo .venv/bin/python -m bench.drains.routerless"


def _client_traffic(pair: LinkLocalPair, port: int) -> tuple[int, int, list]:
    """Requests over keep-alive connections; returns (started, answered, the still-open connections)."""
    started = answered = 0
    connections = []
    for _ in range(CLIENT_CONNECTIONS):
        connection = pair.in_client(lambda: http.client.HTTPConnection(pair.pod_url_host, port, timeout=30))
        pair.in_client(connection.connect)
        connections.append(connection)
    for _ in range(REQUESTS_PER_CONNECTION):
        for connection in connections:
            started += 1
            connection.request("POST", "/v1/completions", body=json.dumps({"duration_s": REQUEST_S}),
                               headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            answered += response.status == 200
    return started, answered, connections


def _one(counting: bool) -> dict:
    with LinkLocalPair() as pair, tempfile.TemporaryDirectory() as empty:
        port = pair.in_pod(free_port)
        engine = pair.in_pod(lambda: EngineProcess("--kind", "vllm", "--host", "::", "--port", str(port),
                                                   die_with_parent=False).start())
        extra = () if counting else ("--net-root", empty)
        sidecar = pair.in_pod(lambda: SidecarProcess("--port", str(port), "--engine", "vllm", *extra,
                                                     env=POD_ENV).start())
        try:
            started, answered, connections = _client_traffic(pair, port)
            removed_at = time.monotonic()  # the client stops: the endpoint is gone
            rounds: list[str] = []
            decision = pair.in_pod(lambda: retirement.retire(
                [retirement.MemberEndpoint(sidecar.base_url, POD)], budget_s=60.0, router=False,
                on_round=lambda _at, d: rounds.append(d.reason.value)), timeout_s=90)
            decided_s = time.monotonic() - removed_at
            closed_by_engine = sum(1 for c in connections if c.sock is not None and c.sock.recv(1) == b"")
            for connection in connections:
                connection.close()
        finally:
            sidecar.stop()
            kill_now(engine)
    return {"verdict": decision.verdict.value, "reason": decision.reason.value, "decided_s": round(decided_s, 2),
            "rounds": len(rounds), "requests_started": started, "requests_answered": answered,
            "requests_cut": started - answered, "connections_closed_by_engine": closed_by_engine}


def _scan_cost() -> dict:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2 * SCAN_CONNECTIONS + 100), hard))
    sockets = []
    with socket.create_server(("::1", 0), family=socket.AF_INET6, backlog=1024) as listener:
        for _ in range(SCAN_CONNECTIONS):
            client = socket.create_connection(listener.getsockname()[:2])
            server, _ = listener.accept()
            sockets += [client, server]
        durations = [count_connections("/proc", [listener.getsockname()[1]]).duration_ms
                     for _ in range(SCAN_REPEATS)]
    for s in sockets:
        s.close()
    return {"connections": SCAN_CONNECTIONS, "sockets": 2 * SCAN_CONNECTIONS + 1, "repeats": SCAN_REPEATS,
            "median_ms": round(statistics.median(durations), 1), "max_ms": round(max(durations), 1)}


def why_not_here() -> str | None:
    """What this machine lacks for the two network namespaces, in one line, or None."""
    if os.geteuid() != 0:
        return f"needs root (network namespaces and a veth pair): run `{COMMAND}`"
    missing = [tool for tool in ("unshare", "nsenter", "ip") if shutil.which(tool) is None]
    return f"needs {', '.join(missing)} on PATH (network namespaces)" if missing else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.drains.routerless", description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    missing = why_not_here()
    if missing:
        print(f"{parser.prog}: error: {missing}", file=sys.stderr)
        return 2
    now = [_one(counting=True) for _ in range(RUNS)]
    before = _one(counting=False)
    part = {"command": COMMAND, "before": before, "now": now,
            "now_median_decided_s": statistics.median(r["decided_s"] for r in now), "scan": _scan_cost(),
            "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    report.merge("routerless", part)
    print(json.dumps(part, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
