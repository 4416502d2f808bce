"""GET /v1/drain on a real sidecar: the hook's drain for an engine image without prestop, as kubelet's
httpGet hook calls it (no timeout, any number of times, no token)."""

import json
import threading
import time
from pathlib import Path

import pytest

from modeldrain import sidecar as package
from emulation.engine_process import EngineProcess
from tests.engine_work import send_requests

from .contract import assert_error, violations
from .secret_volume import k8s_secret
from .sidecar_process import SidecarProcess

SCHEMA = json.loads((Path(package.__file__).parent / "openapi.json").read_text())["components"]["schemas"]


@pytest.fixture(scope="module")
def guarded(vllm_engine, tmp_path_factory):
    token = k8s_secret(tmp_path_factory.mktemp("secret"), "secret-token", 1)
    with SidecarProcess("--port", str(vllm_engine.port), "--engine", "vllm", "--token-file", str(token)) as s:
        yield s


def call(sidecar, path, results, timeout_s=60.0):
    started = time.monotonic()
    status, body, _ = sidecar.request("GET", path, timeout_s=timeout_s)
    results.append((status, json.loads(body), time.monotonic() - started))


def test_a_busy_engine_is_drained_once_for_every_caller_and_no_token_is_needed(guarded, vllm_engine):
    send_requests(vllm_engine, 2, duration_s=7.0)
    results: list = []
    first = threading.Thread(target=call, args=(guarded, "/v1/drain?grace=30", results))
    first.start()
    time.sleep(1.0)
    second = threading.Thread(target=call, args=(guarded, "//v1/drain?grace=30", results))  # kubelet < 1.26
    second.start()
    first.join(60)
    second.join(60)
    (s1, a1, t1), (s2, a2, t2) = sorted(results, key=lambda r: r[1]["joined"])
    assert s1 == s2 == 200
    assert a1["outcome"] == a2["outcome"] == "idle" and a1["exit_code"] == 0
    assert (a1["joined"], a2["joined"]) == (False, True) and a1["reads"] == a2["reads"] >= 3
    assert 7.0 <= t1 < 10.0  # the route wait, the work, then two idle reads a second apart
    assert set(a1) == set(SCHEMA["DrainResult"]["required"])
    assert not violations("DrainResult", a1) and not violations("DrainResult", a2)
    # A repeated call within the grace (kubelet's delivery is at-least-once) gets the answer at once.
    again: list = []
    call(guarded, "/v1/drain?grace=30", again)
    assert again[0][1]["joined"] is True and again[0][2] < 1.0 and again[0][1]["reads"] == a1["reads"]
    drains = [e for e in guarded.events() if e["event"] == "drain_started"]
    assert len(drains) == 1 and drains[0]["deadline_s"] == 25.0


@pytest.mark.parametrize("query", ["", "?grace=abc", "?grace=0", "?grace=-5", "?grace=nan", "?grace=1e10"])
def test_a_bad_grace_is_a_400(guarded, query):
    status, body, _ = guarded.request("GET", f"/v1/drain{query}")
    assert status == 400 and assert_error(json.loads(body))["error"] == "bad_request"
    assert "abc" not in json.loads(body)["message"]


def test_the_other_v1_routes_still_need_the_token(guarded):
    assert guarded.request("GET", "/v1/work")[0] == 401


def test_callers_past_the_cap_get_429_and_the_deadline_ends_the_drain():
    with EngineProcess("--kind", "vllm") as engine, SidecarProcess("--port", str(engine.port), "--engine", "vllm") as s:
        send_requests(engine, 1, duration_s=60.0)
        results: list = []
        threads = [threading.Thread(target=call, args=(s, "/v1/drain?grace=12", results)) for _ in range(9)]
        for t in threads:
            t.start()
            time.sleep(0.05)
        for t in threads:
            t.join(60)
    statuses = sorted(r[0] for r in results)
    assert statuses == [200] * 8 + [429]
    answers = [r[1] for r in results if r[0] == 200]
    assert all(a["outcome"] == "deadline" and a["exit_code"] == 10 for a in answers)
    assert all(not violations("DrainResult", a) for a in answers)
    assert_error(next(r[1] for r in results if r[0] == 429))
    assert all(6.5 <= r[2] < 8.5 for r in results if r[0] == 200)  # G - 5 = 7 s after the first call
