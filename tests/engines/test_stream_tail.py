"""A real vLLM deleted while a stream's tail is still going out to a slow reader: the engine core is
done and its gauges (and /load) read zero, the API server still writes. prestop reads idle twice
and returns inside the tail; vLLM's SIGTERM then lets the tail go out (the API server stays until
its client has read it: measured by bench/engines/stream_tail.py, docs/engines.md). This holds
the hook to not waiting on it: an engine whose SIGTERM cut the tail would fail here."""

from __future__ import annotations

import json
import threading
import time

import pytest

from bench.engines.lifecycle import ClientRequest, completion, gauges_of, scrape
from bench.engines.stream_tail import CHUNKED_END, GAUGES, TOKENS, post_recording
from emulation.kubelet import delete_pod
from engines.servers import proc_root_of
from tests.e2e.prestop_run import PRESTOP

pytestmark = pytest.mark.engines

GRACE_S = 30
# bench/engines/stream_tail.py's stream (its client, 4 KB receive buffer), read slower: ~145 KB at
# 1 KB per 80 ms is ~12 s of reading, while the engine generates its 600 tokens in ~3 s: a tail of
# ~9 s that covers the route wait (5 s) and two idle reads 1 s apart, so a hook that trusted the
# gauges would return inside it.
READ_DELAY_S = 0.08
# The request must be counted by the gauges before the delete (the engine has it).
COUNTED_WAIT_S = 60.0
POLL_S = 0.05


def slow_stream(port: int) -> tuple[ClientRequest, bytearray, threading.Thread]:
    record, received = ClientRequest(), bytearray()
    thread = threading.Thread(target=post_recording, daemon=True,
                              args=(port, "/v1/completions", completion(TOKENS, stream=True), record, received,
                                    READ_DELAY_S))
    thread.start()
    return record, received, thread


def running(port: int) -> float:
    body = scrape(port, "/metrics")
    return sum(gauges_of(body, GAUGES).values()) if body is not None else 0.0


def test_a_real_vllm_deleted_during_a_slow_readers_tail_sends_the_whole_stream(vllm):
    stream, received, reader = slow_stream(vllm.port)
    deadline = time.monotonic() + COUNTED_WAIT_S
    while running(vllm.port) == 0:
        assert time.monotonic() < deadline and reader.is_alive(), f"never counted: {stream.error}"
        time.sleep(POLL_S)
    hook = [PRESTOP, "--grace", str(GRACE_S), "--port", str(vllm.port), "--proc-root", proc_root_of(vllm), "--quiet"]
    report = delete_pod(vllm.process, hook, GRACE_S)
    reader.join(GRACE_S)
    events = [json.loads(line) for line in report.hook_stderr.splitlines() if line.startswith("{")]
    said = f"hook exit {report.hook_exit_code}; stream error {stream.error!r}; hook:\n{report.hook_stderr[-3000:]}"
    assert report.hook_exit_code == 0 and events[-1]["outcome"] == "idle", said
    assert stream.done_at is not None
    tail_end = stream.done_at - report.t0
    # The precondition: SIGTERM came while the tail was still going out.
    assert report.sigterm_at < tail_end, f"the stream ended before SIGTERM: no tail was tested; {said}"
    # vLLM's SIGTERM let it go out, whole: the last event, then the chunked body's end.
    assert b"data: [DONE]" in received and bytes(received).endswith(CHUNKED_END), said
    assert report.sigkill_at is None, said
