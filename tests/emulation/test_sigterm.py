"""SIGTERM as each engine takes it: vLLM aborts (or drains with --shutdown-timeout), SGLang drains."""

from __future__ import annotations

import http.client
import json
import signal
import socket
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
        except Exception as exc:  # kept for the test to look at (a hang-up mid-stream raises ValueError)
            self.error = exc

    def result(self, timeout_s: float = 30) -> "Pending":
        self._thread.join(timeout_s)
        return self

    @property
    def answered(self) -> bool:
        return self.status is not None

    def hang_up(self) -> None:
        """The client gives up: its connection closes (the receiving thread then ends with an error)."""
        sock = self._connection.sock
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
        self._connection.close()
        self._thread.join(10)


def test_vllm_abort_answers_nothing_and_lingers_until_its_clients_go_then_exits_half_a_second_later():
    # Real vLLM 0.32 (bench/engines/matrix.py): the requests SIGTERM finds get no answer, their
    # connections stay open, the process stays until those clients hang up (in a Pod: kubelet's
    # SIGKILL), and with none waiting it exits 0.37-1.03 s after.
    with EngineProcess("--kind", "vllm", "--max-running", "1") as engine:
        running, waiting, streaming = Pending(engine, 5), Pending(engine, 5), Pending(engine, 5, stream=True)
        idle = engine.connection(timeout_s=5)
        idle.request("GET", "/health")
        assert idle.getresponse().read() is not None  # a keep-alive connection, now idle
        time.sleep(0.3)
        engine.send_signal(signal.SIGTERM)
        time.sleep(1.5)
        with pytest.raises(ConnectionRefusedError):
            engine.get("/health")
        assert engine.process is not None and engine.process.poll() is None  # lingering: clients wait
        assert not any(p.answered for p in (running, waiting))  # 0 bytes of an answer
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):  # the idle one was closed
            idle.request("GET", "/health")
            idle.getresponse()
        for pending in (running, waiting, streaming):
            pending.hang_up()
        hung_up_at = time.monotonic()
        assert engine.wait(5) == 0
        assert time.monotonic() - hung_up_at < 2.0
        assert engine.final_stats()["aborted"] == 3


def test_vllm_abort_with_nothing_in_flight_exits_within_a_second():
    with EngineProcess("--kind", "vllm") as engine:
        engine.send_signal(signal.SIGTERM)
        sent_at = time.monotonic()
        assert engine.wait(5) == 0
        assert time.monotonic() - sent_at < 1.5


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
        assert engine.wait(15) == 0
        # SGLang's watchdog looks 0-5 s after SIGTERM (its clock runs from the server's start), again
        # every 5 s while work remains (the late request ends ~2.3 s in), then ~1.4 s of teardown.
        assert 2.3 + 1.4 - 0.2 < time.monotonic() - sent_at < 2.3 + 5 + 1.4 + 1.5
