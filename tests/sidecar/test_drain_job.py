"""GET /v1/drain on a real sidecar: the hook's drain for an engine image without prestop, as kubelet's
httpGet hook calls it (no timeout, any number of times, no token), and as anyone else who reaches the
port may call it (issue 15: a stranger's call must not pre-answer, shorten or turn away kubelet's).

Every caller here is a real client on its own loopback address (all of 127/8 is this machine), as
kubelet (its node's address) and a stranger (another Pod's) are in a cluster."""

import json
import socket
import threading
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from emulation.engine_process import EngineProcess
from emulation.launch import LaunchShape
from modeldrain import sidecar as package
from modeldrain.hook.constants import IDLE_CONFIRM_GAP_S, ROUTE_WAIT_S
from tests.engine_work import send_requests

from .contract import assert_error, violations
from .secret_volume import k8s_secret
from .sidecar_process import SidecarProcess, kill_now

SCHEMA = json.loads((Path(package.__file__).parent / "openapi.json").read_text())["components"]["schemas"]
KUBELET = "127.0.0.1"
STRANGERS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
FIFTH_NETWORK = "127.0.0.5"
# The least an idle drain takes from its own call: the route wait, then two idle reads 1 s apart.
IDLE_DRAIN_S = ROUTE_WAIT_S + IDLE_CONFIRM_GAP_S
# Scheduling on a loaded 2-core machine: how early an answer may look by the client's clock.
EARLY_SLACK_S = 0.3


@pytest.fixture(scope="module")
def guarded(vllm_engine, tmp_path_factory):
    """As the issue observed it: a sidecar started with --token-file."""
    token = k8s_secret(tmp_path_factory.mktemp("secret"), "secret-token", 1)
    with SidecarProcess("--port", str(vllm_engine.port), "--engine", "vllm", "--token-file", str(token),
                        "--proc-root", str(tmp_path_factory.mktemp("proc"))) as s:
        yield s


def call(sidecar, path, results, source=KUBELET, timeout_s=60.0):
    started = time.monotonic()
    status, body, _ = sidecar.request("GET", path, timeout_s=timeout_s, source=source)
    results.append((status, json.loads(body), time.monotonic() - started, source))


def in_thread(*args, **kwargs) -> threading.Thread:
    thread = threading.Thread(target=call, args=args, kwargs=kwargs)
    thread.start()
    return thread


def wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline_at = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline_at:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.05)


def test_a_busy_engine_is_drained_for_each_caller_and_no_token_is_needed(guarded, vllm_engine):
    send_requests(vllm_engine, 2, duration_s=7.0)
    results: list = []
    first = in_thread(guarded, "/v1/drain?grace=30", results)
    time.sleep(1.0)
    second = in_thread(guarded, "//v1/drain?grace=30", results)  # kubelet < 1.26
    first.join(60)
    second.join(60)
    (s1, a1, t1, _), (s2, a2, t2, _) = sorted(results, key=lambda r: r[1]["joined"])
    assert s1 == s2 == 200
    assert a1["outcome"] == a2["outcome"] == "idle" and a1["exit_code"] == 0
    assert (a1["joined"], a2["joined"]) == (False, True) and a1["reads"] >= 3 and a2["reads"] >= 3
    assert 7.0 <= t1 < 10.0  # the route wait, the work, then two idle reads a second apart
    assert set(a1) == set(SCHEMA["DrainResult"]["required"])
    assert not violations("DrainResult", a1) and not violations("DrainResult", a2)
    # A repeated call (kubelet's delivery is at-least-once) measures again, from its own arrival.
    again: list = []
    call(guarded, "/v1/drain?grace=30", again)
    assert again[0][1]["joined"] is False and again[0][1]["outcome"] == "idle"
    assert again[0][2] >= IDLE_DRAIN_S - EARLY_SLACK_S and again[0][1]["elapsed_s"] >= IDLE_DRAIN_S
    drains = [e for e in guarded.events() if e["event"] == "drain_started"]
    assert len(drains) >= 3 and all(d["deadline_s"] == 25.0 and d["grace_source"] == "?grace=" for d in drains[-3:])


def test_a_finished_drain_is_never_handed_to_a_later_call(guarded, vllm_engine):
    """Issue 15, observed: a stranger's drain answered idle; the engine then took 4 requests; kubelet's
    call was answered at once from the stranger's result (idle, joined, grace 1000000): SIGTERM mid-work."""
    status, body, _ = guarded.request("GET", "/v1/drain?grace=3600", timeout_s=60, source=STRANGERS[0])
    assert status == 200 and json.loads(body)["outcome"] == "idle"
    send_requests(vllm_engine, 4, duration_s=9.0)
    results: list = []
    call(guarded, "/v1/drain?grace=30", results)
    status, answer, seconds, _ = results[0]
    assert status == 200 and answer["joined"] is False and answer["grace_s"] == 30
    # Its own reads: busy while the four ran, then idle twice; never the stranger's idle.
    assert answer["outcome"] == "idle" and seconds >= 8.0 and answer["reads"] >= 4
    assert vllm_engine.stats()["in_flight"] == 0


