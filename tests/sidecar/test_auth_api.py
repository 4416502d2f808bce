"""Bearer tokens on /v1/*, on a real server: on, off, and rotated the way kubelet rotates a Secret."""

import json

import pytest

from .secret_volume import k8s_secret
from .sidecar_process import SidecarProcess

V1 = ("/v1/work", "/v1/openapi.json", "/v1/anything")
OPEN = ("/healthz", "/readyz", "/metrics")


@pytest.fixture(scope="module")
def secret_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("secret")


@pytest.fixture(scope="module")
def guarded(vllm_engine, secret_dir):
    path = k8s_secret(secret_dir, "first-token", 1)
    with SidecarProcess("--port", str(vllm_engine.port), "--token-file", str(path)) as s:
        yield s


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("headers", [{}, bearer("wrong"), {"Authorization": "Basic Zmlyc3QtdG9rZW4="},
                                     bearer("first-token-and-more")])
def test_v1_needs_the_token(guarded, headers):
    for path in V1:
        status, body, got = guarded.request("GET", path, headers)
        assert status == 401, path
        assert json.loads(body)["error"] == "unauthorized"
        assert got["www-authenticate"].startswith("Bearer")


def test_the_token_opens_v1_and_probes_stay_open(guarded):
    assert guarded.work(bearer("first-token"))["read"]["outcome"] == "idle"
    assert guarded.request("GET", "/v1/openapi.json", bearer("first-token"))[0] == 200
    assert guarded.request("GET", "/v1/anything", bearer("first-token"))[0] == 404
    for path in OPEN:
        assert guarded.request("GET", path)[0] == 200, path


def test_rotation_takes_effect_on_the_next_request(guarded, secret_dir):
    assert guarded.request("GET", "/v1/work", bearer("first-token"))[0] == 200
    k8s_secret(secret_dir, "second-token", 2)
    assert guarded.request("GET", "/v1/work", bearer("first-token"))[0] == 401
    assert guarded.request("GET", "/v1/work", bearer("second-token"))[0] == 200
    assert any(e["event"] == "token_file_changed" for e in guarded.events())


def test_without_a_token_file_v1_is_open_and_the_log_says_so(sidecar):
    assert sidecar.request("GET", "/v1/work")[0] == 200
    assert sidecar.request("GET", "/v1/work", bearer("anything"))[0] == 200
    warnings = [e for e in sidecar.events() if e["event"] == "api_open"]
    assert warnings and warnings[0]["level"] == "warning" and "/v1/*" in warnings[0]["message"]
