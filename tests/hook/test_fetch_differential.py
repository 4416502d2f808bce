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
    # Framing RFC 9112 says a recipient must not trust (issue 15): a body must never come back.
    must_fail: bool = False


# Each connection gets the next scripted stream, sent after the request's head, then closed.
SCRIPTS: queue.Queue[Stream] = queue.Queue()


def _send_next_script(conn: socket.socket) -> None:
    for chunk in SCRIPTS.get().chunks:
        conn.sendall(chunk)


LISTENER = RawServer(_send_next_script)

# Long runs of whitespace in a value, around it, or as all of it (issue 25: a field regex once
# backtracked through them quadratically): well formed, read by the deadline.
WHITESPACE_FIELDS = [b"X-Pad: a" + b" " * 45000 + b"b", b"X-Pad: a" + b" \t" * 20000 + b"b",
                     b"X-Pad:" + b" " * 30000, b"X-Pad:\t" + b"a " * 15000 + b"\t" * 5000]
WELL_FORMED_FIELDS = [b"X-A: b", b"Server: engine", b"Date: today", b"Content-Type: text/plain", *WHITESPACE_FIELDS]
HEADER_JUNK = st.sampled_from([*WELL_FORMED_FIELDS, b": empty-name", b"no-colon", b"X-Long: " + b"y" * 3000,
                               b"Connection: keep-alive", b"X-Ctl: a\x00b", b"X-Pad : " + b" " * 20000 + b"b"])
