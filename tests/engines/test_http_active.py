"""A real SGLang's burst, read from right after it was sent: busy through the tokenizer manager's
window, where the scheduler's gauges read 0 (0.59 s with 32 out, docs/engines.md), because the
reader counts `sglang:http_requests_active` (modeldrain/hook/gauges.py) on every route but the few that hold
no work; the scrape's own `/metrics` series among them, so the server reads idle again after."""

from __future__ import annotations

import time
import urllib.request

import pytest

from emulation.load import LoadGenerator, UniformDurations
from engines.servers import completion_body
from modeldrain.hook.engine import EngineHint
from modeldrain.hook.gauges import SGLANG_HTTP_ACTIVE_GAUGE, EngineKind, Role
from modeldrain.hook.outcome import Read, ReadOutcome
from modeldrain.hook.reader import classify_body

pytestmark = pytest.mark.engines

BURST = 32
# Each request a few seconds of decode: the burst is still out when the window has passed.
DURATIONS = UniformDurations(4.0, 4.0)
SAMPLE_EVERY_S = 0.05
# Sampled this long from the send: the tokenizer manager's window and its first stats ticks.
WINDOW_S = 3.0
# How long the HTTP gauge may take to count every request of the burst on a loaded machine
# (measured: all 8 of a burst within 0.29 s at load 9-11).
COUNTED_WITHIN_S = WINDOW_S
SCHEDULER_GAUGES = ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:num_grammar_queue_reqs")


def read(metrics_url: str) -> Read:
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        body = response.read()
    hint = EngineHint(kind=EngineKind.SGLANG, role=Role.UNIFIED, source="flag")
    base = Read(ReadOutcome.INCOMPLETE, 0.0, 0.0, kind=EngineKind.SGLANG, role=Role.UNIFIED)
    return classify_body(base, body, "text/plain", hint, deadline_at=time.monotonic() + 10)


def test_a_burst_reads_busy_through_the_tokenizer_window(sglang):
    url = sglang.base_url + "/metrics"
    before = read(url)
    assert before.outcome is ReadOutcome.IDLE and before.gauges[SGLANG_HTTP_ACTIVE_GAUGE] == 0, before
    load = LoadGenerator(sglang.base_url, concurrency=BURST, durations=DURATIONS, seed=1, max_requests=BURST,
                         request_body=completion_body(sglang.kind)).start()
    sent_at = time.monotonic()
    samples: list[tuple[float, Read, int]] = []
    while (at := time.monotonic() - sent_at) < WINDOW_S:
        samples.append((at, read(url), load.tally().in_flight))
        time.sleep(SAMPLE_EVERY_S)
    tally = load.wait(timeout_s=300)
    assert tally.completed == BURST, tally.summary()
    counted = [at for at, r, _ in samples if r.gauges.get(SGLANG_HTTP_ACTIVE_GAUGE) == BURST]
    assert counted and counted[0] <= COUNTED_WITHIN_S, [(round(at, 2), r.gauges) for at, r, _ in samples]
    first = next(at for at, r, _ in samples if r.gauges.get(SGLANG_HTTP_ACTIVE_GAUGE, 0) > 0)
    # From the first request the server's handlers hold, every read with the burst out is busy,
    # those where the scheduler's gauges all read 0 included (the window the HTTP gauge closes).
    out = [(at, r) for at, r, in_flight in samples if at >= first and in_flight == BURST]
    assert out and all(r.outcome is ReadOutcome.BUSY for _, r in out), \
        [(round(at, 2), r.outcome.value, r.gauges) for at, r in out if r.outcome is not ReadOutcome.BUSY]
    window = [at for at, r in out if sum(r.gauges.get(g, 0.0) for g in SCHEDULER_GAUGES) == 0]
    print(f"http gauge: first non-zero {first:.2f} s after the send, all {BURST} at {counted[0]:.2f} s; "
          f"{len(window)} of {len(out)} busy reads had every scheduler gauge at 0"
          + (f" (the last {window[-1]:.2f} s after the send)" if window else ""))
    deadline_at = time.monotonic() + 10
    while (after := read(url)).outcome is not ReadOutcome.IDLE and time.monotonic() < deadline_at:
        time.sleep(0.2)
    assert after.outcome is ReadOutcome.IDLE and after.gauges[SGLANG_HTTP_ACTIVE_GAUGE] == 0, after
