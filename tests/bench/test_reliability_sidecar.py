"""The sidecar's attackers, the meter of its clients, and its counters, against real processes and sockets."""

from __future__ import annotations

import asyncio

import pytest

from bench.reliability import bodies, cases
from bench.reliability import sidecar as reliability_sidecar
from bench.reliability.attack import attack
from bench.reliability.availability import counter_deltas, sidecar_counters, slope_per_min
from bench.reliability.hostile import serving
from bench.reliability.meter import summarize, timed_get
from emulation.raw_server import RawServer, canned
from tests.sidecar.sidecar_process import SidecarProcess


def test_the_meter_counts_every_failure_by_kind():
    with RawServer(canned(bodies.http_200(b"{}"))) as ok, \
            RawServer(canned(b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")) as full, \
            RawServer(lambda conn: conn.recv(1)) as hangs, serving(cases.NothingListens()) as closed:
        attempts = [timed_get(ok.port, "/healthz")[0], timed_get(full.port, "/healthz")[0],
                    timed_get(hangs.port, "/healthz", timeout_s=0.3)[0], timed_get(closed, "/healthz")[0]]
    assert [a.failure for a in attempts] == [None, "HTTP 503", "timeout", "refused"]
    figures = summarize(attempts)
    assert figures["ok"] == 1 and figures["success_rate"] == 0.25
    assert figures["failures"] == {"HTTP 503": 1, "timeout": 1, "refused": 1}


def test_the_slope_of_a_steady_climb():
    assert slope_per_min([(0.0, 100.0), (30.0, 110.0), (60.0, 120.0)]) == pytest.approx(20.0)
    assert slope_per_min([(0.0, 5.0), (60.0, 5.0)]) == 0.0
    assert slope_per_min([(0.0, 5.0)]) == 0.0


def test_the_attackers_reach_the_real_sidecar_and_its_counters_see_them(tmp_path):
    (tmp_path / "proc").mkdir()
    with SidecarProcess("--port", "9", "--max-connections", "4", "--proc-root", str(tmp_path / "proc")) as sidecar:
        port = sidecar.port
        assert port is not None
        before = sidecar_counters(port)
        tallies = asyncio.run(attack(port, 2.0, hold_n=4, hold_every_s=0.5, flood_per_s=20, slowloris_n=2))
        deltas = counter_deltas(before, sidecar_counters(port))
    assert tallies["hold"].answers.get("200", 0) > 0 and tallies["flood"].answers.get("200", 0) > 0
    assert tallies["slowloris"].opened >= 2
    # Over a cap of 4, new connections took the places of idle ones: the sidecar counted each.
    assert deltas.get("modeldrain_sidecar_connections_evicted_total", 0) > 0
    assert deltas.get('modeldrain_sidecar_requests_total{code="200",route="/healthz"}', 0) > 0




def test_a_sidecar_that_does_not_start_is_reported_as_a_crash(monkeypatch):
    class Refused(SidecarProcess):  # the real sidecar, given a flag it refuses: it exits 2 at start
        def __init__(self, *args, **kwargs):
            super().__init__(*args, "--no-such-flag", **kwargs)

    monkeypatch.setattr(reliability_sidecar, "SidecarProcess", Refused)
    case = reliability_sidecar.body_cases()[0]
    result = reliability_sidecar.hostile_bodies([case])
    assert result["answers"] == []
    assert result["start_with_port_superscript"]["problems"][0].startswith("crash: did not start")
    assert "unrecognized arguments: --no-such-flag" in result["start_with_port_superscript"]["problems"][0]


def test_the_sidecars_bodies_are_the_hooks_bodies_only():
    bodies_only = reliability_sidecar.body_cases()
    assert bodies_only
    assert all(isinstance(c.served, (cases.Canned, cases.Streamed)) and c.is_drain and not c.args for c in bodies_only)
    names = {c.name for c in bodies_only}
    assert "chunk size not hex (zz)" in names and "series-twice.om.txt" in names
    assert not any("SIGTERM" in n or "stderr" in n for n in names)


def test_a_drain_call_flood_from_one_address_leaves_kubelets_call_its_place(tmp_path):
    from bench.reliability import drain_route
    from emulation.engine_process import EngineProcess
    (tmp_path / "proc").mkdir()
    with EngineProcess("--kind", "vllm") as engine, \
            SidecarProcess("--port", str(engine.port), "--engine", "vllm", "--proc-root", str(tmp_path / "proc")) as s:
        case = drain_route.flood(s, engine, 1, 8)
    assert case.kubelet_status == 200 and case.kubelet_outcome == "idle" and not case.problems
    # Each source network may hold as many drain calls as the connection cap (docs/sidecar-api.md, the
    # threat model): 8 strangers are all admitted and share the drain, and kubelet's call still has its place.
    assert case.strangers == {"200": 8} and case.kubelet_seconds >= drain_route.LEAST_ANSWER_S - 0.3
