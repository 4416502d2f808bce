"""One bounded GET over real loopback sockets: what it sends, and how each failure is classified."""

import socket
import threading
import ssl
import time

import pytest
import trustme

from modeldrain.hook.fetch import FetchError, fetch
from modeldrain.hook.outcome import ReadOutcome
from modeldrain.hook.target import Target

from emulation.raw_server import canned, drip, hang, http_response

BODY = b"vllm:num_requests_running 2\nvllm:num_requests_waiting 1\n"


def get(target, timeout_s=2.0, max_body=1 << 20):
    return fetch(target, timeout_s=timeout_s, max_body_bytes=max_body)


def failure(target, **kwargs) -> FetchError:
    with pytest.raises(FetchError) as raised:
        get(target, **kwargs)
    return raised.value


def test_request_is_a_plain_get_for_the_text_format(serve):
    port = serve(canned(http_response(BODY))).port
    response = get(Target("http", port, "/metrics?x=1"))
    requests = serve.servers[0].requests
    assert response.status == 200 and response.body == BODY
    assert response.content_type == "text/plain; version=0.0.4"
    head = requests[0].decode("ascii").split("\r\n")
    assert head[0] == "GET /metrics?x=1 HTTP/1.1"
    headers = dict(line.split(": ", 1) for line in head[1:] if line)
    assert headers["Host"] == f"127.0.0.1:{port}"
    assert headers["Accept"].startswith("text/plain;version=0.0.4") and "openmetrics" not in headers["Accept"]
    assert headers["Connection"] == "close" and headers["Accept-Encoding"] == "identity"


def test_chunked_body(serve):
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               + b"%x\r\n" % len(BODY) + BODY + b"\r\n0\r\n\r\n")
    assert get(serve(canned(chunked))).body == BODY


def test_refused():
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # bound a moment ago, listened on by nobody now
    assert failure(Target("http", port, "/metrics")).outcome is ReadOutcome.REFUSED


@pytest.mark.parametrize("status", ["500 Internal Server Error", "302 Found", "404 Not Found", "301 Moved"])
def test_http_errors_and_redirects_are_not_followed(serve, status):
    answer = http_response(b"", status=status).replace(b"\r\n\r\n", b"\r\nLocation: http://x/\r\n\r\n", 1)
    error = failure(serve(canned(answer)))
    assert error.outcome is ReadOutcome.HTTP_ERROR and error.status == int(status[:3])


def test_hang_times_out_within_the_read_timeout(serve):
    t = time.monotonic()
    assert failure(serve(hang), timeout_s=0.5).outcome is ReadOutcome.TIMEOUT
    assert time.monotonic() - t < 1.5


def test_drip_is_bounded_end_to_end_not_per_byte(serve):
    t = time.monotonic()
    assert failure(serve(drip(http_response(BODY), every_s=0.2)), timeout_s=1.0).outcome is ReadOutcome.TIMEOUT
    assert time.monotonic() - t < 2.0  # per-recv timeouts alone would take ~20 s here


def test_slow_headers_are_bounded_too(serve):
    endless = (b"HTTP/1.1 200 OK\r\n" + b"X-Pad: y\r\n" * 100000)
    t = time.monotonic()
    error = failure(serve(drip(endless, every_s=0.001)), timeout_s=0.5)
    assert error.outcome in (ReadOutcome.TIMEOUT, ReadOutcome.UNPARSEABLE)
    assert time.monotonic() - t < 1.5


def test_garbage_that_is_not_http(serve):
    assert failure(serve(canned(b"SSH-2.0-OpenSSH\r\n\r\nhello"))).outcome is ReadOutcome.UNPARSEABLE


def test_closed_before_answering_and_mid_body_are_resets(serve):
    assert failure(serve(canned(b""))).outcome is ReadOutcome.RESET
    assert failure(serve(canned(http_response(BODY)[:-10]))).outcome is ReadOutcome.RESET


def test_over_size_body_by_length_and_by_stream(serve):
    big = http_response(BODY + b"#" * 5000)
    assert failure(serve(canned(big)), max_body=1000).outcome is ReadOutcome.TOO_LARGE
    streamed = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + BODY + b"#" * 5000
    assert failure(serve(canned(streamed)), max_body=1000).outcome is ReadOutcome.TOO_LARGE
    # A body read to its end without a length: fine under the cap.
    assert get(serve(canned(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + BODY))).body == BODY


@pytest.fixture(scope="module")
def tls_server_context():
    ca = trustme.CA()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("engine.default.svc").configure_cert(ctx)  # names a Service, not 127.0.0.1
    return ctx


def test_https_is_read_without_verifying_the_name(serve, tls_server_context):
    assert get(serve(canned(http_response(BODY)), tls=tls_server_context)).body == BODY


def test_https_against_plain_http_fails_the_handshake(serve):
    # A plain HTTP server answers the ClientHello with a 400, as uvicorn and aiohttp do.
    plain = serve(canned(http_response(b"", status="400 Bad Request")), wait_for_request=False)
    assert failure(Target("https", plain.port, "/metrics")).outcome is ReadOutcome.TLS_ERROR


@pytest.mark.parametrize("host", ["a..b", "x" * 64 + ".example"])
def test_a_name_the_resolver_refuses_to_encode_is_a_connect_error_not_a_dead_thread(host):
    crashed = []
    previous, threading.excepthook = threading.excepthook, crashed.append
    try:
        with pytest.raises(FetchError) as failure:
            get(Target("http", 8490, "/v1/work", host=host, source="leader"), timeout_s=2.0)
    finally:
        threading.excepthook = previous
    assert failure.value.outcome is ReadOutcome.CONNECT_ERROR and f"cannot resolve {host}" in str(failure.value)
    assert crashed == []  # the lookup thread ended on its own, with its error handed back
