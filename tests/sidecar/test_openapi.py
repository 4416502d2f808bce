"""The OpenAPI document in the repo says what the code does: codes, routes, outcome classes."""

import json
from pathlib import Path

import sidecar as package
from hook.outcome import ReadOutcome
from sidecar import app, errors
from sidecar.constants import DEFAULT_LISTEN_PORT, SCHEMA_VERSION
from sidecar.incarnation import Evidence

SPEC = json.loads((Path(package.__file__).parent / "openapi.json").read_text())
SCHEMAS = SPEC["components"]["schemas"]


def test_error_codes_match():
    codes = {v for k, v in vars(errors).items() if k.isupper() and isinstance(v, str)}
    assert set(SCHEMAS["Error"]["properties"]["error"]["enum"]) == codes


def test_routes_match():
    assert set(SPEC["paths"]) == set(app.ROUTES)
    assert all(set(ops) == {"get"} for ops in SPEC["paths"].values())
    for path, ops in SPEC["paths"].items():
        needs_token = bool(ops["get"]["security"])
        assert needs_token == path.startswith(app.API_PREFIX), path


def test_enums_come_from_the_code():
    work = SCHEMAS["Work"]["properties"]
    assert work["schema"]["enum"] == [SCHEMA_VERSION]
    assert set(work["read"]["properties"]["outcome"]["enum"]) == {o.value for o in ReadOutcome}
    assert set(work["read"]["properties"]["verdict"]["enum"]) == {o.verdict for o in ReadOutcome}
    assert set(work["engine"]["properties"]["incarnation_evidence"]["enum"]) == {e.value for e in Evidence}


def test_documented_port():
    assert SPEC["servers"][0]["url"].endswith(f":{DEFAULT_LISTEN_PORT}")