def test_a_call_during_anothers_drain_waits_its_own_route_wait(guarded):
    """Issue 15: a joining call inherited the first caller's start, so its route wait was cut short."""
    results: list = []
    stranger = in_thread(guarded, "/v1/drain?grace=30", results, source=STRANGERS[0])
    time.sleep(4.0)
    call(guarded, "/v1/drain?grace=30", results)
    stranger.join(60)
    mine = next(r for r in results if r[3] == KUBELET)
    assert mine[0] == 200 and mine[1]["joined"] is True and mine[1]["outcome"] == "idle"
    assert mine[2] >= IDLE_DRAIN_S - EARLY_SLACK_S and mine[1]["elapsed_s"] >= IDLE_DRAIN_S


def test_a_strangers_short_grace_does_not_shorten_kubelets_call(tmp_path):
    """Issue 15: a stranger's grace=15 call made kubelet's later call end at the stranger's deadline."""
    with (EngineProcess("--kind", "vllm") as engine,
          SidecarProcess("--port", str(engine.port), "--engine", "vllm", "--proc-root", str(tmp_path)) as s):
        send_requests(engine, 1, duration_s=60.0)
        results: list = []
        stranger = in_thread(s, "/v1/drain?grace=15", results, source=STRANGERS[0])
        time.sleep(1.0)
        call(s, "/v1/drain?grace=20", results)
        stranger.join(60)
        kill_now(engine)
    by = {r[3]: r for r in results}
    (ks, kubelet, k_s, _), (ss, stranger_answer, s_s, _) = by[KUBELET], by[STRANGERS[0]]
    assert ks == ss == 200 and kubelet["outcome"] == stranger_answer["outcome"] == "deadline"
    assert kubelet["grace_s"] == 20 and kubelet["exit_code"] == 10 and not violations("DrainResult", kubelet)
    assert 15.0 - EARLY_SLACK_S <= k_s < 18.0  # its own G - 5, from its own arrival
    assert 10.0 - EARLY_SLACK_S <= s_s < 13.0


def waiting_drain_calls(sidecar) -> float:
    """What the sidecar's /metrics says: drain calls admitted and not yet answered."""
    status, body, _ = sidecar.request("GET", "/metrics")
    assert status == 200
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == "modeldrain_drains_in_progress" and sample.labels == {"via": "drain_call"}:
                return sample.value
    raise AssertionError("no modeldrain_drains_in_progress{via=drain_call} in /metrics")


def test_strangers_from_kubelets_own_address_cannot_turn_its_call_away(guarded):
    """Issue 25, 8: four stranger calls from kubelet's own source address (clients SNAT'd to the node)
    got kubelet's call a 429."""
    results: list = []
    before = waiting_drain_calls(guarded)
    strangers = [in_thread(guarded, "/v1/drain?grace=30", results, source=KUBELET) for _ in range(8)]
    wait_for(lambda: waiting_drain_calls(guarded) - before >= 8, 10.0, "eight strangers' calls waiting")
    call(guarded, "/v1/drain?grace=30", results)
    for t in strangers:
        t.join(60)
    assert [r[0] for r in results] == [200] * 9
    assert all(r[1]["outcome"] == "idle" for r in results)


def test_drain_calls_refuse_kubelets_call_only_past_the_bound_the_threat_model_states(tmp_path):
    """At --max-connections 8: each network holds 8 drain calls, all of them 32, and none of them
    counts against the connection cap. So kubelet's call is admitted (and keeps its whole deadline)
    after 7 strangers from its own address, and the probes are served whatever the drain calls hold;
    a call is refused only once its network holds 8, or 4 networks hold 8 each."""
    with EngineProcess("--kind", "vllm") as engine, \
            SidecarProcess("--port", str(engine.port), "--engine", "vllm", "--max-connections", "8",
                           "--proc-root", str(tmp_path)) as s:
        send_requests(engine, 1, duration_s=60.0)  # busy: every call waits to its own deadline
        results: list = []
        threads = [in_thread(s, "/v1/drain?grace=15", results, source=KUBELET) for _ in range(7)]
        wait_for(lambda: waiting_drain_calls(s) == 7, 15.0, "seven strangers waiting from kubelet's address")
        threads.append(in_thread(s, "/v1/drain?grace=15", results, source=KUBELET))  # kubelet's own
        kubelet_sent_at = time.monotonic()
        wait_for(lambda: waiting_drain_calls(s) == 8, 15.0, "kubelet's call admitted")
        assert s.request("GET", "/healthz", source=KUBELET)[0] == 200  # 8 drain connections, the cap: exempt
        threads += [in_thread(s, "/v1/drain?grace=15", results, source=source)
                    for source in STRANGERS for _ in range(8)]
        wait_for(lambda: waiting_drain_calls(s) == 32, 15.0, "32 drain calls waiting")
        refused: list = []
        call(s, "/v1/drain?grace=15", refused, source=KUBELET)  # its network holds 8
        call(s, "/v1/drain?grace=15", refused, source=FIFTH_NETWORK)  # all of them hold 32
        assert s.request("GET", "/healthz", source=FIFTH_NETWORK)[0] == 200
        for t in threads:
            t.join(60)
        kill_now(engine)
    assert [r[0] for r in refused] == [429, 429] and all(r[2] < 2.0 for r in refused)
    assert "network already wait" in refused[0][1]["message"] and "32 drain calls" in refused[1][1]["message"]
    assert [r[0] for r in results] == [200] * 32
    assert all(r[1]["outcome"] == "deadline" for r in results)
    # kubelet's call (the last of its address's to finish, at its own G - 5 from its own arrival) was not shortened.
    last_from_kubelet = max(r[2] for r in results if r[3] == KUBELET)
    assert last_from_kubelet >= 10.0 - EARLY_SLACK_S
    assert time.monotonic() - kubelet_sent_at >= 10.0 - EARLY_SLACK_S


