"""The HTTP fetch against raw byte streams: whatever a listener sends, the fetch returns the body a
well-formed response carries, or a classified FetchError, by its deadline; never anything else.

`make test` runs MODELDRAIN_FUZZ_EXAMPLES (default 150) streams; `make fuzz` many more.
"""

from __future__ import annotations

import os
import queue
import socket
import time
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emulation.raw_server import RawServer
from modeldrain.hook.fetch import FetchError, fetch
from modeldrain.hook.outcome import ReadOutcome
from modeldrain.hook.target import Target

EXAMPLES = int(os.environ.get("MODELDRAIN_FUZZ_EXAMPLES", "150"))
TIMEOUT_S = 0.5
MAX_BODY = 4096
# A failed fetch is one of these; "unmeasurable" ones only for what a listener can say on purpose.
FAILURES = {ReadOutcome.TIMEOUT, ReadOutcome.RESET, ReadOutcome.UNPARSEABLE, ReadOutcome.TOO_LARGE,
            ReadOutcome.HTTP_ERROR}


@dataclass(frozen=True)
class Stream:
    chunks: tuple[bytes, ...]  # sent one after another, then the connection closes
    body: bytes | None  # what a correct client reads, when the stream is a well-formed 200


# Each connection gets the next scripted stream, sent after the request's head, then closed.
SCRIPTS: queue.Queue[Stream] = queue.Queue()


def _send_next_script(conn: socket.socket) -> None:
    for chunk in SCRIPTS.get().chunks:
        conn.sendall(chunk)


LISTENER = RawServer(_send_next_script)

HEADER_JUNK = st.sampled_from([b"X-A: b", b"Server: engine", b"Date: today", b": empty-name", b"no-colon",
                               b"X-Long: " + b"y" * 3000, b"Connection: keep-alive", b"Content-Type: text/plain"])


@st.composite
def chunked(draw, body: bytes) -> tuple[bytes, bool]:
    """A chunked encoding of body, and whether it stayed well formed."""
    out, at, ok = b"", 0, True
    while at < len(body):
        size = draw(st.integers(1, max(1, len(body) - at)))
        part = body[at:at + size]
        size_text = b"%x" % len(part)
        if draw(st.integers(0, 14)) == 0:
            size_text, ok = draw(st.sampled_from([b"zz", b"-1", b"", b"ffffffffffffffffffff", b"1 ; ext", b"0x5"])), False
        out += size_text + b"\r\n" + part + b"\r\n"
        at += size
    if draw(st.integers(0, 9)):
        out += b"0\r\n\r\n"
    else:
        ok = False  # no last chunk
    return out, ok


@st.composite
def streams(draw) -> Stream:
    body = draw(st.binary(max_size=6000))
    status = draw(st.sampled_from([b"HTTP/1.1 200 OK", b"HTTP/1.1 200 OK", b"HTTP/1.0 200 OK", b"HTTP/1.1 204 No",
                                   b"HTTP/1.1 302 Found", b"HTTP/1.1 500 Err", b"HTTP/1.1 100 Continue",
                                   b"HTTP/9 200 OK", b"ICY 200 OK", b"HTTP/1.1 2000 OK", b"garbage", b""]))
    well_formed_status = status in (b"HTTP/1.1 200 OK", b"HTTP/1.0 200 OK")
    headers = draw(st.lists(HEADER_JUNK, max_size=4))
    framing = draw(st.sampled_from(["length", "length", "chunked", "chunked", "close", "bad_length", "short_length",
                                    "long_length", "both"]))
    ok = well_formed_status and all(h.startswith(b"X-A") or h.startswith(b"Server") or h.startswith(b"Date")
                                    or h.startswith(b"Content-Type") for h in headers)
    if framing == "length":
        headers.append(b"Content-Length: %d" % len(body))
        payload = body
    elif framing == "chunked":
        headers.append(b"Transfer-Encoding: chunked")
        payload, chunk_ok = draw(chunked(body))
        ok = ok and chunk_ok
    elif framing == "close":
        payload = body  # the body runs to the close
    elif framing == "bad_length":
        headers.append(b"Content-Length: " + draw(st.sampled_from([b"abc", b"-5", b"1e3", b"5, 6", b""])))
        payload, ok = body, False
    elif framing == "short_length":
        headers.append(b"Content-Length: %d" % (len(body) + 10))  # promises more than it sends
        payload, ok = body, False
    elif framing == "long_length":
        headers.append(b"Content-Length: %d" % max(0, len(body) - 1))
        payload, ok = body, False
    else:
        headers += [b"Content-Length: %d" % len(body), b"Transfer-Encoding: chunked"]
        payload, ok = body, False
    wire = status + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + payload
    if draw(st.integers(0, 9)) == 0:
        wire, ok = wire[: draw(st.integers(0, len(wire)))], False  # closed early
    cuts = sorted(draw(st.lists(st.integers(0, len(wire)), max_size=4)))
    pieces = tuple(wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)]) if wire[a:b])
    return Stream(pieces, body if ok and len(body) <= MAX_BODY else None)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(streams())
def test_fetch_returns_the_body_or_a_classified_failure_by_its_deadline(stream):
    SCRIPTS.put(stream)
    started = time.monotonic()
    try:
        response = fetch(Target("http", LISTENER.port, "/metrics"), timeout_s=TIMEOUT_S, max_body_bytes=MAX_BODY)
    except FetchError as exc:
        assert exc.outcome in FAILURES, exc.detail
        assert stream.body is None, f"a well-formed response failed: {exc.outcome} {exc.detail}"
    else:
        assert 200 <= response.status < 300 and len(response.body) <= MAX_BODY
        if stream.body is not None:
            assert response.body == stream.body
    assert time.monotonic() - started < TIMEOUT_S + 0.5


@pytest.mark.parametrize("wire", [
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",  # a chunk size not in hex
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\nabc",  # a size past every cap
])
def test_streams_that_once_raised_past_the_fetch(wire):
    SCRIPTS.put(Stream((wire,), None))
    with pytest.raises(FetchError) as raised:
        fetch(Target("http", LISTENER.port, "/metrics"), timeout_s=TIMEOUT_S, max_body_bytes=MAX_BODY)
    assert raised.value.outcome in FAILURES
