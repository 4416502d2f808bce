"""The OpenAPI document says what the code does (codes, routes, outcome classes), is valid OpenAPI 3.0
for a strict validator, and real answers of every outcome class conform to it strictly; the served API
also passes schemathesis (bounded)."""

import json
import threading
import time

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from openapi_spec_validator import validate as validate_document
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from emulation.engine_process import EngineProcess
from emulation.raw_server import RawServer, canned
from modeldrain.hook.outcome import ReadOutcome
from modeldrain.sidecar import app, errors
from modeldrain.sidecar.command import CommandSource
from modeldrain.sidecar.config import DEFAULT_LISTEN_PORT
from modeldrain.sidecar.sampler import Evidence
from modeldrain.sidecar.work_answer import SCHEMA_VERSION

from .contract import SCHEMAS, SPEC, SPEC_PATH, assert_error, assert_work, violations
from .secret_volume import k8s_secret
from .sidecar_process import SidecarProcess, kill_now


def test_error_codes_match():
    codes = {v for k, v in vars(errors).items() if k.isupper() and isinstance(v, str)}
    assert set(SCHEMAS["Error"]["properties"]["error"]["enum"]) == codes


def test_routes_match():
    assert set(SPEC["paths"]) == set(app.ROUTES)
    assert all(set(ops) == ({"post"} if path == app.HOOK_EVENTS else {"get"}) for path, ops in SPEC["paths"].items())
    for path, ops in SPEC["paths"].items():
        needs_token = bool(next(iter(ops.values()))["security"])
        assert needs_token == (path.startswith(app.API_PREFIX) and path not in app.TOKENLESS), path


def test_enums_come_from_the_code():
    work = SCHEMAS["Work"]["properties"]
    assert work["schema"]["enum"] == [SCHEMA_VERSION]
    assert set(work["read"]["properties"]["outcome"]["enum"]) == {o.value for o in ReadOutcome}
    assert set(work["read"]["properties"]["verdict"]["enum"]) == {o.verdict for o in ReadOutcome}
    assert set(work["engine"]["properties"]["incarnation_evidence"]["enum"]) == {e.value for e in Evidence} | {None}
    command = work["engine"]["properties"]["command"]["properties"]
    assert set(command["source"]["enum"]) == {s.value for s in CommandSource}


def test_the_document_is_valid_openapi_3():
    validate_document(SPEC)  # raises on any violation of the OpenAPI 3.0 schema


def _nullable_enums(node, path=""):
    if isinstance(node, dict):
        if node.get("nullable") and "enum" in node:
            yield path, node["enum"]
        for key, value in node.items():
            yield from _nullable_enums(value, f"{path}/{key}")


def test_every_nullable_enum_lists_null():
    # OpenAPI 3.0: `nullable` does not widen `enum`, so a strict validator refuses null unless listed.
    found = list(_nullable_enums(SPEC))
    assert len(found) >= 3
    assert all(None in values for _, values in found), found


def test_the_strict_validator_refuses_what_the_contract_refuses():
    body = {"schema": SCHEMA_VERSION}
    assert any("'sidecar' is a required property" in v for v in violations("Work", body))
    assert violations("Error", {"error": "nope", "message": "x"})


def test_documented_port():
    assert SPEC["servers"][0]["url"].endswith(f":{DEFAULT_LISTEN_PORT}")


# --- real answers, strictly ---

def _work(sidecar_process):
    return assert_work(sidecar_process.work())


def _until(sidecar_process, predicate, timeout_s=8.0):
    deadline_at = time.monotonic() + timeout_s
    while True:
        body = _work(sidecar_process)
        if predicate(body) or time.monotonic() > deadline_at:
            return body
        time.sleep(0.05)


@pytest.mark.parametrize("mode, params, outcome", [
    ("none", {}, "idle"),
    ("missing", {}, "incomplete"),
    ("hang", {}, "timeout"),
    ("nan", {}, "invalid_value"),
    ("huge", {"size_mb": 2}, "too_large"),
    ("http500", {}, "http_error"),
])
def test_every_outcome_answers_within_the_contract(sidecar, vllm_engine, mode, params, outcome):
    vllm_engine.misbehave(mode, **params)
    try:
        body = _until(sidecar, lambda b: b["read"]["outcome"] == outcome)
    finally:
        vllm_engine.misbehave("none")
    assert body["read"]["outcome"] == outcome, body["read"]
    assert (body["read"]["idle_run_since_seq"] is None) == (outcome != "idle")


def test_a_busy_read_answers_within_the_contract(sidecar, vllm_engine):
    request = threading.Thread(target=vllm_engine.request, args=("POST", "/v1/completions", {"duration_s": 1.0}),
                               kwargs={"timeout_s": 10})
    request.start()
    try:
        body = _until(sidecar, lambda b: b["read"]["outcome"] == "busy")
    finally:
        request.join()
    assert body["read"]["outcome"] == "busy" and body["read"]["in_flight"] >= 1


