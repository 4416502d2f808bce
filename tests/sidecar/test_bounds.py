"""What a client can make the sidecar hold is bounded: connections, request lines, headers, idle time."""

import json
import socket
import time

import pytest

from .sidecar_process import SidecarProcess


@pytest.fixture(scope="module")
def small(vllm_engine):
    with SidecarProcess("--port", str(vllm_engine.port), "--max-connections", "2") as s:
        yield s


def raw_exchange(port, data: bytes, timeout_s=5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as conn:
        conn.sendall(data)
        chunks = []
        while True:
            try:
                chunk = conn.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def test_connections_past_the_cap_get_a_json_503(small):
    held = [socket.create_connection(("127.0.0.1", small.port)) for _ in range(2)]
    try:
        time.sleep(0.2)  # let the server register both
        reply = raw_exchange(small.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert reply.startswith(b"HTTP/1.1 503")
        assert json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"] == "too_many_connections"
    finally:
        for conn in held:
            conn.close()
    time.sleep(0.2)
    assert small.request("GET", "/healthz")[0] == 200  # freed slots serve again
    _, body, _ = small.request("GET", "/metrics")
    assert 'modeldrain_sidecar_requests_total{code="503",route="rejected"} 1.0' in body.decode()


def status_and_error(reply: bytes) -> tuple[int, str]:
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)["error"]


def test_long_request_lines_and_headers_get_json_errors(small):
    line = b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    big_header = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 5000 + b"\r\n\r\n"
    many = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(40)) + b"\r\n"
    not_http = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64  # a TLS ClientHello
    for data in (line, big_header, many, not_http):
        status, code = status_and_error(raw_exchange(small.port, data))
        assert status == 400 and code == "bad_request"
        assert b"aaaa" not in raw_exchange(small.port, line)  # the input is never echoed
    _, body, _ = small.request("GET", "/metrics")
    assert 'modeldrain_sidecar_requests_total{code="400",route="malformed"}' in body.decode()
    assert "Traceback" not in small.log_text()


def test_a_body_is_refused(small):
    status, body, _ = small.request("GET", "/healthz", {"Content-Length": "5000"})
    assert status == 413 and json.loads(body)["error"] == "request_too_large"
