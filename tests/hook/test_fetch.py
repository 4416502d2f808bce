"""One bounded GET over real loopback sockets: what it sends, and how each failure is classified."""

import io
import socket
import ssl
import threading
import time

import pytest
import trustme

from emulation.raw_server import canned, drip, hang, http_response
from modeldrain.hook import framing
from modeldrain.hook.fetch import FetchError, fetch
from modeldrain.hook.outcome import ReadOutcome
from modeldrain.hook.target import Target

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


# --- framing RFC 9112 calls unrecoverable is never a body (issue 15) ---

IDLE = b'vllm:num_requests_running{engine="0"} 0\nvllm:num_requests_waiting{engine="0"} 0\n'
HIDDEN_BUSY = b'vllm:num_requests_running{engine="1"} 4\n'


def head(*fields: bytes, status: bytes = b"HTTP/1.1 200 OK") -> bytes:
    return status + b"\r\n" + b"".join(f + b"\r\n" for f in fields) + b"\r\n"


@pytest.mark.parametrize("fields", [
    (b"Content-Length: %d" % len(IDLE), b"Content-Length: %d" % len(IDLE + HIDDEN_BUSY)),  # the first was taken
    (b"Content-Length: %d" % len(IDLE + HIDDEN_BUSY), b"Content-Length: %d" % len(IDLE)),
    (b"Content-Length: %d, %d" % (len(IDLE), len(IDLE + HIDDEN_BUSY)),),  # one field, two values
], ids=["two-fields", "two-fields-reversed", "one-field-two-values"])
def test_conflicting_content_lengths_are_unrecoverable_not_the_first_one(serve, fields):
    error = failure(serve(canned(head(*fields) + IDLE + HIDDEN_BUSY)))
    assert error.outcome is ReadOutcome.UNPARSEABLE and "conflicting Content-Length" in error.detail


def test_the_same_content_length_twice_is_one_length(serve):
    n = b"%d" % len(IDLE)
    for fields in [(b"Content-Length: " + n, b"Content-Length: " + n), (b"Content-Length: " + n + b", " + n,)]:
        assert get(serve(canned(head(*fields) + IDLE))).body == IDLE


@pytest.mark.parametrize("value", [b"+%d", b"%d_0", b"0x%d", b"%d 0", b"-%d", b"%de0", b"\xd9\xa5%d", b""])
def test_a_content_length_that_is_not_digits_is_unrecoverable_not_read_to_the_close(serve, value):
    # http.client took int() of it ('+58', '5_0' parse) or, failing, read the body to the close.
    length = value % len(IDLE) if b"%d" in value else value
    error = failure(serve(canned(head(b"Content-Length: " + length) + IDLE)))
    assert error.outcome is ReadOutcome.UNPARSEABLE and "not a number of octets" in error.detail


def test_spaces_around_a_content_length_are_whitespace_of_the_field_not_of_the_number(serve):
    assert get(serve(canned(head(b"Content-Length:   %d  " % len(IDLE)) + IDLE))).body == IDLE


@pytest.mark.parametrize("fields, says", [
    ((b"Transfer-Encoding: chunked", b"Content-Length: 5"), "both Transfer-Encoding and Content-Length"),
    ((b"Content-Length: 5", b"Transfer-Encoding: chunked"), "both Transfer-Encoding and Content-Length"),
    ((b"Transfer-Encoding: gzip, chunked",), "transfer coding"),
    ((b"Transfer-Encoding: chunked", b"Transfer-Encoding: chunked"), "transfer coding"),  # chunked twice
    ((b"Transfer-Encoding: identity",), "transfer coding"),
])
def test_transfer_codings_the_rfc_treats_as_errors_are_unparseable(serve, fields, says):
    chunked_idle = b"%x\r\n" % len(IDLE) + IDLE + b"\r\n0\r\n\r\n"
    error = failure(serve(canned(head(*fields) + chunked_idle)))
    assert error.outcome is ReadOutcome.UNPARSEABLE and says in error.detail


def test_transfer_encoding_in_an_http_1_0_response_is_faulty_framing(serve):
    chunked_idle = b"%x\r\n" % len(IDLE) + IDLE + b"\r\n0\r\n\r\n"
    error = failure(serve(canned(head(b"Transfer-Encoding: chunked", status=b"HTTP/1.0 200 OK") + chunked_idle)))
    assert error.outcome is ReadOutcome.UNPARSEABLE and "HTTP/1.0" in error.detail


