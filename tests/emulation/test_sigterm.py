"""SIGTERM as each engine takes it: vLLM aborts (or drains with --shutdown-timeout), SGLang drains."""

from __future__ import annotations

import http.client
import json
import signal
import threading
import time

import pytest

from emulation.engine_process import EngineProcess


class Pending:
    """A completion sent on its own connection, answered (or not) in the background."""

    def __init__(self, engine: EngineProcess, duration_s: float, stream: bool = False):
        self.status: int | None = None
        self.body: bytes = b""
        self.error: BaseException | None = None
        self._connection = engine.connection(timeout_s=30)
        self._connection.request("POST", "/v1/completions", body=json.dumps(
            {"duration_s": duration_s, "stream": stream}).encode(), headers={"Content-Type": "application/json"})
        self._thread = threading.Thread(target=self._receive)
        self._thread.start()

    def _receive(self) -> None:
        try:
            response = self._connection.getresponse()
            self.status = response.status
            self.body = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.error = exc

    def result(self) -> "Pending":
        self._thread.join(30)
        return self


def test_vllm_abort_drops_everything_and_exits_2s_later():
    with EngineProcess("--kind", "vllm", "--max-running", "1") as engine:
        running, waiting, streaming = Pending(engine, 5), Pending(engine, 5), Pending(engine, 5, stream=True)
        time.sleep(0.3)
        engine.send_signal(signal.SIGTERM)
        sent_at = time.monotonic()
        for pending in (running, waiting):
            assert isinstance(pending.result().error, http.client.RemoteDisconnected)  # 0 bytes
        assert isinstance(streaming.result().error, http.client.IncompleteRead) or streaming.error is not None
        with pytest.raises(ConnectionRefusedError):
            engine.get("/health")
        assert engine.wait(5) == 0
        assert 1.5 < time.monotonic() - sent_at < 3.5
        assert engine.final_stats()["aborted"] == 3


def test_vllm_shutdown_timeout_with_nothing_in_flight_exits_as_the_real_one_did():
    # Real vLLM 0.32, --shutdown-timeout 20, SIGTERM after its last request ended: exit 3.9-4.6 s later.
    with EngineProcess("--kind", "vllm", "--shutdown-timeout", "20") as engine:
        engine.send_signal(signal.SIGTERM)
        sent_at = time.monotonic()
        assert engine.wait(15) == 0
        assert 3.5 < time.monotonic() - sent_at < 6.5


def test_vllm_shutdown_timeout_finishes_work_and_rejects_new():
    with EngineProcess("--kind", "vllm", "--shutdown-timeout", "10", "--drain-teardown-s", "0.2") as engine:
        running = Pending(engine, 1.5)
        time.sleep(0.2)
        engine.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        assert engine.get("/health")[0] == 200 and engine.get("/metrics")[0] == 200
        status, body, _ = engine.request("POST", "/v1/completions", {"duration_s": 0.1})
        assert status == 500 and b"cannot schedule new futures after shutdown" in body
        assert running.result().status == 200
        assert engine.wait(5) == 0
        stats = engine.final_stats()
        assert (stats["completed"], stats["rejected"]) == (1, 1)


def test_vllm_shutdown_timeout_expiry_fails_the_rest():
    with EngineProcess("--kind", "vllm", "--shutdown-timeout", "0.5", "--drain-teardown-s", "0") as engine:
        long = Pending(engine, 10)
        time.sleep(0.2)
        engine.send_signal(signal.SIGTERM)
        assert long.result().status == 500
        assert engine.wait(5) == 0


def test_sglang_drain_serves_new_work_and_exits_when_empty():
    with EngineProcess("--kind", "sglang") as engine:
        first = Pending(engine, 1.0)
        time.sleep(0.1)
        engine.send_signal(signal.SIGTERM)
        sent_at = time.monotonic()
        time.sleep(0.2)
        assert engine.get("/health")[0] == 503
        assert engine.get("/metrics")[0] == 200
        late = Pending(engine, 2.0)  # still accepted and served
        assert first.result().status == 200
        assert late.result().status == 200
        assert engine.wait(10) == 0
        # the queue is first checked 4 s after SIGTERM; the late request is done by then
        assert 3.5 < time.monotonic() - sent_at < 5.5
