"""A real vLLM KV producer deleted under load with the real prestop: vLLM 0.32's prefill server and
decode server over its MooncakeConnector (mooncake's TCP transport), paired by the router of
engines/kv_proxy.py (engines/vllm_pd.py). Each completion is prefilled on the producer, which parks
the request's KV blocks when it finishes, and decoded on the consumer, which pulls them.

The producer's finished requests leave both work gauges while their blocks may still wait for the
decoder, and no vLLM gauge counts them (modeldrain/hook/kv_producer.py): the hook holds the zero
for vLLM's own send lease, so a producer deleted under load drains to the deadline (exit 10), and
every pull the decoder made succeeded (it computed no prompt token itself).

Needs the prefill/decode add-on with its vLLM part (`make engines-pd`, which `make test-engines`
runs); without it the test skips with the reason, and under CI=true that skip is a failure.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from emulation.kubelet import delete_pod
from emulation.load import LoadGenerator, UniformDurations
from engines import tier as tier_module
from engines.servers import completion_body
from engines.vllm_pd import VllmPdPair
from modeldrain.hook.constants import EXIT_RESERVE_S
from tests.engines.test_deletions import CONCURRENCY, GRACE_S, ROUTE_LAG_S, WARM_LOAD_S, hook_argv, hook_events
from tests.environment import unavailable

pytestmark = pytest.mark.engines

# Requests of a few seconds, eight at a time (CONCURRENCY): the producer has prefilled and parked
# some of them at the delete and gets new ones until the route drop.
DURATIONS = UniformDurations(4.0, 6.0)
# The hook returns at its deadline, G less the exit reserve; slack for a loaded machine's process start.
DEADLINE_SLACK_S = 2.0


@pytest.fixture
def vllm_pd_pair():
    addon = tier_module.vllm_pd_installed()
    if isinstance(addon, str):
        unavailable(addon)
    with VllmPdPair(addon) as pair:
        yield pair


def test_a_real_vllm_kv_producer_deleted_under_load_is_held_and_every_pull_succeeds(vllm_pd_pair):
    pair = vllm_pd_pair
    producer = pair.prefill
    load = LoadGenerator(pair.proxy.base_url, concurrency=CONCURRENCY, durations=DURATIONS, seed=11,
                         request_body=completion_body("vllm")).start()
    time.sleep(WARM_LOAD_S)
    report = delete_pod(producer.process, hook_argv(producer), GRACE_S, load=load, route_drop_after_s=ROUTE_LAG_S)
    kv = pair.decode_kv_tokens()
    events = hook_events(report)
    last_done = report.relative(report.load.last_finished_at)
    # The figures docs/engines.md quotes (pytest -s shows them).
    print(json.dumps({"load": report.load.summary(), "last_request_done_s": last_done,
                      "hook_exit_code": report.hook_exit_code, "hook_return_s": round(report.sigterm_at, 3),
                      "producer_exit_code": report.engine_exit_code,
                      "producer_exit_s": round(report.engine_exited_at, 3), "decoder_prompt_tokens": kv,
                      "prefill_requests": pair.proxy.prefill_requests(), "load_average": os.getloadavg()}))
    said = (f"{report.load.summary()}; prefill failures {pair.proxy.prefill_failures()}; decoder's prompt tokens "
            f"{kv}; hook exit {report.hook_exit_code} at {report.sigterm_at:.2f} s, stderr:\n{report.hook_stderr[-3000:]}")

    # Every request through the pair completed: prefilled, its KV pulled, decoded.
    assert report.load.in_flight == 0 and report.completed == report.load.sent >= CONCURRENCY, said
    assert report.cut == 0 and report.rejected == 0 and report.refused == 0 and report.load.other == 0, said
    assert pair.proxy.prefill_failures() == [] and pair.proxy.prefill_requests() == report.load.sent, said
    # The decoder computed no prompt token itself: every pull succeeded (a failed one fails the request
    # under vLLM's default kv_load_failure_policy, or is recomputed where it says so).
    assert kv["pulled"] and kv["pulled"] > 0 and kv["computed"] == 0, said
    # The producer is held for vLLM's send lease: to the deadline, saying why.
    started = next(e for e in events if e["event"] == "drain_started")
    assert any("KV producer (kv_role=kv_producer, MooncakeConnector)" in rule
               for rule in started["release_rules"]), started
    held = [e for e in events if e["event"] == "read_state" and e["outcome"] == "incomplete" and e["in_flight"] == 0]
    assert held and "no gauge counts them" in held[-1]["detail"], said
    assert report.hook_exit_code == 10 and not report.hook_abandoned, said
    deadline_s = GRACE_S - EXIT_RESERVE_S
    assert deadline_s <= report.sigterm_at <= deadline_s + DEADLINE_SLACK_S, said
    assert report.sigkill_at is None, said