@pytest.mark.parametrize("size", [b"0x%x", b"+%x", b" %x", b"%x_", b"-%x"])
def test_a_chunk_size_that_is_not_hex_digits_is_unparseable(serve, size):
    wire = head(b"Transfer-Encoding: chunked") + (size % len(IDLE)) + b"\r\n" + IDLE + b"\r\n0\r\n\r\n"
    assert failure(serve(canned(wire))).outcome is ReadOutcome.UNPARSEABLE


def test_chunk_data_that_runs_past_its_size_is_unparseable(serve):
    # The size covers the idle lines only; the busy line follows where the CRLF must be.
    wire = head(b"Transfer-Encoding: chunked") + b"%x\r\n" % len(IDLE) + IDLE + HIDDEN_BUSY + b"\r\n0\r\n\r\n"
    error = failure(serve(canned(wire)))
    assert error.outcome is ReadOutcome.UNPARSEABLE and "runs past its size" in error.detail


def test_chunk_extensions_and_a_trailer_are_read_past(serve):
    wire = (head(b"Transfer-Encoding: chunked") + b"%x ; name=value\r\n" % len(IDLE) + IDLE + b"\r\n"
            + b"0;last\r\nX-Trailer: t\r\n\r\n")
    assert get(serve(canned(wire))).body == IDLE


def test_a_close_delimited_body_that_ends_mid_line_is_truncated_not_idle(serve):
    cut = IDLE + HIDDEN_BUSY[:30]  # vllm:num_requests_running{engi...
    error = failure(serve(canned(head(b"Connection: close") + IDLE + b"vllm:num_requests_running 0")))
    assert error.outcome is ReadOutcome.RESET and "ends mid-line" in error.detail
    assert failure(serve(canned(head() + cut))).outcome is ReadOutcome.RESET
    assert get(serve(canned(head() + IDLE))).body == IDLE  # its last line whole: the body is whole


def test_a_close_delimited_openmetrics_body_may_end_at_eof_without_a_line_feed(serve):
    body = IDLE + b"# EOF"
    om = b"Content-Type: application/openmetrics-text; version=1.0.0"
    assert get(serve(canned(head(om) + body))).body == body
    assert failure(serve(canned(head() + body))).outcome is ReadOutcome.RESET  # as text: mid-line


def test_more_bytes_behind_a_content_length_body_make_the_length_wrong(serve):
    error = failure(serve(canned(head(b"Content-Length: %d" % len(IDLE)) + IDLE + HIDDEN_BUSY)))
    assert error.outcome is ReadOutcome.UNPARSEABLE and "more bytes follow" in error.detail


@pytest.mark.parametrize("interim", [
    b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n",
    b"HTTP/1.1 102 Processing\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n\r\n",
])
def test_interim_responses_are_skipped_to_the_final_one(serve, interim):
    # A 103 was handed back as the response: an empty body, read as incomplete.
    response = get(serve(canned(interim + http_response(BODY))))
    assert response.status == 200 and response.body == BODY


def test_a_101_nobody_asked_for_is_unparseable(serve):
    wire = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n" + http_response(BODY)
    assert failure(serve(canned(wire))).outcome is ReadOutcome.UNPARSEABLE


def test_a_flood_of_interim_responses_is_bounded_by_count_and_by_the_deadline(serve):
    burst = b"HTTP/1.1 103 Early Hints\r\n\r\n" * 100000 + http_response(BODY)  # all at once: 2.8 MB
    started = time.monotonic()
    error = failure(serve(canned(burst)), timeout_s=1.0)
    assert error.outcome is ReadOutcome.UNPARSEABLE and "interim" in error.detail
    assert time.monotonic() - started < 1.5
    started = time.monotonic()  # one at a time, forever: the deadline ends it
    slow = failure(serve(drip(b"HTTP/1.1 102 Processing\r\n\r\n" * 1000, every_s=0.02)), timeout_s=0.5)
    assert slow.outcome in (ReadOutcome.TIMEOUT, ReadOutcome.UNPARSEABLE)
    assert time.monotonic() - started < 1.0


# --- every parse linear, every read bounded by its deadline (issue 25, case 1) ---

