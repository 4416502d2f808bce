"""A real SGLang decode server deleted under load with the real prestop, its requests passing
prefill -> KV transfer over mooncake TCP -> decode through sglang-router (engines/pd.py).

Needs the prefill/decode add-on (`make engines-pd`, which `make test-engines` runs); without it
the test skips with the reason, and under CI=true that skip is a failure (tests/environment.py).
"""

from __future__ import annotations

import json
import time

import pytest

from emulation.kubelet import delete_pod
from emulation.load import LoadGenerator, UniformDurations
from engines import tier as tier_module
from engines.pd import PdPair
from engines.servers import completion_body, proc_root_of
from tests.e2e.prestop_run import PRESTOP
from tests.environment import unavailable

pytestmark = pytest.mark.engines

GRACE_S = 30
# The router drops the replica 3 s after the delete: within the route wait, as a lagging one would.
ROUTE_LAG_S = 3.0
# Requests of a few seconds, eight at a time: the decode server holds requests at the delete and
# still gets new ones (prefilled on the other server, their KV sent to it) until the route drop.
DURATIONS = UniformDurations(4.0, 6.0)
CONCURRENCY = 8
WARM_LOAD_S = 3.0
ROUTE_WAIT_S = 5.0
# The hook's own start-up and its /health read beside the route wait, with slack for a loaded machine.
FOLLOW_RETURN_SLACK_S = 1.5


@pytest.fixture
def pd_pair():
    addon = tier_module.pd_installed()
    if isinstance(addon, str):
        unavailable(addon)
    with PdPair(addon) as pair:
        yield pair


def test_a_real_decode_server_deleted_under_load_is_handed_its_drain_and_loses_nothing(pd_pair):
    decode = pd_pair.decode
    load = LoadGenerator(pd_pair.router.base_url, concurrency=CONCURRENCY, durations=DURATIONS, seed=11,
                         request_body=completion_body("sglang")).start()
    time.sleep(WARM_LOAD_S)
    hook = [PRESTOP, "--grace", str(GRACE_S), "--port", str(decode.port), "--proc-root", proc_root_of(decode),
            "--quiet"]
    report = delete_pod(decode.process, hook, GRACE_S, load=load, route_drop_after_s=ROUTE_LAG_S)
    said = f"{report.load.summary()}; hook exit {report.hook_exit_code}, stderr:\n{report.hook_stderr[-3000:]}"

    assert report.hook_exit_code == 0 and not report.hook_abandoned, said
    assert report.load.in_flight == 0 and report.completed == report.load.sent >= CONCURRENCY, said
    assert report.cut == 0 and report.rejected == 0 and report.refused == 0 and report.load.other == 0, said
    assert report.sigkill_at is None and report.engine_exit_code == 0, said
    events = [json.loads(line) for line in report.hook_stderr.splitlines() if line.startswith("{")]
    started = next(e for e in events if e["event"] == "drain_started")
    assert started["exit_policy"] == "follow_engine_drain", started
    assert ROUTE_WAIT_S <= report.sigterm_at <= ROUTE_WAIT_S + FOLLOW_RETURN_SLACK_S, said