# Bytes a listener writes behind a body that ends by its own framing (a Content-Length, the last
# chunk and its trailer): a spliced answer the reader cannot trust (issue 25, case 7).
BEHIND_THE_BODY = st.sampled_from([b'vllm:num_requests_running{engine="1"} 4\n', b"\r\n",
                                   b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"])
# A wire this short is one loopback segment: what follows the body has arrived when its end has.
ONE_SEGMENT = 16384


@st.composite
def chunked(draw, body: bytes) -> tuple[bytes, bool, bool]:
    """A chunked encoding of body, whether it stayed well formed, and whether its framing is one a
    client must refuse (a size that is not hex digits, data running past its size)."""
    out, at, ok, refuse = b"", 0, True, False
    while at < len(body):
        size = draw(st.integers(1, max(1, len(body) - at)))
        part = body[at:at + size]
        size_text = b"%x" % len(part)
        size_text += draw(st.sampled_from([b"", b"", b"", b";ext", b" ; name=value", b';q="x"']))  # extensions: fine
        end = b"\r\n"
        edit = draw(st.integers(0, 14))
        if edit == 0:
            size_text, ok = draw(st.sampled_from([b"zz", b"-1", b"", b"ffffffffffffffffffff", b"0x5", b"+5",
                                                  b" 5", b"5_0", b"\xd9\xa5"])), False
            refuse = True
        elif edit == 1:
            end, ok, refuse = draw(st.sampled_from([b"XY", b"\r", b"x\r\n"])), False, True  # data past its size
        out += size_text + b"\r\n" + part + end
        at += size
    if draw(st.integers(0, 9)):
        out += b"0\r\n\r\n"
    else:
        ok = False  # no last chunk
    return out, ok, refuse


# Interim responses a server may send before the final one (RFC 9110 §15.2): skipped.
INTERIM = st.sampled_from([b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n",
                           b"HTTP/1.1 102 Processing\r\n\r\n", b"HTTP/1.1 199 Misc\r\n\r\n"])


@st.composite
def streams(draw) -> Stream:
    body = draw(st.binary(max_size=6000))
    status = draw(st.sampled_from([b"HTTP/1.1 200 OK", b"HTTP/1.1 200 OK", b"HTTP/1.0 200 OK", b"HTTP/1.1 204 No",
                                   b"HTTP/1.1 302 Found", b"HTTP/1.1 500 Err", b"HTTP/1.1 100 Continue",
                                   b"HTTP/9 200 OK", b"ICY 200 OK", b"HTTP/1.1 2000 OK", b"garbage", b""]))
    well_formed_status = status in (b"HTTP/1.1 200 OK", b"HTTP/1.0 200 OK")
    headers = draw(st.lists(HEADER_JUNK, max_size=4))
    if draw(st.integers(0, 3)) == 0:
        headers.insert(0, draw(st.sampled_from(WHITESPACE_FIELDS)))
    framing = draw(st.sampled_from(["length", "length", "chunked", "chunked", "close", "bad_length", "short_length",
                                    "long_length", "both", "conflicting_lengths", "same_lengths", "codings"]))
    ok = well_formed_status and all(h in WELL_FORMED_FIELDS for h in headers)
    refuse = False  # framing a client must refuse, whatever else is wrong
    if framing == "length":
        headers.append(b"Content-Length: %d" % len(body))
        payload = body
    elif framing == "chunked":
        headers.append(b"Transfer-Encoding: chunked")
        payload, chunk_ok, refuse = draw(chunked(body))
        ok = ok and chunk_ok and not status.startswith(b"HTTP/1.0")  # RFC 9112 §6.1: faulty on HTTP/1.0
        refuse = refuse or status.startswith(b"HTTP/1.0")
    elif framing == "close":
        payload = body  # the body runs to the close: whole only if its last line has its line feed
        if body and not body.endswith(b"\n"):
            ok, refuse = False, True
    elif framing == "bad_length":
        headers.append(b"Content-Length: " + draw(st.sampled_from([b"abc", b"-5", b"1e3", b"5, 6", b"", b"+%d" % len(body),
                                                                    b"%d_0" % len(body), b"0x10", b"%d 0" % len(body)])))
        payload, ok, refuse = body, False, True
    elif framing == "short_length":
        headers.append(b"Content-Length: %d" % (len(body) + 10))  # promises more than it sends
        payload, ok = body, False
    elif framing == "long_length":
        headers.append(b"Content-Length: %d" % max(0, len(body) - 1))
        payload, ok = body, False
    elif framing == "conflicting_lengths":  # RFC 9112 §6.3: unrecoverable
        other = draw(st.sampled_from([len(body) + 1, max(0, len(body) - 1), 0]))
        lengths = [b"Content-Length: %d" % len(body), b"Content-Length: %d" % other]
        headers += draw(st.sampled_from([lengths, lengths[::-1], [b"Content-Length: %d, %d" % (len(body), other)]]))
        payload, ok, refuse = body, False, other != len(body)
    elif framing == "same_lengths":  # the same value twice: one length (§6.3 allows it)
        headers += draw(st.sampled_from([[b"Content-Length: %d" % len(body)] * 2, [b"Content-Length: %d, %d" % (len(body),
                                                                                                          len(body))]]))
        payload = body
    elif framing == "codings":  # a transfer coding nobody asked for, or chunked twice
        headers.append(b"Transfer-Encoding: " + draw(st.sampled_from([b"gzip", b"gzip, chunked", b"chunked, chunked",
                                                                       b"identity", b"chunked;x"])))
        payload, ok, refuse = body, False, True
    else:
        headers += [b"Content-Length: %d" % len(body), b"Transfer-Encoding: chunked"]
        payload, ok, refuse = body, False, True
    interim = draw(st.lists(INTERIM, max_size=3)) if draw(st.integers(0, 3)) == 0 else []
    if draw(st.integers(0, 19)) == 0:
        interim.append(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n")  # asked for by nobody
        ok, refuse = False, True
    behind = b""
    if framing in ("length", "chunked", "same_lengths") and draw(st.integers(0, 2)) == 0:
        behind = draw(BEHIND_THE_BODY)
        payload, ok, refuse = payload + behind, False, True
    if not well_formed_status or headers != [h for h in headers if h in WELL_FORMED_FIELDS
                                             or h.startswith((b"Content-Length", b"Transfer-Encoding"))]:
        refuse = False  # another fault may decide first (a status, a junk field): any failure will do
    wire = b"".join(interim) + status + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + payload
    if draw(st.integers(0, 9)) == 0:
        wire, ok, refuse = wire[: draw(st.integers(0, len(wire)))], False, False  # closed early
    cuts = sorted(draw(st.lists(st.integers(0, len(wire)), max_size=4)))
    pieces = tuple(wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)]) if wire[a:b])
    if behind and (len(pieces) > 1 or len(wire) > ONE_SEGMENT):
        refuse = False  # the bytes behind may arrive after the body was read: any outcome but a wrong body
    return Stream(pieces, body if ok and len(body) <= MAX_BODY else None, must_fail=refuse)


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
        assert not stream.must_fail, f"framing a client must refuse was read: {response.body[:200]!r}"
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