# A field value that is a long run of whitespace between two characters: the field regex this
# reader had once backtracked through it quadratically (45,000 spaces: ~19 s on the parse alone).
PAD_45000 = (b"X-Pad: a" + b" " * 45000 + b"b",)
PAD_3_X_20000 = (b"X-Pad: a" + b" " * 20000 + b"b",) * 3
PAD_TABS = (b"X-Pad: a" + b" \t" * 20000 + b"b",)


@pytest.mark.parametrize("pads", [PAD_45000, PAD_3_X_20000, PAD_TABS], ids=["45000-spaces", "3x20000-spaces", "tabs"])
def test_a_field_value_of_long_whitespace_runs_is_read_by_the_deadline(serve, pads):
    busy = b'vllm:num_requests_running{engine="0"} 3\n'
    started = time.monotonic()
    response = get(serve(canned(head(*pads, b"Content-Length: %d" % len(busy)) + busy)), timeout_s=1.0)
    assert response.body == busy
    assert time.monotonic() - started < 1.5


WHOLE_RESPONSES = {
    "length": head(b"Content-Length: %d" % len(IDLE)) + IDLE,
    "chunked": head(b"Transfer-Encoding: chunked") + b"%x\r\n" % len(IDLE) + IDLE + b"\r\n0\r\n\r\n",
    "close": head() + IDLE,
}


def buffered(wire: bytes) -> io.BufferedReader:
    return io.BufferedReader(io.BytesIO(wire), 65536)


@pytest.mark.parametrize("kind", WHOLE_RESPONSES)
def test_a_parse_past_the_deadline_reads_nothing_however_much_is_buffered(kind):
    # The whole response is in memory: no recv is left to check the clock, the parse itself must.
    with pytest.raises(TimeoutError):
        framing.read_head(buffered(WHOLE_RESPONSES[kind]), deadline_at=time.monotonic())
    fp = buffered(WHOLE_RESPONSES[kind])
    parsed = framing.read_head(fp, deadline_at=time.monotonic() + 60)
    with pytest.raises(TimeoutError):
        framing.read_body(fp, parsed, framing.framing(parsed), 1 << 20, lambda: False, deadline_at=time.monotonic())
    fp = buffered(WHOLE_RESPONSES[kind])  # the same bytes, in time: read whole
    parsed = framing.read_head(fp, deadline_at=time.monotonic() + 60)
    assert framing.read_body(fp, parsed, framing.framing(parsed), 1 << 20, lambda: False,
                             deadline_at=time.monotonic() + 60) == IDLE


# --- bytes behind a body that ends by its own framing (issue 25, case 7) ---

CHUNKED_IDLE = b"%x\r\n" % len(IDLE) + IDLE + b"\r\n"


@pytest.mark.parametrize("after_the_last_chunk", [
    b"0\r\n\r\n" + HIDDEN_BUSY,  # after the empty trailer
    b"0\r\nX-Trailer: t\r\n\r\n" + HIDDEN_BUSY,  # after a trailer field
    b"0\r\n\r\n\r\n",  # one more CRLF
], ids=["after-the-last-chunk", "after-a-trailer", "a-stray-crlf"])
def test_more_bytes_behind_a_chunked_body_make_its_framing_wrong(serve, after_the_last_chunk):
    error = failure(serve(canned(head(b"Transfer-Encoding: chunked") + CHUNKED_IDLE + after_the_last_chunk)))
    assert error.outcome is ReadOutcome.UNPARSEABLE and "more bytes follow its last chunk" in error.detail


def test_a_trailer_line_that_is_no_field_line_is_unparseable(serve):
    wire = head(b"Transfer-Encoding: chunked") + CHUNKED_IDLE + b"0\r\nsglang_num_running_reqs 4\r\n\r\n"
    error = failure(serve(canned(wire)))
    assert error.outcome is ReadOutcome.UNPARSEABLE and "not a field line" in error.detail


def test_a_close_inside_the_trailer_leaves_the_body_whole(serve):
    wire = head(b"Transfer-Encoding: chunked") + CHUNKED_IDLE + b"0\r\nX-Trailer: t\r\nX-Cut"
    assert get(serve(canned(wire))).body == IDLE


def test_bytes_behind_a_204_make_its_framing_wrong(serve):
    error = failure(serve(canned(head(status=b"HTTP/1.1 204 No Content") + IDLE + HIDDEN_BUSY)))
    assert error.outcome is ReadOutcome.UNPARSEABLE and "more bytes follow a 204" in error.detail
