"""The OpenAPI document says what the code does (codes, routes, outcome classes), and the served
API conforms to it (schemathesis, bounded)."""

import json
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

import sidecar as package
from hook.outcome import ReadOutcome
from sidecar import app, errors
from sidecar.constants import DEFAULT_LISTEN_PORT, SCHEMA_VERSION
from sidecar.incarnation import Evidence
from .secret_volume import k8s_secret
from .sidecar_process import SidecarProcess


SPEC_PATH = Path(package.__file__).parent / "openapi.json"
SPEC = json.loads(SPEC_PATH.read_text())
SCHEMAS = SPEC["components"]["schemas"]


def test_error_codes_match():
    codes = {v for k, v in vars(errors).items() if k.isupper() and isinstance(v, str)}
    assert set(SCHEMAS["Error"]["properties"]["error"]["enum"]) == codes


def test_routes_match():
    assert set(SPEC["paths"]) == set(app.ROUTES)
    assert all(set(ops) == {"get"} for ops in SPEC["paths"].values())
    for path, ops in SPEC["paths"].items():
        needs_token = bool(ops["get"]["security"])
        assert needs_token == (path.startswith(app.API_PREFIX) and path not in app.TOKENLESS), path


def test_enums_come_from_the_code():
    work = SCHEMAS["Work"]["properties"]
    assert work["schema"]["enum"] == [SCHEMA_VERSION]
    assert set(work["read"]["properties"]["outcome"]["enum"]) == {o.value for o in ReadOutcome}
    assert set(work["read"]["properties"]["verdict"]["enum"]) == {o.verdict for o in ReadOutcome}
    assert set(work["engine"]["properties"]["incarnation_evidence"]["enum"]) == {e.value for e in Evidence}


def test_documented_port():
    assert SPEC["servers"][0]["url"].endswith(f":{DEFAULT_LISTEN_PORT}")


# --- on a real server ---

TOKEN = "schema-test-token"

# /v1/drain waits as long as the drain runs (up to the grace it is given): tested on its own.
schema = schemathesis.openapi.from_path(str(SPEC_PATH)).exclude(path="/v1/drain")


@pytest.fixture(scope="module")
def guarded(vllm_engine, tmp_path_factory):
    path = k8s_secret(tmp_path_factory.mktemp("secret"), TOKEN, 1)
    with SidecarProcess("--port", str(vllm_engine.port), "--token-file", str(path), env={"POD_NAME": "p-0"}) as s:
        yield s


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_document(case, guarded):
    case.call_and_validate(base_url=guarded.base_url, headers={"Authorization": f"Bearer {TOKEN}"})


@schema.parametrize()
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_without_a_token_conforms_too(case, guarded):
    # No Authorization: /v1/* answers its documented 401, the probes their 200.
    case.call_and_validate(base_url=guarded.base_url)
