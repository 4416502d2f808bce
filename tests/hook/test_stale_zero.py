"""A stale zero against a real emulated SGLang (real process, sockets and clock): a long forward
pass holds the scheduler's gauges at 0 while requests are out. The two-reads rule alone reads it
idle twice, 1 s apart; the one reader (modeldrain/hook/reader.py, modeldrain/hook/freshness.py) reads it `stale`."""

import threading
import time

import pytest

from emulation.engine_process import EngineProcess
from modeldrain.hook.engine import EngineHint
from modeldrain.hook.gauges import EngineKind
from modeldrain.hook.outcome import ReadOutcome
from modeldrain.hook.reader import EngineReader, read_work
from modeldrain.hook.settings import ReadConfig
from modeldrain.hook.target import Target

# Long enough that two reads 1 s apart fit inside one pass on a loaded machine; the requests
# outlast it, so the pass's end publishes them.
PASS_S = 6.0
REQUEST_S = PASS_S + 2.0
REQUESTS = 4
HINT = EngineHint(kind=EngineKind.SGLANG)


@pytest.mark.slow
def test_a_zero_held_by_a_long_forward_pass_is_idle_to_the_old_rule_and_stale_to_the_reader():
    # An SGLang release without the HTTP gauge: the scheduler's gauges and heartbeat alone (with
    # the gauge, its count of the requests makes these reads busy: tests/hook/test_http_requests_active.py).
    with EngineProcess("--kind", "sglang", "--max-running", "8", "--without-http-gauge") as engine:
        target = Target("http", engine.port, "/metrics", source="flag")
        reader = EngineReader(ReadConfig(target=target, hint=HINT, read_timeout_s=2.0, max_body_bytes=1 << 22))
        assert reader.read(2.0).outcome in (ReadOutcome.STALE, ReadOutcome.IDLE)  # the reader's baseline
        engine.misbehave("stale", interval_s=PASS_S)
        pass_began = time.monotonic()
        # The pass begins at the first scrape after the setting: it publishes what is there, nothing.
        assert read_work(target, HINT, timeout_s=2.0, max_body_bytes=1 << 22).in_flight == 0
        senders = [threading.Thread(target=engine.request, args=("POST", "/v1/completions", {"duration_s": REQUEST_S}),
                                    kwargs={"timeout_s": 60.0}, daemon=True) for _ in range(REQUESTS)]
        for sender in senders:
            sender.start()
        while engine.stats()["in_flight"] < REQUESTS:
            time.sleep(0.05)
        old_first = read_work(target, HINT, timeout_s=2.0, max_body_bytes=1 << 22)
        new_first = reader.read(2.0)
        time.sleep(1.05)
        old_second = read_work(target, HINT, timeout_s=2.0, max_body_bytes=1 << 22)
        new_second = reader.read(2.0)
        inside_pass = time.monotonic() - pass_began < PASS_S
        assert engine.stats()["in_flight"] == REQUESTS
        assert inside_pass, "the machine was too slow to read twice inside one pass: the precondition failed"
        # The old rule: two complete idle reads >= 1 s apart, with every request still out.
        assert old_first.outcome is ReadOutcome.IDLE and old_second.outcome is ReadOutcome.IDLE
        assert old_second.started_at - old_first.started_at >= 1.0
        # The reader: the heartbeat has not moved, so neither zero is trusted.
        assert new_first.outcome is ReadOutcome.STALE and new_second.outcome is ReadOutcome.STALE
        assert "has not advanced" in new_second.detail
        # The pass ends: gauges and heartbeat published together, and the work shows.
        time.sleep(max(0.0, pass_began + PASS_S + 0.2 - time.monotonic()))
        after = reader.read(2.0)
        assert after.outcome is ReadOutcome.BUSY and after.in_flight == REQUESTS
        engine.misbehave("none")
        for sender in senders:  # every request answered before the engine stops
            sender.join(30.0)
        assert engine.stats()["completed"] == REQUESTS
