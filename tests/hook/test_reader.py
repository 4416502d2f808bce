"""The reader over real loopback sockets: each failure becomes the right outcome, in time."""

import socket
import ssl
import time

import pytest
import trustme

from hook.engine import EngineHint
from hook.gauges import EngineKind, Role
from hook.outcome import ReadOutcome
from hook.reader import read_work
from hook.target import Target

from .rawserver import RawServer, canned, drip, hang, http_response

IDLE = b"vllm:num_requests_running{engine=\"0\"} 0\nvllm:num_requests_waiting{engine=\"0\"} 0\n"
BUSY = b"vllm:num_requests_running{engine=\"0\"} 2\nvllm:num_requests_waiting{engine=\"0\"} 1\n"
NOHINT = EngineHint()


@pytest.fixture
def serve():
    servers = []

    def start(respond, tls=None, wait_for_request=True):
        server = RawServer(respond, tls, wait_for_request)
        servers.append(server)
        return Target("https" if tls else "http", server.port, "/metrics")

    yield start
    for s in servers:
        s.close()


def read(target, timeout_s=2.0, max_body=1 << 20, hint=NOHINT):
    return read_work(target, hint, timeout_s=timeout_s, max_body_bytes=max_body)


def test_idle_and_busy(serve):
    assert read(serve(canned(http_response(IDLE)))).outcome is ReadOutcome.IDLE
    r = read(serve(canned(http_response(BUSY))))
    assert r.outcome is ReadOutcome.BUSY and r.in_flight == 3 and r.kind is EngineKind.VLLM


def test_chunked_body(serve):
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               + b"%x\r\n" % len(BUSY) + BUSY + b"\r\n0\r\n\r\n")
    assert read(serve(canned(chunked))).in_flight == 3


def test_refused():
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # bound a moment ago, listened on by nobody now
    free = Target("http", port, "/metrics")
    assert read(free).outcome is ReadOutcome.REFUSED


@pytest.mark.parametrize("status", ["500 Internal Server Error", "302 Found", "404 Not Found", "301 Moved"])
def test_http_errors_and_redirects_are_not_followed(serve, status):
    r = read(serve(canned(http_response(b"", status=status).replace(b"\r\n\r\n", b"\r\nLocation: http://x/\r\n\r\n", 1))))
    assert r.outcome is ReadOutcome.HTTP_ERROR and r.http_status == int(status[:3])


def test_hang_times_out_within_the_read_timeout(serve):
    t = time.monotonic()
    r = read(serve(hang), timeout_s=0.5)
    assert r.outcome is ReadOutcome.TIMEOUT
    assert time.monotonic() - t < 1.5


def test_drip_is_bounded_end_to_end_not_per_byte(serve):
    t = time.monotonic()
    r = read(serve(drip(http_response(IDLE), every_s=0.2)), timeout_s=1.0)
    assert r.outcome is ReadOutcome.TIMEOUT
    assert time.monotonic() - t < 2.0  # per-recv timeouts alone would take ~20 s here


def test_garbage_that_is_not_http(serve):
    assert read(serve(canned(b"SSH-2.0-OpenSSH\r\n\r\nhello"))).outcome is ReadOutcome.UNPARSEABLE


def test_garbage_body(serve):
    r = read(serve(canned(http_response(b"<html>not metrics</html>"))))
    assert r.outcome is ReadOutcome.INCOMPLETE  # no engine metrics at all


def test_closed_mid_body_is_reset(serve):
    truncated = http_response(BUSY)[:-10]
    assert read(serve(canned(truncated))).outcome is ReadOutcome.RESET


def test_over_size_body_by_length_and_by_stream(serve):
    big = http_response(IDLE + b"#" * 5000)
    assert read(serve(canned(big)), max_body=1000).outcome is ReadOutcome.TOO_LARGE
    streamed = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + IDLE + b"#" * 5000
    assert read(serve(canned(streamed)), max_body=1000).outcome is ReadOutcome.TOO_LARGE


def test_missing_gauge_is_incomplete_with_what_is_missing(serve):
    r = read(serve(canned(http_response(b"vllm:num_requests_running 0\n"))))
    assert r.outcome is ReadOutcome.INCOMPLETE and r.missing == ("vllm:num_requests_waiting",)


def test_hint_chooses_the_envelope(serve):
    body = b"sglang:num_running_reqs 0\nsglang:num_queue_reqs 0\n"
    target = serve(canned(http_response(body)))
    assert read(target).outcome is ReadOutcome.IDLE
    decode = EngineHint(kind=EngineKind.SGLANG, role=Role.DECODE)
    r = read(target, hint=decode)
    assert r.outcome is ReadOutcome.INCOMPLETE and "sglang:num_decode_prealloc_queue_reqs" in r.missing


@pytest.fixture(scope="module")
def tls_server_context():
    ca = trustme.CA()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("engine.default.svc").configure_cert(ctx)  # names a Service, not 127.0.0.1
    return ctx


def test_https_is_read_without_verifying_the_name(serve, tls_server_context):
    r = read(serve(canned(http_response(BUSY)), tls=tls_server_context))
    assert r.outcome is ReadOutcome.BUSY


def test_https_against_plain_http_fails_the_handshake(serve):
    # A plain HTTP server answers the ClientHello with a 400, as uvicorn and aiohttp do.
    plain = serve(canned(http_response(b"", status="400 Bad Request")), wait_for_request=False)
    r = read(Target("https", plain.port, "/metrics"))
    assert r.outcome is ReadOutcome.TLS_ERROR
