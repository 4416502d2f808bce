"""The listener under aiohttp: the aiohttp internals it relies on, then, on a real server, what a
client can make the sidecar hold is bounded: connections, request lines, headers, idle time."""

import inspect
import json
import socket
import time

import aiohttp
import pytest
from aiohttp import web, web_runner, web_server

from sidecar.site import JsonErrorRequestHandler, LimitedTCPSite

from .sidecar_process import SidecarProcess


# --- the aiohttp internals sidecar/site.py relies on: a change fails here, not in production ---

def test_aiohttp_is_a_version_this_contract_was_checked_against():
    major, minor = (int(p) for p in aiohttp.__version__.split(".")[:2])
    assert (major, minor) == (3, 14), "re-check sidecar/site.py against this aiohttp, then widen the pin"


def test_request_handler_is_built_as_the_server_builds_it():
    # The site constructs RequestHandler(server, loop=..., **handler_kwargs) itself, as
    # web.Server.__call__ does, so it can choose another protocol past the connection cap.
    call = inspect.getsource(web_server.Server.__call__)
    assert "RequestHandler(self, loop=self._loop, **self._kwargs)" in call
    params = inspect.signature(web.RequestHandler.__init__).parameters
    for name in ("manager", "loop", "keepalive_timeout", "access_log", "max_line_size", "max_field_size",
                 "max_headers"):
        assert name in params, name
    assert params["loop"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "__slots__" in vars(web.RequestHandler)  # the subclass declares its own slots


def test_handle_error_signature_and_what_it_reads():
    params = list(inspect.signature(web.RequestHandler.handle_error).parameters)
    assert params == ["self", "request", "status", "exc", "message"]
    assert JsonErrorRequestHandler.handle_error.__qualname__.startswith("JsonErrorRequestHandler")
    assert hasattr(aiohttp.http_writer.StreamWriter, "output_size")


def test_server_counts_its_connections():
    assert isinstance(inspect.getattr_static(web_server.Server, "connections"), property)


def test_base_site_keeps_its_listener_in_server_and_closes_it_on_stop():
    init = inspect.getsource(web_runner.BaseSite.__init__)
    assert "self._server: asyncio.AbstractServer | None = None" in init and "self._backlog = backlog" in init
    assert "self._server.close()" in inspect.getsource(web_runner.BaseSite.stop)
    assert "_reg_site(self)" in inspect.getsource(web_runner.BaseSite.start)
    assert issubclass(LimitedTCPSite, web_runner.BaseSite)


# --- on a real server ---


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
