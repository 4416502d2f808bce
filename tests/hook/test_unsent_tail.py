"""A response still going out to a client that does not read makes a vLLM read busy, over real
sockets on 127.0.0.1 and this machine's own /proc/net/tcp: the kernel's side, not a written table."""

import socket
import threading
import time

import pytest

from emulation.raw_server import RawServer, http_response
from modeldrain.hook.config import ReadConfig
from modeldrain.hook.engine import EngineHint
from modeldrain.hook.gauges import EngineKind
from modeldrain.hook.kernel_sockets import UnsentWatch, unsent_watch
from modeldrain.hook.outcome import ReadOutcome
from modeldrain.hook.reader import EngineReader
from modeldrain.hook.target import Target
from tests.conftest import SCRAPES

# The real vLLM's idle scrape (~47 KB): the reader's own response is larger than a socket's
# first window, so its own connection shows unacknowledged bytes if anything does.
IDLE = (SCRAPES / "vllm-0.32.0-cpu-metrics-idle.txt").read_bytes()
VLLM = EngineHint(kind=EngineKind.VLLM)
# Far more than the kernel buffers on both ends hold: the writer blocks until the client reads.
RESPONSE_BYTES = 16 * 1024 * 1024
CLIENT_RCVBUF = 4096
# Generous: a loaded machine's threads and the kernel's acknowledgements.
SETTLE_S = 10.0


class SlowReaderEngine:
    """/metrics answers vLLM's idle scrape; any other path answers RESPONSE_BYTES, written by a
    thread that blocks while the client does not read (a stream's tail after the gauges' zero)."""

    def __init__(self) -> None:
        self.written = threading.Event()
        self.metrics = IDLE
        self.server = RawServer(self._respond, wait_for_request=False)

    def _respond(self, conn: socket.socket) -> None:
        conn.settimeout(60)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(4096)
            if not chunk:
                return
            head += chunk
        if head.startswith(b"GET /metrics"):
            conn.sendall(http_response(self.metrics))
            return
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % RESPONSE_BYTES)
        conn.sendall(b"x" * RESPONSE_BYTES)
        self.written.set()


@pytest.fixture
def engine():
    served = SlowReaderEngine()
    yield served
    served.server.close()


def reader_for(port: int, watch: UnsentWatch) -> EngineReader:
    return EngineReader(ReadConfig(target=Target("http", port, "/metrics"), hint=VLLM, read_timeout_s=5.0,
                                   max_body_bytes=1 << 22, unsent=watch))


def wait_for(predicate, what: str):
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"not within {SETTLE_S:g} s: {what}")


def test_a_read_is_busy_while_a_response_goes_out_to_a_slow_reader_and_idle_once_it_is_read(engine):
    reader = reader_for(engine.server.port, unsent_watch("/proc"))
    assert reader.read(5.0).outcome is ReadOutcome.IDLE  # nothing going out yet: its own read is not work
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CLIENT_RCVBUF)
    client.connect(("127.0.0.1", engine.server.port))
    client.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    busy = wait_for(lambda: (r := reader.read(5.0)).outcome is ReadOutcome.BUSY and r, "a busy read")
    assert busy.in_flight == 1 and "still owe their clients" in busy.detail and busy.gauges, busy
    for _ in range(5):  # stays busy while the client does not read
        time.sleep(0.1)
        assert reader.read(5.0).outcome is ReadOutcome.BUSY
    received = 0
    while received < RESPONSE_BYTES:
        chunk = client.recv(1 << 20)
        assert chunk, "the server closed early"
        received += len(chunk)
    client.close()
    assert engine.written.wait(SETTLE_S)
    idle = wait_for(lambda: (r := reader.read(5.0)).outcome is ReadOutcome.IDLE and r, "an idle read")
    assert "nothing unsent on port" in idle.detail, idle


def test_the_same_read_without_the_watch_is_idle_while_the_tail_goes_out(engine):
    """What the watch changes: without it the gauges' zero is the whole read (the gap it closes)."""
    reader = reader_for(engine.server.port, UnsentWatch(None, "off: test"))
    with socket.socket() as client:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CLIENT_RCVBUF)
        client.connect(("127.0.0.1", engine.server.port))
        client.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        watched = reader_for(engine.server.port, unsent_watch("/proc"))
        wait_for(lambda: watched.read(5.0).outcome is ReadOutcome.BUSY, "the tail in the table")
        assert reader.read(5.0).outcome is ReadOutcome.IDLE


def test_the_readers_own_connections_never_count(engine):
    reader = reader_for(engine.server.port, unsent_watch("/proc"))
    outcomes = {reader.read(5.0).outcome for _ in range(40)}
    assert outcomes == {ReadOutcome.IDLE}


def test_a_table_that_fails_after_the_start_makes_the_read_incomplete_never_idle(engine, tmp_path):
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text("  sl  local_address\n   0: cut")
    reader = reader_for(engine.server.port, UnsentWatch(str(tmp_path), "on: test"))
    read = reader.read(5.0)
    assert read.outcome is ReadOutcome.INCOMPLETE and "the socket table" in read.detail, read


def test_sglang_reads_never_read_the_table(engine, tmp_path):
    """The watch is for vLLM (its SIGTERM cuts the tail): an SGLang read ignores even a broken table."""
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text("garbage")
    engine.metrics = (SCRAPES / "sglang-0.5.23-cpu-metrics-idle.txt").read_bytes()
    config = ReadConfig(target=Target("http", engine.server.port, "/metrics"), hint=EngineHint(kind=EngineKind.SGLANG),
                        read_timeout_s=5.0, max_body_bytes=1 << 22, unsent=UnsentWatch(str(tmp_path), "on: test"))
    read = EngineReader(config).read(5.0)
    assert read.kind is EngineKind.SGLANG and read.outcome is ReadOutcome.IDLE, read
    assert "socket table" not in read.detail and "unsent" not in read.detail, read
