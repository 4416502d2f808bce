"""The served API against its OpenAPI document (sidecar/openapi.json), by schemathesis, bounded."""

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

import sidecar as package
from .secret_volume import k8s_secret
from .sidecar_process import SidecarProcess

SPEC = Path(package.__file__).parent / "openapi.json"
TOKEN = "schema-test-token"

schema = schemathesis.openapi.from_path(str(SPEC))


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