def test_a_call_whose_client_goes_away_gives_its_place_back(guarded):
    sockets = []
    for _ in range(4):
        sock = socket.create_connection(("127.0.0.1", guarded.port), timeout=5, source_address=(STRANGERS[1], 0))
        sock.sendall(b"GET /v1/drain?grace=30 HTTP/1.1\r\nHost: sidecar\r\n\r\n")
        sockets.append(sock)
    before = sum(e["event"] == "drain_abandoned" for e in guarded.events())
    time.sleep(0.5)
    for sock in sockets:
        sock.close()
    wait_for(lambda: sum(e["event"] == "drain_abandoned" for e in guarded.events()) - before == 4, 5.0,
             "four abandoned drains stopped")
    status, body, _ = guarded.request("GET", "/v1/drain?grace=30", timeout_s=60, source=STRANGERS[1])
    assert status == 200 and json.loads(body)["outcome"] == "idle"


@pytest.mark.parametrize("query", ["", "?grace=abc", "?grace=0", "?grace=-5", "?grace=nan", "?grace=1e10",
                                   "?grace=14.9", "?grace=3601", "?grace=1000000"])
def test_a_bad_grace_is_a_400(guarded, query):
    """Outside what the operator admits (15 to 3600 s) a grace is refused, never a drain of days."""
    started = time.monotonic()
    status, body, _ = guarded.request("GET", f"/v1/drain{query}")
    assert status == 400 and assert_error(json.loads(body))["error"] == "bad_request"
    assert time.monotonic() - started < 2.0
    message = json.loads(body)["message"]
    assert "abc" not in message and "15 to 3600 seconds" in message


def test_the_other_v1_routes_still_need_the_token(guarded):
    assert guarded.request("GET", "/v1/work")[0] == 401


def _sglang_proc(tmp_path, engine) -> str:
    """A /proc that shows the engine alone, as a shared PID namespace shows the sidecar its engine."""
    root = tmp_path / "proc"
    root.mkdir()
    (root / str(engine.pid)).symlink_to(f"/proc/{engine.pid}")
    return str(root)


def test_an_sglang_whose_sigterm_drains_is_handed_its_drain_when_the_sidecar_can_read_its_environment(tmp_path):
    with (EngineProcess(launch=LaunchShape.SGLANG_MODULE) as engine,
          SidecarProcess("--port", str(engine.port), "--proc-root", _sglang_proc(tmp_path, engine)) as s):
        send_requests(engine, 1, duration_s=30.0)
        results: list = []
        call(s, "/v1/drain?grace=30", results)
        kill_now(engine)
    (status, answer, took_s, _), = results
    assert status == 200 and answer["outcome"] == "engine_drains" and answer["exit_code"] == 0
    assert not violations("DrainResult", answer)
    assert ROUTE_WAIT_S - EARLY_SLACK_S <= took_s < ROUTE_WAIT_S + 1.5  # the route wait, not the 30 s request


def test_an_sglang_whose_environment_the_sidecar_cannot_read_is_drained_in_full(tmp_path):
    # The sidecar sees the engine's argv but not its environment (another user's process): a proc
    # tree with the cmdline alone.
    with EngineProcess(launch=LaunchShape.SGLANG_MODULE) as engine:
        pid_dir = tmp_path / "proc" / str(engine.pid)
        pid_dir.mkdir(parents=True)
        pid_dir.joinpath("cmdline").write_bytes(Path(f"/proc/{engine.pid}/cmdline").read_bytes())
        with SidecarProcess("--port", str(engine.port), "--proc-root", str(tmp_path / "proc")) as s:
            send_requests(engine, 1, duration_s=3.0)
            results: list = []
            call(s, "/v1/drain?grace=30", results)
            log = s.log_text()
        kill_now(engine)
    (status, answer, took_s, _), = results
    assert status == 200 and answer["outcome"] == "idle", answer  # polled to idle: the request ran first
    assert took_s >= 3.0 and "environment could not be read" in log  # drain_started's exit_policy_reason