def test_refused_then_a_new_incarnation_answer_within_the_contract(sidecar, vllm_engine):
    # The sidecar must have seen the first process answer: a restart before its first read is no
    # restart it could see (the test raced the sidecar's first read and lost, alone, every time).
    _until(sidecar, lambda b: b["read"]["outcome"] == "idle")
    vllm_engine.misbehave("restart", down_s=0.6)
    refused = _until(sidecar, lambda b: b["read"]["outcome"] == "refused")
    assert refused["read"]["verdict"] == "unmeasurable" and refused["read"]["http_status"] is None
    back = _until(sidecar, lambda b: b["read"]["outcome"] == "idle")
    assert back["engine"]["incarnation_evidence"] in ("start_time_changed", "listener_returned")
    assert back["engine"]["incarnation_changed_at_seq"] == back["read"]["idle_run_since_seq"]


def test_reset_unparseable_tls_error_and_an_unknown_engine_answer_within_the_contract(vllm_engine, tmp_path):
    with RawServer(canned(b"")) as listener, SidecarProcess("--port", str(listener.port), "--read-timeout", "0.5",
                                                      "--proc-root", str(tmp_path)) as s:
        body = _work(s)
        assert body["read"]["outcome"] == "reset" and body["read"]["engine"] is None and body["read"]["role"] is None
        assert body["engine"]["command"]["source"] == "none" and body["engine"]["command"]["disaggregated"] is None
        assert body["pod"] == {"namespace": None, "name": None, "uid": None}
    with RawServer(canned(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")) as listener, \
            SidecarProcess("--port", str(listener.port), "--engine", "sglang") as s:
        assert _work(s)["read"]["outcome"] == "unparseable"
    with SidecarProcess("--port", str(vllm_engine.port), "--scheme", "https", "--engine", "vllm",
                        "--read-timeout", "0.5") as s:
        assert _work(s)["read"]["outcome"] == "tls_error"


def test_an_sglang_prefill_member_answers_within_the_contract(tmp_path):
    with EngineProcess("--kind", "sglang", "--role", "prefill") as engine, \
            SidecarProcess("--port", str(engine.port), "--engine", "sglang", "--disaggregation-mode", "prefill",
                           "--proc-root", str(tmp_path)) as s:
        body = _work(s)
        kill_now(engine)
    assert body["read"]["role"] == "prefill" and body["read"]["outcome"] == "idle"
    assert body["engine"]["command"] == {"source": "flag", "disaggregated": True,
                                         "evidence": ["flag: --disaggregation-mode=prefill"]}


def test_error_answers_are_within_the_contract(sidecar):
    for method, path, status in (("GET", "/nope", 404), ("POST", "/v1/work", 405)):
        got, raw, _ = sidecar.request(method, path)
        assert got == status
        assert_error(json.loads(raw))


# --- on a real server ---

TOKEN = "schema-test-token"

# /v1/drain waits as long as the drain runs (up to the grace it is given): tested on its own.
schema = schemathesis.openapi.from_path(str(SPEC_PATH)).exclude(path="/v1/drain")


@pytest.fixture(scope="module")
def guarded(vllm_engine, tmp_path_factory):
    path = k8s_secret(tmp_path_factory.mktemp("secret"), TOKEN, 1)
    with SidecarProcess("--port", str(vllm_engine.port), "--token-file", str(path),
                        env={"POD_NAMESPACE": "ns", "POD_NAME": "p-0", "POD_UID": "u"}) as s:
        yield s


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_document(case, guarded):
    response = case.call_and_validate(base_url=guarded.base_url, headers={"Authorization": f"Bearer {TOKEN}"},
                                      excluded_checks=_oversized(case))
    if case.path == "/v1/work" and response.status_code == 200:
        assert_work(response.json())


@schema.parametrize()
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_without_a_token_conforms_too(case, guarded):
    # No Authorization: /v1/* answers its documented 401, the probes their 200.
    case.call_and_validate(base_url=guarded.base_url, excluded_checks=_oversized(case))


def _oversized(case) -> list:
    """A hook event over the sidecar's 1 KiB body cap is refused (its documented 413), valid or not: the
    schema admits fields it does not know (a newer hook's), so no schema can bound the body's size."""
    if case.path == app.HOOK_EVENTS and isinstance(case.body, dict) \
            and len(json.dumps(case.body).encode()) > app.MAX_REQUEST_BODY_BYTES:
        return [positive_data_acceptance, negative_data_rejection]  # 413 is neither's expected answer
    return []


def test_the_metrics_route_names_every_metric_the_sidecar_exports():
    from modeldrain.hook.events import EventLog
    from modeldrain.sidecar.drain_ledger import DrainLedger
    from modeldrain.sidecar.metrics import SidecarMetrics

    metrics = SidecarMetrics()
    metrics.watch_log(EventLog("drain-sidecar", started_at=0.0))
    DrainLedger(metrics, EventLog("drain-sidecar", started_at=0.0))
    described = SPEC["paths"][app.METRICS]["get"]["description"]
    exported = [family.name + ("_total" if family.type == "counter" else "") for family in metrics.registry.collect()]
    assert "modeldrain_sidecar_requests_total" in exported
    assert [name for name in exported if not name.startswith("process_") and name not in described] == []
