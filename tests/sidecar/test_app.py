"""GET /v1/work on a real socket, against the engine emulator on another real socket."""

import asyncio
import datetime
import json
import threading
import time

import aiohttp

from modeldrain.sidecar.app import WORK
from modeldrain.sidecar.work_answer import SCHEMA_VERSION


def parse_time(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_every_field_of_one_read(sidecar, vllm_engine):
    before = time.time()
    body = sidecar.work()
    assert body["schema"] == SCHEMA_VERSION
    assert len(body["sidecar"]["instance"]) == 32 and body["sidecar"]["terminating"] is False
    assert body["pod"] == {"namespace": "team-a", "name": "replica-0-abc", "uid": "uid-0"}
    assert body["member"] == {"worker_index": 0, "group_size": 2, "configuration": "rev-1",
                              "speaks_for_replica": True}
    # --engine vllm stated, no split-role flag: the command is known and not disaggregated.
    assert body["engine"]["command"] == {"source": "flag", "disaggregated": False, "evidence": []}
    engine = body["engine"]
    assert body["read"]["engine"] == "vllm" and body["read"]["role"] == "unified"
    assert engine["target"] == f"http://127.0.0.1:{vllm_engine.port}/metrics"
    assert engine["process_start_time"] == vllm_engine.stats()["start_time"]
    assert engine["incarnation"] >= 0
    read = body["read"]
    assert read["seq"] >= 1 and read["idle_run_since_seq"] <= read["seq"]
    assert read["started_monotonic_s"] > 0
    assert parse_time(read["started_at"]) >= before - 0.002  # ms resolution
    assert 0 < read["duration_ms"] < 500
    assert read["outcome"] == "idle" and read["verdict"] == "idle" and read["http_status"] == 200
    assert read["body_bytes"] > 10_000
    assert body["read"]["gauges"] == {"vllm:num_requests_running": 0.0, "vllm:num_requests_waiting": 0.0}
    assert body["read"]["missing"] == [] and body["read"]["complete"] is True
    assert body["read"]["in_flight"] == 0 and body["read"]["idle"] is True


def test_two_reads_are_two_seq_each_fresh(sidecar, vllm_engine):
    reads_before = vllm_engine.stats()["metrics_reads"]
    first = sidecar.work()
    asked_at = time.time()
    second = sidecar.work()
    assert second["read"]["seq"] == first["read"]["seq"] + 1
    gap_s = second["read"]["started_monotonic_s"] - first["read"]["started_monotonic_s"]
    assert abs(gap_s - (parse_time(second["read"]["started_at"]) - parse_time(first["read"]["started_at"]))) < 0.01
    assert parse_time(second["read"]["started_at"]) >= asked_at - 0.002
    assert vllm_engine.stats()["metrics_reads"] - reads_before == 2


def test_concurrent_callers_share_reads_and_never_get_a_stale_one(sidecar, vllm_engine):
    """64 callers at once, each noting when it asked: few engine reads, none older than its caller."""
    vllm_engine.misbehave("drip", interval_s=0.01)  # each read takes a while, so callers pile up
    try:
        reads_before = vllm_engine.stats()["metrics_reads"]

        async def storm():
            async with aiohttp.ClientSession() as session:
                async def one():
                    asked_at = time.time()
                    async with session.get(f"{sidecar.base_url}/v1/work") as response:
                        assert response.status == 200
                        return asked_at, await response.json()
                return await asyncio.gather(*(one() for _ in range(64)))

        answers = asyncio.run(storm())
        reads = vllm_engine.stats()["metrics_reads"] - reads_before
    finally:
        vllm_engine.misbehave("none")
    seqs = {body["read"]["seq"] for _, body in answers}
    assert reads == len(seqs)  # every seq is exactly one read of the engine
    assert reads <= 4, f"{reads} engine reads for 64 callers"
    for asked_at, body in answers:
        assert parse_time(body["read"]["started_at"]) >= asked_at - 0.002
    by_seq = {}
    for _, body in answers:  # same seq, same read
        by_seq.setdefault(body["read"]["seq"], []).append(json.dumps(body["read"], sort_keys=True))
    assert all(len(set(v)) == 1 for v in by_seq.values())


def test_busy_engine_reads_busy(sidecar, vllm_engine):
    request = threading.Thread(target=vllm_engine.request,
                               args=("POST", "/v1/completions", {"duration_s": 1.5}), kwargs={"timeout_s": 10})
    request.start()
    try:
        deadline_at = time.monotonic() + 5
        while True:
            body = sidecar.work()
            if body["read"]["in_flight"] or time.monotonic() > deadline_at:
                break
            time.sleep(0.05)
        assert body["read"]["outcome"] == "busy" and body["read"]["verdict"] == "busy"
        assert body["read"]["in_flight"] >= 1 and body["read"]["idle"] is False and body["read"]["complete"] is True
    finally:
        request.join()


def test_readyz_healthz_and_own_metrics(sidecar):
    sidecar.work()
    assert sidecar.get_json("/healthz") == (200, {"status": "ok"})
    assert sidecar.get_json("/readyz") == (200, {"status": "ready", "terminating": False})
    status, body, headers = sidecar.request("GET", "/metrics")
    text = body.decode()
    assert status == 200 and headers["content-type"].startswith("text/plain")
    for needle in ('modeldrain_sidecar_engine_reads_total{outcome="idle"}',
                   "modeldrain_sidecar_engine_read_duration_seconds_bucket",
                   "modeldrain_sidecar_engine_in_flight 0.0",
                   'modeldrain_sidecar_requests_total{code="200",route="/v1/work"}',
                   "process_resident_memory_bytes"):
        assert needle in text, needle


def test_errors_are_json_with_stable_codes(sidecar):
    for method, path, status, code in (("GET", "/nope", 404, "not_found"),
                                       ("GET", "/%3Cscript%3Ealert(1)%3C/script%3E", 404, "not_found"),
                                       ("GET", f"{WORK}/../x", 404, "not_found"),
                                       ("POST", "/v1/work", 405, "method_not_allowed"),
                                       ("DELETE", "/healthz", 405, "method_not_allowed"),
                                       ("HEAD", "/v1/work", 405, "method_not_allowed")):
        got, body, headers = sidecar.request(method, path)
        assert got == status, (method, path)
        if method != "HEAD":
            answer = json.loads(body)
            assert answer["error"] == code
            assert headers["content-type"].startswith("application/json")
            assert path.strip("/").split("/")[-1] not in answer["message"]  # never echoed back
        if status == 405:
            assert headers["allow"] == "GET"
    _, body, _ = sidecar.request("GET", "/metrics")
    assert 'modeldrain_sidecar_requests_total{code="404",route="other"}' in body.decode()


def test_nothing_in_the_request_changes_what_is_fetched(sidecar, vllm_engine):
    body = sidecar.work()
    for path in ("/v1/work?target=http://169.254.169.254/&port=1&path=/x",
                 "/v1/work?url=http%3A%2F%2Fexample.com%2F"):
        status, raw, _ = sidecar.request("GET", path, headers={"Host": "evil.example", "X-Forwarded-Host": "x"})
        assert status == 200
        assert json.loads(raw)["engine"]["target"] == body["engine"]["target"]
        assert json.loads(raw)["read"]["outcome"] == "idle"


def test_openapi_document_is_served_and_matches_the_repo(sidecar):
    from pathlib import Path

    from modeldrain import sidecar as package

    status, raw, headers = sidecar.request("GET", "/v1/openapi.json")
    assert status == 200 and headers["content-type"].startswith("application/json")
    assert raw == (Path(package.__file__).parent / "openapi.json").read_bytes()
    assert json.loads(raw)["openapi"].startswith("3.")


def test_a_storm_costs_the_engine_at_most_ten_reads_a_second(sidecar, vllm_engine):
    from modeldrain.sidecar.constants import MIN_READ_INTERVAL_S

    async def storm(seconds):
        stop_at = time.monotonic() + seconds
        answers = 0
        async with aiohttp.ClientSession() as session:
            async def client():
                nonlocal answers
                while time.monotonic() < stop_at:
                    async with session.get(f"{sidecar.base_url}/v1/work") as response:
                        assert response.status == 200
                        await response.read()
                        answers += 1
            await asyncio.gather(*(client() for _ in range(32)))
        return answers

    reads_before = vllm_engine.stats()["metrics_reads"]
    started = time.monotonic()
    answers = asyncio.run(storm(1.0))
    elapsed_s = time.monotonic() - started
    reads = vllm_engine.stats()["metrics_reads"] - reads_before
    assert reads <= elapsed_s / MIN_READ_INTERVAL_S + 1
    assert answers >= 10 * reads  # many answers per read
