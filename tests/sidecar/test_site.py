"""The listener under aiohttp: the aiohttp internals it relies on, then, on a real server, what a
client can make the sidecar hold is bounded: connections, request lines, headers, idle time."""

import inspect
import json
import socket
import time

import aiohttp
import pytest
from aiohttp import web, web_runner, web_server

from modeldrain.sidecar.site import JsonErrorRequestHandler, LimitedTCPSite

from .sidecar_process import SidecarProcess

# --- the aiohttp internals modeldrain/sidecar/site.py relies on: a change fails here, not in production ---

def test_aiohttp_is_a_version_this_contract_was_checked_against():
    major, minor = (int(p) for p in aiohttp.__version__.split(".")[:2])
    assert (major, minor) == (3, 14), "re-check modeldrain/sidecar/site.py against this aiohttp, then widen the pin"


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


def test_server_counts_its_connections_in_arrival_order_and_handlers_flag_their_requests():
    assert isinstance(inspect.getattr_static(web_server.Server, "connections"), property)
    assert "list(self._connections.keys())" in inspect.getsource(web_server.Server)  # a dict: arrival order
    handle = inspect.getsource(web.RequestHandler._handle_request)
    assert "self._request_in_progress = True" in handle and "self._request_in_progress = False" in handle
    assert "_request_in_progress" in web.RequestHandler.__slots__
    assert "self.transport.close()" in inspect.getsource(web.RequestHandler.force_close)


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


def keep_alive(port: int, path: str = "/healthz") -> socket.socket:
    """A client that sent one request, read its answer, and keeps the connection open."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=5)
    conn.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    reply = b""
    while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
        reply += conn.recv(4096)
    assert reply.startswith(b"HTTP/1.1 200")
    return conn


def closed_by_server(conn: socket.socket, timeout_s: float = 2.0) -> bool:
    conn.settimeout(timeout_s)
    try:
        return conn.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_at_the_cap_the_oldest_idle_connection_gives_way(small):
    oldest, newer = keep_alive(small.port), keep_alive(small.port)
    slow = None
    try:
        # A third client (the controller, a probe) is served: the oldest idle connection gives way.
        assert small.request("GET", "/healthz")[0] == 200
        assert closed_by_server(oldest) and not closed_by_server(newer, 0.3)
        # A client trickling its request line holds nothing either.
        slow = socket.create_connection(("127.0.0.1", small.port))
        slow.sendall(b"GET /hea")
        time.sleep(0.2)
        assert small.request("GET", "/readyz")[0] == 200
        _, body, _ = small.request("GET", "/metrics")
        assert "modeldrain_sidecar_connections_evicted_total " in body.decode()
    finally:
        for conn in (oldest, newer, slow):
            if conn is not None:
                conn.close()


@pytest.fixture(scope="module")
def stalled():
    """A sidecar of two connections whose engine accepts and never answers: /v1/work stays in progress."""
    engine = socket.create_server(("127.0.0.1", 0))  # listens, never accepts: reads time out
    with SidecarProcess("--port", str(engine.getsockname()[1]), "--engine", "vllm", "--read-timeout", "3",
                        "--max-connections", "2") as s:
        yield s
    engine.close()


def test_only_when_every_connection_runs_a_request_does_a_new_one_get_a_json_503(stalled):
    busy = []
    for _ in range(2):
        conn = socket.create_connection(("127.0.0.1", stalled.port), timeout=10)
        conn.sendall(b"GET /v1/work HTTP/1.1\r\nHost: x\r\n\r\n")
        busy.append(conn)
    try:
        time.sleep(0.3)  # both requests are in their handlers, waiting on the engine
        reply = raw_exchange(stalled.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert reply.startswith(b"HTTP/1.1 503")
        assert json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"] == "too_many_connections"
    finally:
        for conn in busy:
            conn.close()
    # The two handlers still wait for their read (bounded by --read-timeout), then the slots free up.
    deadline_at = time.monotonic() + 10
    while stalled.request("GET", "/healthz")[0] != 200:
        assert time.monotonic() < deadline_at, "slots never freed"
        time.sleep(0.2)
    _, body, _ = stalled.request("GET", "/metrics")
    assert 'modeldrain_sidecar_requests_total{code="503",route="rejected"}' in body.decode()


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
